// Package deploy_test checks the packaging in this folder as an operator
// uses it: the systemd unit with systemd-analyze, and the container image
// built with deploy/image.sh (Debian's buildah) and run.
package deploy_test

import (
	"debug/elf"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node"
)

// binary builds mcpv2 once for the tests that need it.
var binary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "mcpv2-deploy-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mcpv2")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/mcpv2").CombinedOutput()
	if err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := binary(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// verifyUnit runs systemd-analyze verify on unit and returns what it
// printed: it prints nothing for a unit without problems, and a warning
// (with a zero exit status) for an unknown key, which counts as a problem.
func verifyUnit(t *testing.T, unit string) string {
	t.Helper()
	out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput()
	if err != nil {
		return strings.TrimSpace(string(out)) + " (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

// TestSystemdUnit checks deploy/systemd/mcpv2.service with systemd-analyze:
// verify finds nothing, and its security exposure score stays low.
// systemd-analyze verify needs the ExecStart binary to exist, so it checks a
// copy whose ExecStart names a freshly built mcpv2 instead of
// /usr/local/bin/mcpv2 (this test does not install into the system).
func TestSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		testenv.SkipEnv(t, "systemd-analyze not found (Debian package systemd): %v", err)
	}
	bin, err := binary()
	if err != nil {
		t.Fatalf("go build: %v", err)
	}
	src, err := os.ReadFile("systemd/mcpv2.service")
	if err != nil {
		t.Fatal(err)
	}
	const exec0 = "ExecStart=/usr/local/bin/mcpv2 "
	if !strings.Contains(string(src), "\n"+exec0) {
		t.Fatalf("the unit has no %q line", exec0)
	}
	dir := t.TempDir()
	unit := filepath.Join(dir, "mcpv2.service")
	text := strings.Replace(string(src), exec0, "ExecStart="+bin+" ", 1)
	if err := os.WriteFile(unit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := verifyUnit(t, unit); out != "" {
		t.Errorf("systemd-analyze verify %s:\n%s", unit, out)
	}
	for _, key := range []string{"DynamicUser=yes", "ProtectSystem=strict", "StateDirectory=mcpv2", "NoNewPrivileges=yes", "CapabilityBoundingSet=\n"} {
		if !strings.Contains(text, "\n"+key) {
			t.Errorf("the unit has no %q", strings.TrimSpace(key))
		}
	}
	// The check can fail: a key systemd does not know is reported.
	bad := filepath.Join(dir, "bad.service")
	if err := os.WriteFile(bad, []byte(strings.Replace(text, "[Service]\n", "[Service]\nProtectSystems=strict\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := verifyUnit(t, bad); !strings.Contains(out, "ProtectSystems") {
		t.Errorf("systemd-analyze verify did not report an unknown key: %q", out)
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=yes", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no exposure level:\n%s", out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: exposure %.1f (0 is best, 10 worst)", score)
	if score > 2.0 {
		t.Errorf("exposure %.1f, want at most 2.0:\n%s", score, out)
	}
}

// descendant returns the PID of the process under pid (at any depth)
// whose argv[0] is argv0.
func descendant(t *testing.T, pid int, argv0 string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	var cands []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces; split after ')'.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 {
			parent[n], _ = strconv.Atoi(f[1])
		}
		if cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.HasPrefix(string(cmd), argv0+"\x00") {
			cands = append(cands, n)
		}
	}
	for _, c := range cands {
		for a := parent[c]; a > 1; a = parent[a] {
			if a == pid {
				return c
			}
		}
	}
	t.Fatalf("no process %s under PID %d", argv0, pid)
	return 0
}

// buildah runs buildah on the test's own image storage (vfs: no mounts to
// undo), so that CI leaves no images behind.
func buildah(store string) []string {
	return []string{"buildah", "--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs"}
}

// TestImage builds the image with deploy/image.sh and buildah, checks that
// it holds only the static binary, the TLS roots and the data dir, and runs
// a node from it: its banner, its edge's health, and --version naming the
// commit.
func TestImage(t *testing.T) {
	if _, err := exec.LookPath("buildah"); err != nil {
		testenv.SkipEnv(t, "buildah not found (Debian package buildah): %v", err)
	}
	store := t.TempDir()
	b := buildah(store)
	const tag = "localhost/mcpv2:test"
	cmd := exec.Command("./image.sh", tag)
	cmd.Env = append(os.Environ(), "BUILDER="+strings.Join(b, " ")+" bud")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(b[0], append(b[1:], "rm", "--all")...).Run() })

	out, err := exec.Command(b[0], append(b[1:], "inspect", "--type", "image", tag)...).Output()
	if err != nil {
		t.Fatalf("buildah inspect: %v", err)
	}
	var img struct {
		FromImage string
		OCIv1     struct {
			Config struct {
				User       string
				Entrypoint []string
				Env        []string
			} `json:"config"`
			RootFS struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
		}
	}
	if err := json.Unmarshal(out, &img); err != nil {
		t.Fatalf("buildah inspect: %v", err)
	}
	cfg := img.OCIv1.Config
	if cfg.User != "65532:65532" || !slices.Equal(cfg.Entrypoint, []string{"/mcpv2"}) || !slices.Contains(cfg.Env, "MCPV2_HOME=/data") {
		t.Errorf("image config: user %q, entrypoint %q, env %q; want 65532:65532, [/mcpv2], MCPV2_HOME=/data", cfg.User, cfg.Entrypoint, cfg.Env)
	}

	ctr, err := exec.Command(b[0], append(b[1:], "from", tag)...).Output()
	if err != nil {
		t.Fatalf("buildah from: %v", err)
	}
	name := strings.TrimSpace(string(ctr))
	mnt, err := exec.Command(b[0], append(b[1:], "mount", name)...).Output()
	if err != nil {
		t.Fatalf("buildah mount: %v", err)
	}
	root := strings.TrimSpace(string(mnt))
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// FROM scratch: the image's files are ours alone.
	if want := []string{"etc/ssl/certs/ca-certificates.crt", "mcpv2"}; !slices.Equal(files, want) {
		t.Errorf("files in the image: %q, want %q", files, want)
	}
	if f, err := elf.Open(filepath.Join(root, "mcpv2")); err != nil {
		t.Errorf("the image's /mcpv2: %v", err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("the image's /mcpv2 is dynamically linked (it has an ELF interpreter)")
			}
		}
		f.Close()
	}
	if st, err := os.Stat(filepath.Join(root, "data")); err != nil || !st.IsDir() {
		t.Errorf("the image has no /data dir: %v", err)
	}

	run := append(b[1:], "run", "--isolation", "chroot", name, "--")
	ver, err := exec.Command(b[0], append(run, "/mcpv2", "--version")...).Output()
	if err != nil {
		t.Fatalf("/mcpv2 --version in the image: %v", err)
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && !strings.Contains(string(ver), "commit "+strings.TrimSpace(string(head))) {
		t.Errorf("/mcpv2 --version in the image = %q, want it to name commit %s", ver, head)
	}

	// The node, as the image's user, in its /data, on loopback ports.
	p := testenv.StartProc(t, append([]string{b[0]}, append(run, "/mcpv2", "node", "--p2p-port", "0", "--port", "0", "--bind-host", "127.0.0.1", "--no-mdns")...)...)
	if d := p.First("MCPV2_DATA_DIR"); d != "/data" {
		t.Errorf("MCPV2_DATA_DIR=%q, want /data", d)
	}
	resp, err := http.Get("http://127.0.0.1:" + p.First("MCPV2_BOUND_PORT") + "/mcpv2/health")
	if err != nil {
		t.Fatalf("health of the node in the image: %v", err)
	}
	var health struct {
		Status string `json:"status"`
		PeerID string `json:"peer_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if err != nil || health.Status != "ok" || health.PeerID != p.First("MCPV2_PEER_ID") {
		t.Errorf("health: %+v (%v), want ok from %s", health, err, p.First("MCPV2_PEER_ID"))
	}
	// docker stop sends SIGTERM to the image's process; buildah run
	// would SIGKILL it on a SIGTERM of its own, so the node gets it
	// directly: it must shut down cleanly, and buildah exit 0 after it.
	node := descendant(t, p.Cmd.Process.Pid, "/mcpv2")
	if err := syscall.Kill(node, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.Exited
	if !strings.Contains(p.Log.String(), "shutting down") || p.ExitErr != nil {
		t.Errorf("the node in the image did not stop cleanly on SIGTERM: %v\n%s", p.ExitErr, p.Log.String())
	}
}

// TestCompose checks deploy/compose.yml's commands against the real
// binary: each service's command (its ${RELAY_ID} set to a PeerID made as
// the file's first lines say) is a `mcpv2 node` whose every flag `mcpv2
// config show` takes as given, and whose --bootstrap parses. No container
// engine runs here, so the services are not started.
func TestCompose(t *testing.T) {
	bin, err := binary()
	if err != nil {
		t.Fatalf("go build: %v", err)
	}
	src, err := os.ReadFile("compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The relay's volume exists before `compose run relay id` (compose
	// mounts it at /data), and mcpv2 id makes the identity in it.
	if err := os.Mkdir(filepath.Join(dir, "relay"), 0o700); err != nil {
		t.Fatal(err)
	}
	id := exec.Command(bin, "id", "--data-dir", filepath.Join(dir, "relay"))
	id.Env = testenv.CleanEnv()
	out, err := id.Output()
	if err != nil {
		t.Fatalf("mcpv2 id: %v", err)
	}
	m := regexp.MustCompile(`(?m)^MCPV2_PEER_ID=(\S+)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("mcpv2 id printed no MCPV2_PEER_ID:\n%s", out)
	}
	relayID := string(m[1])
	cmds := regexp.MustCompile(`(?m)^\s+command: (\[.*\])$`).FindAllSubmatch(src, -1)
	if len(cmds) != 3 {
		t.Fatalf("compose.yml has %d services with a command, want 3 (relay, agent-a, agent-b)", len(cmds))
	}
	for _, c := range cmds {
		text := regexp.MustCompile(`\$\{RELAY_ID:\?[^}]*\}`).ReplaceAllString(string(c[1]), relayID)
		var argv []string
		if err := json.Unmarshal([]byte(text), &argv); err != nil {
			t.Fatalf("command %s: %v", c[1], err)
		}
		if len(argv) == 0 || argv[0] != "node" {
			t.Fatalf("command %q is not `mcpv2 node …`", argv)
		}
		args := append([]string{"config", "show", "--json", "--data-dir", filepath.Join(dir, "show")}, argv[1:]...)
		// The user's view: no MCPV2_* of the test's environment (CI sets
		// MCPV2_REQUIRE_ALL, which mcpv2 warns about on stderr).
		cmd := exec.Command(bin, args...)
		cmd.Env = testenv.CleanEnv()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("mcpv2 %q: %v\n%s", args, err, stderr.String())
		}
		var show struct {
			Settings []struct {
				Name   string `json:"name"`
				Value  any    `json:"value"`
				Source string `json:"source"`
			} `json:"settings"`
		}
		if err := json.Unmarshal(out, &show); err != nil {
			t.Fatalf("config show --json: %v\n%s", err, out)
		}
		given := map[string]bool{}
		for _, a := range argv[1:] {
			if strings.HasPrefix(a, "--") {
				given[strings.TrimPrefix(a, "--")] = true
			}
		}
		for _, st := range show.Settings {
			if given[st.Name] {
				if st.Source != "flag" {
					t.Errorf("%q: %s came from %q, want flag", argv, st.Name, st.Source)
				}
				delete(given, st.Name)
			}
			if st.Name == "bootstrap" && st.Source == "flag" {
				var addrs []string
				if b, err := json.Marshal(st.Value); err == nil {
					_ = json.Unmarshal(b, &addrs)
				}
				if _, err := node.ParseBootstrap(addrs); err != nil || len(addrs) != 1 {
					t.Errorf("%q: --bootstrap %q: %v", argv, addrs, err)
				}
			}
		}
		if len(given) > 0 {
			t.Errorf("%q: config show does not list %v", argv, given)
		}
	}
}
