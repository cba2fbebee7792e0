//go:build linux

package custom

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// shellSkill is a command skill that runs script with /bin/sh, as an
// attacker who got a shell skill (or found one) would.
func shellSkill(name, script string, env map[string]string) map[string]any {
	h := map[string]any{"type": "command", "command": []string{"/bin/sh", "-c", script}, "timeout_s": 20}
	if env != nil {
		h["env"] = env
	}
	return map[string]any{"name": name, "handler": h}
}

// probeSkill is a shellSkill whose answer is everything script printed,
// stdout and stderr, as {"hex": "..."}: any text survives the JSON.
func probeSkill(name, script string, env map[string]string) map[string]any {
	return shellSkill(name, `printf '{"hex":"'; { `+script+`
} 2>&1 | od -An -v -tx1 | tr -d ' \n'; printf '"}'`, env)
}

// callProbe calls a probeSkill and returns what its script printed.
func callProbe(t *testing.T, r *skills.Registry, name string) string {
	t.Helper()
	out, pe := callSkill(t, t.Context(), r, name, `{}`)
	if pe != nil {
		t.Fatalf("%s: %v", name, pe)
	}
	var got struct{ Hex string }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %s: %v", name, out, err)
	}
	b, err := hex.DecodeString(got.Hex)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return string(b)
}

// TestCommandRunCap floods command skills with N+3 concurrent calls
// of a program that sleeps: exactly N run, the other 3 are refused at once
// with -32005 naming the limit, and the slots come back when the runs end.
// The cap is one for all the command skills of the file.
func TestCommandRunCap(t *testing.T) {
	const n = 2
	marks := t.TempDir()
	hold := `touch "$MARKS/$$"; exec sleep 60`
	env := map[string]string{"MARKS": marks}
	r := loadFile(t, writeFile(t,
		shellSkill("hold_a", hold, env), shellSkill("hold_b", hold, env), shellSkill("quick", `printf '{}'`, nil),
	), WithMaxCommandRuns(n))
	started := func() int {
		ents, err := os.ReadDir(marks)
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		pe      *protocol.Error
		elapsed time.Duration
	}
	results := make(chan result, n+3)
	start := time.Now()
	for i := range n + 3 {
		go func() {
			_, err := r.Call(ctx, []string{"hold_a", "hold_b"}[i%2], json.RawMessage(`{}`))
			pe, _ := err.(*protocol.Error)
			results <- result{pe, time.Since(start)}
		}()
	}
	// The three refusals arrive while the N runs still sleep.
	for range 3 {
		select {
		case res := <-results:
			wantError(t, res.pe, protocol.CodeRateLimited, fmt.Sprintf("too many command runs at once (limit %d); try again later", n))
			if res.elapsed > 5*time.Second {
				t.Errorf("a refusal took %v; want it at once", res.elapsed)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("fewer than 3 calls refused (%d programs started): the calls queue or run unbounded", started())
		}
	}
	if !waitDir(t, marks, 20*time.Second, func() bool { return started() >= n }) {
		t.Fatalf("%d of the %d admitted runs started", started(), n)
	}
	// Any skill of the file is refused while the cap is full.
	_, pe := callSkill(t, t.Context(), r, "quick", `{}`)
	wantError(t, pe, protocol.CodeRateLimited, `command skill "quick"`)
	if got := started(); got != n {
		t.Errorf("%d programs started; want exactly %d", got, n)
	}
	cancel()
	for range n {
		select {
		case res := <-results:
			wantError(t, res.pe, protocol.CodeToolExecution, "canceled")
		case <-time.After(10 * time.Second):
			t.Fatal("a canceled run did not return")
		}
	}
	// The slots are free again.
	for i := range n + 1 {
		if out, pe := callSkill(t, t.Context(), r, "quick", `{}`); pe != nil || string(out) != `{}` {
			t.Fatalf("call %d after the flood = %s, %v", i, out, pe)
		}
	}
}

// TestCommandCannotFindNodeSecrets attacks from inside a command
// skill, as the node's own user: it looks for identity.key through relative
// paths, $OLDPWD, $PWD and the like, and dumps its environment for the
// node's secrets. The node's working directory, OLDPWD and PWD all point at
// the data dir, as when an operator starts the node from there. The first
// case is the old layout (scratch inside the data dir), where the probe
// does find the key: it shows the probe can see a leak.
func TestCommandCannotFindNodeSecrets(t *testing.T) {
	const key, secret = "KEY-MATERIAL-7f3a", "s3cret-mesh-9b1c"
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dataDir, "identity.key"), []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dataDir)
	t.Setenv("OLDPWD", dataDir)
	t.Setenv("PWD", dataDir)
	t.Setenv("MCPV2_SECRET", secret)
	t.Setenv("MCPV2_DATA_DIR", dataDir)
	file := filepath.Join(dataDir, "custom_skills.json")
	data, err := json.Marshal(map[string]any{"skills": []any{probeSkill("probe", `
echo ENV-BEGIN; env; echo ENV-END
for p in identity.key ../identity.key ../../identity.key ../../../identity.key \
	"$OLDPWD/identity.key" "$PWD/../identity.key" "$PWD/../../identity.key" \
	"$HOME/../identity.key" "$TMPDIR/../../identity.key" "$MCPV2_DATA_DIR/identity.key"; do
	cat "$p"; echo
done
echo "CWD=$(pwd)"
cd - ; cat identity.key`, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		scratch string
		wantKey bool
	}{
		{"scratch in the data dir (old layout, control)", filepath.Join(dataDir, "scratch"), true},
		{"default scratch", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := loadFile(t, file, WithScratchDir(tc.scratch))
			got := callProbe(t, r, "probe")
			if strings.Contains(got, key) != tc.wantKey {
				t.Fatalf("key found: %v, want %v; the program printed:\n%s", !tc.wantKey, tc.wantKey, got)
			}
			i, j := strings.Index(got, "ENV-BEGIN\n"), strings.Index(got, "ENV-END")
			if i < 0 || j < i {
				t.Fatalf("no environment dump in:\n%s", got)
			}
			cwd, _, _ := strings.Cut(got[strings.LastIndex(got, "CWD=")+4:], "\n")
			for _, kv := range strings.Split(strings.TrimSpace(got[i+len("ENV-BEGIN\n"):j]), "\n") {
				name, val, _ := strings.Cut(kv, "=")
				switch name {
				case "PATH", "LANG", "MCPV2_CALLER":
				case "HOME", "TMPDIR", "PWD":
					if val != cwd {
						t.Errorf("%s=%q; want the scratch directory %q", name, val, cwd)
					}
				default:
					t.Errorf("the program sees %q; want only PATH, HOME, TMPDIR, LANG, MCPV2_CALLER (and the shell's PWD)", kv)
				}
				if strings.Contains(val, secret) || !tc.wantKey && strings.Contains(val, dataDir) {
					t.Errorf("the program sees the node's environment: %q", kv)
				}
			}
			if tc.wantKey {
				return
			}
			if strings.HasPrefix(cwd, dataDir) || filepath.Dir(cwd) != filepath.Clean(os.TempDir()) {
				t.Errorf("the program ran in %q; want a fresh directory right under %s, outside the data dir", cwd, os.TempDir())
			}
			if fi, err := os.Stat(cwd); !os.IsNotExist(err) {
				t.Errorf("scratch %q not removed: %v, %v", cwd, fi, err)
			}
		})
	}
}

// needRootAndNobody returns the nobody user, skipping (failing under
// MCPV2_REQUIRE_ALL) when the test does not run as root or nobody is missing.
func needRootAndNobody(t *testing.T) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipEnv(t, "skipped: running command skills as another user needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		testenv.SkipEnv(t, "skipped: no user nobody: %v", err)
	}
	return u
}

// TestCommandRunAs attacks as a command skill run as nobody by a
// root node: given the absolute path of a 0600 root-owned identity.key it
// still cannot read it, nor the node's /proc entries, while a 0644 file
// beside it is readable (so the file mode, not the path, stops it); it
// runs as nobody, in a scratch directory it owns and may write.
func TestCommandRunAs(t *testing.T) {
	nobody := needRootAndNobody(t)
	const key, public = "KEY-MATERIAL-runas-51d2", "PUBLIC-runas-0c44"
	// A data dir that nobody may enter: only the key's own mode protects it.
	dataDir, err := os.MkdirTemp("", "mcpv2-runas-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	if err := os.Chmod(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	keyPath, pubPath := filepath.Join(dataDir, "identity.key"), filepath.Join(dataDir, "public.txt")
	if err := os.WriteFile(keyPath, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, []byte(public), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	r := loadFile(t, writeFile(t, probeSkill("probe", `
echo "UID=$(id -u)"; echo "GID=$(id -g)"
echo "LIMITS=$(ulimit -v) $(ulimit -S -t) $(ulimit -H -t) $(ulimit -c)"
cat "$KEY"; echo; cat "$PUB"; echo
cat /proc/$PPID/environ; echo
ls /proc/$PPID/cwd/; echo
cat /proc/$PPID/cwd/identity.key; echo
echo x > ./probe && echo WROTE
echo "CWD=$(pwd)"`, map[string]string{"KEY": keyPath, "PUB": pubPath})),
		WithRunAs("nobody"), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if strings.Contains(logs.String(), "run as root") {
		t.Errorf("warned about root although run-as is set: %s", logs.String())
	}
	got := callProbe(t, r, "probe")
	t.Logf("the program printed:\n%s", got)
	for _, want := range []string{
		"UID=" + nobody.Uid + "\n", "GID=" + nobody.Gid + "\n",
		fmt.Sprintf("LIMITS=%d 20 21 0\n", DefaultMemoryMB<<10), // memory_mb in KiB, timeout_s, +1, no core
		keyPath + ": Permission denied", public,
		fmt.Sprintf("/proc/%d/environ: Permission denied", os.Getpid()),
		fmt.Sprintf("/proc/%d/cwd", os.Getpid()),
		"WROTE",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the program's output lacks %q", want)
		}
	}
	if strings.Contains(got, key) {
		t.Errorf("nobody read the root-only key")
	}
	if strings.Count(got, "Permission denied") < 4 {
		t.Errorf("want the key, /proc/PID/environ, /proc/PID/cwd and the key through it all refused")
	}
	cwd := strings.TrimSpace(got[strings.LastIndex(got, "CWD=")+4:])
	if filepath.Dir(cwd) != filepath.Clean(os.TempDir()) {
		t.Errorf("ran in %q; want a directory right under %s", cwd, os.TempDir())
	}
	if _, err := os.Stat(cwd); !os.IsNotExist(err) {
		t.Errorf("scratch %q not removed: %v", cwd, err)
	}
}

// TestRunAsLoad checks what is decided at load time when command
// skills run as another user: a numeric uid works as a name does; a
// scratch root or a program that user cannot reach fails the load with a
// clear reason; a root node without run-as warns once.
func TestRunAsLoad(t *testing.T) {
	nobody := needRootAndNobody(t)
	id := shellSkill("id", `printf '{"uid":%s}' "$(id -u)"`, nil)
	r := loadFile(t, writeFile(t, id), WithRunAs(nobody.Uid))
	if out, pe := callSkill(t, t.Context(), r, "id", `{}`); pe != nil || string(out) != `{"uid":`+nobody.Uid+`}` {
		t.Errorf("run-as %s = %s, %v", nobody.Uid, out, pe)
	}

	// t.TempDir's directories are 0700 root: nobody cannot enter them.
	_, err := loadInto(t, skills.NewRegistry(nil), writeFile(t, id), WithRunAs("nobody"), WithScratchDir(filepath.Join(t.TempDir(), "s")))
	if err == nil || !strings.Contains(err.Error(), "scratch directory: user nobody cannot enter") {
		t.Errorf("unreachable scratch: %v", err)
	}
	_, err = loadInto(t, skills.NewRegistry(nil), writeFile(t, commandSkill("echo", "echo", nil)), WithRunAs("nobody"))
	if err == nil || !strings.Contains(err.Error(), "handler.command[0]: program") || !strings.Contains(err.Error(), "user nobody") {
		t.Errorf("a program nobody cannot run: %v", err)
	}

	for _, tc := range []struct {
		name  string
		opts  []Option
		file  []any
		warns int
	}{
		{"root, command skills", []Option{}, []any{id, shellSkill("id2", "id", nil)}, 1},
		{"root, no command skill", []Option{}, []any{greetSkill}, 0},
		{"run-as nobody", []Option{WithRunAs("nobody")}, []any{id}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			opts := append(tc.opts, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			loadFile(t, writeFile(t, tc.file...), opts...)
			if got := strings.Count(logs.String(), "command skills run as root"); got != tc.warns {
				t.Errorf("%d warnings; want %d. Logs: %s", got, tc.warns, logs.String())
			}
		})
	}
}
