package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// The seed's settings carry over (issue 9): the durations in seconds or Go
// form, the table of the seed's environment variables, the check of the
// MCPV2_* environment, and a real node started with the seed's environment.

func TestSecondsValue(t *testing.T) {
	ok := []struct {
		in   string
		want time.Duration
	}{
		{"3600", time.Hour}, {"1h", time.Hour}, {"90s", 90 * time.Second}, {" 300 ", 5 * time.Minute},
		{"+5", 5 * time.Second}, {"1h30m", 90 * time.Minute}, {"1", time.Second}, {"2592000", maxSessionTTL}, {"720h", maxSessionTTL},
	}
	for _, c := range ok {
		v := sessionTTLValue()
		if err := v.Set(c.in); err != nil || v.d != c.want {
			t.Errorf("--session-ttl %q = %v, %v; want %v", c.in, v.d, err, c.want)
		}
	}
	bad := []struct{ in, why string }{
		{"-5", "is negative"}, {"-1h", "is negative"}, {"0", "is zero"}, {"0s", "is zero"},
		{"1.5s", "is not whole seconds"}, {"500ms", "is not whole seconds"}, {"1.5", "is neither whole seconds nor a Go duration"},
		{"abc", "is neither"}, {"", "is neither"}, {"1 h", "is neither"}, {"99999999999999999999", "is far too large"},
		{"2592001", "is more than 720h"}, {"721h", "is more than 720h"}, {"9223372036", "is more than 720h"},
	}
	for _, c := range bad {
		v := sessionTTLValue()
		err := v.Set(c.in)
		if err == nil {
			t.Errorf("--session-ttl %q accepted as %v", c.in, v.d)
			continue
		}
		for _, want := range []string{strconv.Quote(c.in), c.why, "--session-ttl takes whole seconds (3600) or a Go duration (1h, 90m), from 1s to 720h"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("--session-ttl %q: error %q does not say %q", c.in, err, want)
			}
		}
		if v.d != time.Hour {
			t.Errorf("--session-ttl %q refused but changed the value to %v", c.in, v.d)
		}
	}
	skew := clockSkewValue()
	if skew.String() != "5m" || sessionTTLValue().String() != "1h" {
		t.Errorf("defaults print as %q and %q, want 5m and 1h", skew.String(), sessionTTLValue().String())
	}
	if err := skew.Set("3601"); err == nil || !strings.Contains(err.Error(), "is more than 1h") || !strings.Contains(err.Error(), "--clock-skew takes whole seconds (300)") {
		t.Errorf("--clock-skew 3601: %v", err)
	}
	if err := skew.Set("120"); err != nil || skew.d != 2*time.Minute || skew.String() != "2m" {
		t.Errorf("--clock-skew 120 = %v (%s), %v", skew.d, skew, err)
	}
}

// TestSeedSettingsTable: every variable of the seed is in the table once;
// an honoured one is the MCPV2_* twin of the flag the table names, in the
// app itself, and a refused one is no flag's twin and names a replacement.
func TestSeedSettingsTable(t *testing.T) {
	app := newApp()
	twins := envTwins(app)
	seen := map[string]bool{}
	for _, s := range seedSettings {
		if seen[s.name] {
			t.Errorf("%s is in the table twice", s.name)
		}
		seen[s.name] = true
		switch {
		case (s.flag == "") == (s.instead == ""):
			t.Errorf("%s: want exactly one of flag and instead: %+v", s.name, s)
		case s.flag != "" && twins[s.name] != s.flag:
			t.Errorf("%s is honoured by --%s, but it is the twin of %q", s.name, s.flag, twins[s.name])
		case s.instead != "" && twins[s.name] != "":
			t.Errorf("%s is refused, but it is the twin of --%s", s.name, twins[s.name])
		case s.instead != "" && !strings.Contains(s.instead, "--"):
			t.Errorf("%s: the refusal names no flag to use instead: %q", s.name, s.instead)
		}
	}
	// The seed's mcpv2.py read these, and SPEC.md names the last three.
	for _, name := range []string{"MCPV2_PORT", "MCPV2_SECRET", "MCPV2_PUBLIC_IP", "MCPV2_LOG_LEVEL", "MCPV2_RATE_LIMIT",
		"MCPV2_SESSION_RATE_LIMIT", "MCPV2_AUDIT_FILE", "MCPV2_LLM_MODE", "MCPV2_SESSION_TIMEOUT", "MCPV2_CLOCK_SKEW",
		"MCPV2_TOOL_TIMEOUT", "MCPV2_MEMORY_LIMIT_MB", "MCPV2_FILE_STORE", "MCPV2_ENABLE_MTLS",
		"MCPV2_HOME", "MCPV2_BOOTSTRAP", "MCPV2_SESSION_TTL"} {
		if !seen[name] {
			t.Errorf("the seed's %s is not in the table", name)
		}
	}
	// The twins come from the app's commands, not from a list.
	for name, flag := range map[string]string{"MCPV2_LIMIT_RATE": "limit-rate", "MCPV2_DATA_DIR": "data-dir", "MCPV2_TLS_CERT": "tls-cert"} {
		if twins[name] != flag {
			t.Errorf("envTwins: %s → %q, want %q", name, twins[name], flag)
		}
	}
	for name := range ownNames {
		if twins[name] != "" || seen[name] {
			t.Errorf("%s is both mcpv2's own name and a setting", name)
		}
	}
}

// commandOf returns the command name of newApp.
func commandOf(t *testing.T, name string) *cli.Command {
	t.Helper()
	for _, c := range newApp().Commands {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no command %q", name)
	return nil
}

func TestCheckEnv(t *testing.T) {
	twins := envTwins(newApp())
	cases := []struct {
		name, cmd string
		env       map[string]string
		refs      []string
		warn      []string // substrings, one per warning, in order
		err       []string // substrings of the error; none: no error
	}{
		{name: "twins and own names", cmd: "node",
			env: map[string]string{"MCPV2_PORT": "8000", "MCPV2_SESSION_TIMEOUT": "3600", "MCPV2_PEER_ID": "x", "MCPV2_LLM_API_KEY": "k", "MCPV2_CALLER": "p"}},
		{name: "typo", cmd: "node", env: map[string]string{"MCPV2_SESION_TTL": "60"},
			warn: []string{"MCPV2_SESION_TTL is not a setting of mcpv2; did you mean MCPV2_SESSION_TTL?"}},
		{name: "typo of a seed name", cmd: "call", env: map[string]string{"MCPV2_SESSION_TIMOUT": "60"},
			warn: []string{"did you mean MCPV2_SESSION_TIMEOUT?"}},
		{name: "typo of a client flag", cmd: "send", env: map[string]string{"MCPV2_LIMITRATE": "1M"},
			warn: []string{"did you mean MCPV2_LIMIT_RATE?"}},
		{name: "far from any", cmd: "call", env: map[string]string{"MCPV2_FOO": "1", "MCPV2_ZEBRA_STRIPES": "2"},
			warn: []string{"MCPV2_FOO is not a setting of mcpv2 and is ignored (`mcpv2 call --help`", "MCPV2_ZEBRA_STRIPES is not a setting"}},
		{name: "skills file reads it", cmd: "node", env: map[string]string{"MCPV2_MY_API_KEY": "k"}, refs: []string{"MCPV2_MY_API_KEY"}},
		{name: "refused at node start", cmd: "node", env: map[string]string{"MCPV2_TOOL_TIMEOUT": "30", "MCPV2_AUDIT_FILE": "a.log", "MCPV2_MEMORY_LIMIT_MB": "256"},
			err: []string{"MCPV2_TOOL_TIMEOUT is a setting of the seed that mcpv2 does not take", `"timeout_s"`, "MCPV2_AUDIT_FILE", "audit.jsonl", "--data-dir", `"memory_mb"`, "then unset MCPV2_MEMORY_LIMIT_MB"}},
		{name: "refused by the shell", cmd: "shell", env: map[string]string{"MCPV2_TOOL_TIMEOUT": "30"}, err: []string{"timeout_s"}},
		{name: "no concern of a client", cmd: "call", env: map[string]string{"MCPV2_TOOL_TIMEOUT": "30"}},
		{name: "refused but empty", cmd: "node", env: map[string]string{"MCPV2_TOOL_TIMEOUT": ""}},
		{name: "alias agrees", cmd: "node", env: map[string]string{"MCPV2_SESSION_TTL": "1h", "MCPV2_SESSION_TIMEOUT": "3600"}},
		{name: "alias disagrees", cmd: "node", env: map[string]string{"MCPV2_SESSION_TTL": "1h", "MCPV2_SESSION_TIMEOUT": "7200"},
			err: []string{`MCPV2_SESSION_TTL="1h" and MCPV2_SESSION_TIMEOUT="7200" disagree (both set --session-ttl)`}},
		{name: "alias hidden by an empty twin", cmd: "node", env: map[string]string{"MCPV2_SESSION_TTL": "", "MCPV2_SESSION_TIMEOUT": "7200"},
			err: []string{"MCPV2_SESSION_TTL is set but empty, which hides MCPV2_SESSION_TIMEOUT"}},
		{name: "alias unreadable", cmd: "node", env: map[string]string{"MCPV2_SESSION_TTL": "1h", "MCPV2_SESSION_TIMEOUT": "soon"},
			err: []string{`MCPV2_SESSION_TIMEOUT="soon"`, "is neither whole seconds nor a Go duration"}},
		{name: "data dir twins disagree", cmd: "id", env: map[string]string{"MCPV2_HOME": "/a", "MCPV2_DATA_DIR": "/b"},
			err: []string{`MCPV2_HOME="/a" and MCPV2_DATA_DIR="/b" disagree (both set --data-dir)`}},
		{name: "data dir twins agree", cmd: "id", env: map[string]string{"MCPV2_HOME": "/a", "MCPV2_DATA_DIR": "/a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			refs := map[string]bool{}
			for _, r := range c.refs {
				refs[r] = true
			}
			warnings, err := checkEnv(c.env, twins, commandOf(t, c.cmd), refs)
			if len(warnings) != len(c.warn) {
				t.Fatalf("warnings %q, want %d like %q", warnings, len(c.warn), c.warn)
			}
			for i, w := range c.warn {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %q does not say %q", warnings[i], w)
				}
			}
			if (err != nil) != (len(c.err) > 0) {
				t.Fatalf("error %v, want one saying %q", err, c.err)
			}
			for _, e := range c.err {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q does not say %q", err, e)
				}
			}
		})
	}
}

func TestSeedLogLevel(t *testing.T) {
	for in, want := range map[string]string{"WARNING": "warn", "warning": "warn", "CRITICAL": "error", "INFO": "INFO", "debug": "debug"} {
		if got := seedLogLevel(in); got != want {
			t.Errorf("seedLogLevel(%q) = %q, want %q", in, got, want)
		}
	}
}

// --- real processes

// seedSecret is the MCPV2_SECRET of the seed-environment nodes.
const seedSecret = "seed-shared-secret"

// startSeedNode runs `mcpv2 node args…` with the test's environment minus
// its MCPV2_* variables plus env (through env(1), which execs the node in
// place) and returns it as an edge peer.
func startSeedNode(t *testing.T, name string, env []string, args ...string) edgePeer {
	t.Helper()
	p := startEdgeProc(t, name, append([]string{"env"}, env...), append([]string{"--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-nat"}, args...)...)
	peer := newEdgePeer(t, name, p)
	peer.client = edgeHTTPClient(t, "", nil)
	return peer
}

// runEnv runs the mcpv2 CLI like run, with env added to the environment,
// for commands that end by themselves (a node that starts instead is killed
// after 20 s).
func runEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(testenv.CleanEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// seedToken mints a secret holder's token for 127.0.0.1 issued ahead of now,
// as the seed's client minted them.
func seedToken(ahead time.Duration, ttl int64) string {
	return protocol.EncodeToken([]byte(seedSecret), protocol.Token{Subject: "127.0.0.1", Nonce: edgeRandTag(),
		IssuedAt: time.Now().Add(ahead).Unix(), TTL: ttl})
}

// wantSessionTTL checks that GET /mcpv2/session on p answers ttl seconds.
func wantSessionTTL(t *testing.T, p edgePeer, ttl int64) {
	t.Helper()
	s := p.anonSession(t, p.client)
	if s.TTL != ttl {
		t.Fatalf("%s: GET /mcpv2/session answers ttl %d, want %d", p.name, s.TTL, ttl)
	}
	if left := s.ExpiresAt - time.Now().Unix(); left < ttl-10 || left > ttl+1 {
		t.Fatalf("%s: session expires in %d s, want about %d", p.name, left, ttl)
	}
}

// wantSkew checks that p accepts a token issued ok ahead of now and refuses
// one issued bad ahead, as issued in the future.
func wantSkew(t *testing.T, p edgePeer, ok, bad time.Duration) {
	t.Helper()
	var pong map[string]any
	p.mustCall(t, seedToken(ok, 3600), "ping", map[string]any{}, &pong)
	ans := p.post(t, p.client, "/mcpv2", seedToken(bad, 3600), edgeSlot(1, "ping", map[string]any{}))
	edgeWantRefused(t, fmt.Sprintf("%s: a token issued %v ahead", p.name, bad), ans, http.StatusUnauthorized, protocol.CodeInvalidSession, "future")
}

// TestSeedEnvironment (issue 9, acceptance 3): a node started with the
// seed's environment only behaves as the seed documents it.
func TestSeedEnvironment(t *testing.T) {
	t.Parallel()
	home, store := t.TempDir(), filepath.Join(t.TempDir(), "seed_files")
	port := edgeFreePort(t, "127.0.0.1")
	p := startSeedNode(t, "seed", []string{
		"MCPV2_HOME=" + home, "MCPV2_PORT=" + strconv.Itoa(port), "MCPV2_PUBLIC_IP=127.0.0.1", "MCPV2_SECRET=" + seedSecret,
		"MCPV2_LOG_LEVEL=WARNING", "MCPV2_RATE_LIMIT=200", "MCPV2_SESSION_RATE_LIMIT=20", "MCPV2_LLM_MODE=1",
		"MCPV2_SESSION_TIMEOUT=3600", "MCPV2_CLOCK_SKEW=300", "MCPV2_FILE_STORE=" + store, "MCPV2_ENABLE_MTLS=0",
	})
	if got := p.proc.first("MCPV2_DATA_DIR"); got != home {
		t.Errorf("MCPV2_DATA_DIR=%s, want MCPV2_HOME %s", got, home)
	}
	if p.port != port || p.ip != "127.0.0.1" {
		t.Errorf("edge at %s:%d, want MCPV2_PUBLIC_IP and MCPV2_PORT 127.0.0.1:%d", p.ip, p.port, port)
	}
	wantSessionTTL(t, p, 3600)
	wantSkew(t, p, 200*time.Second, 400*time.Second)

	ans := edgeDo(t, p.client, http.MethodGet, p.base+"/mcpv2/health", nil, nil)
	var health struct {
		LLMMode bool `json:"llm_mode"`
		MTLS    bool `json:"mtls"`
	}
	if err := json.Unmarshal(ans.body, &health); err != nil || !health.LLMMode || health.MTLS {
		t.Errorf("health with MCPV2_LLM_MODE=1 and MCPV2_ENABLE_MTLS=0: %s", ans)
	}

	tok := seedToken(0, 3600)
	var up map[string]any
	p.mustCall(t, tok, "upload_file", map[string]any{"filename": "seed.txt", "content": base64.StdEncoding.EncodeToString([]byte("from the seed")), "encoding": "base64"}, &up)
	if b, err := os.ReadFile(filepath.Join(store, "seed.txt")); err != nil || string(b) != "from the seed" {
		t.Errorf("upload_file: %q, %v in MCPV2_FILE_STORE %s", b, err, store)
	}
	if _, err := os.Stat(filepath.Join(home, "files", "seed.txt")); err == nil {
		t.Errorf("upload_file also wrote <data-dir>/files/seed.txt")
	}

	// translate_history takes OpenAI arguments as an object, as the seed did.
	history := json.RawMessage(`[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"weather","arguments":{"city":"Paris"}}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}]`)
	var tr struct {
		History []struct {
			Content json.RawMessage `json:"content"`
		} `json:"history"`
	}
	p.mustCall(t, tok, "translate_history", map[string]any{"history": history, "from": "openai", "to": "claude"}, &tr)
	if len(tr.History) != 3 || !bytes.Contains(tr.History[1].Content, []byte(`"input":{"city":"Paris"}`)) {
		t.Errorf("translate_history openai→claude of object arguments: %+v", tr.History)
	}
	var back struct {
		History json.RawMessage `json:"history"`
	}
	p.mustCall(t, tok, "translate_history", map[string]any{"history": history, "from": "openai", "to": "openai"}, &back)
	if !bytes.Contains(back.History, []byte(`"arguments":"{\"city\":\"Paris\"}"`)) {
		t.Errorf("translate_history openai→openai writes object arguments as %s, want the API's string", back.History)
	}

	if log := p.proc.stderr(); strings.Contains(log, "level=INFO") || strings.Contains(log, "not a setting") {
		t.Errorf("MCPV2_LOG_LEVEL=WARNING: the node logged\n%s", log)
	}
}

// TestSeedEnvironmentHonoured: the same settings with values other than
// the defaults take effect, so the seed's values above are not the defaults
// passing for them; and a misspelt name is a warning, not a setting.
func TestSeedEnvironmentHonoured(t *testing.T) {
	t.Parallel()
	port := edgeFreePort(t, "127.0.0.1")
	// The custom skills file reads MCPV2_ECHO_TOKEN itself: no warning.
	skillsFile := writeFile(t, filepath.Join(t.TempDir(), "skills.json"), `{"skills": [{"name": "echo", "handler": {"type": "http",
		"url": "https://echo.invalid/", "headers": {"Authorization": "Bearer ${ENV:MCPV2_ECHO_TOKEN}"}}}]}`)
	p := startSeedNode(t, "seed-values", []string{
		"MCPV2_HOME=" + t.TempDir(), "MCPV2_PORT=" + strconv.Itoa(port), "MCPV2_PUBLIC_IP=127.0.0.1", "MCPV2_SECRET=" + seedSecret,
		"MCPV2_SESSION_TIMEOUT=7200", "MCPV2_CLOCK_SKEW=60", "MCPV2_RATE_LIMIT=5", "MCPV2_SESSION_RATE_LIMIT=2",
		"MCPV2_SESION_TTL=60", "MCPV2_SKILLS=" + skillsFile, "MCPV2_ECHO_TOKEN=t0ken",
	})
	wantSessionTTL(t, p, 7200)
	wantSkew(t, p, 30*time.Second, 120*time.Second)

	limited := 0
	for range 8 {
		if a := edgeDo(t, p.client, http.MethodGet, p.base+"/mcpv2/session", nil, nil); a.status == http.StatusTooManyRequests {
			limited++
		} else if a.status != http.StatusOK {
			t.Fatalf("GET /mcpv2/session: %s", a)
		}
	}
	if limited == 0 {
		t.Errorf("MCPV2_SESSION_RATE_LIMIT=2: 8 sessions at once were all issued")
	}
	tok := seedToken(0, 3600)
	limited = 0
	for range 12 {
		a := p.post(t, p.client, "/mcpv2", tok, edgeSlot(1, "ping", map[string]any{}))
		if a.status == http.StatusTooManyRequests {
			limited++
		} else if a.status != http.StatusOK {
			t.Fatalf("POST /mcpv2: %s", a)
		}
	}
	if limited == 0 {
		t.Errorf("MCPV2_RATE_LIMIT=5: 12 requests at once on one session were all served")
	}
	if log := p.proc.stderr(); !strings.Contains(log, "MCPV2_SESION_TTL is not a setting of mcpv2; did you mean MCPV2_SESSION_TTL?") ||
		strings.Contains(log, "MCPV2_ECHO_TOKEN") || strings.Count(log, "not a setting of mcpv2") != 1 {
		t.Errorf("want one warning, for MCPV2_SESION_TTL:\n%s", log)
	}
}

// TestSessionTTLForms: MCPV2_SESSION_TTL alone in seconds or Go form.
func TestSessionTTLForms(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env string
		ttl int64
	}{{"MCPV2_SESSION_TTL=3600", 3600}, {"MCPV2_SESSION_TTL=1h", 3600}, {"MCPV2_SESSION_TTL=5400", 5400}, {"MCPV2_SESSION_TTL=90m", 5400}} {
		t.Run(c.env, func(t *testing.T) {
			t.Parallel()
			port := edgeFreePort(t, "127.0.0.1")
			p := startSeedNode(t, c.env, []string{c.env, "MCPV2_HOME=" + t.TempDir()}, "--no-mesh", "--port", strconv.Itoa(port), "--public-ip", "127.0.0.1")
			wantSessionTTL(t, p, c.ttl)
		})
	}
}

// TestSeedEnvironmentRefused: values and variables that cannot be honoured
// stop the node before anything starts (no identity, no banner), with a
// message that names the variable and what to do.
func TestSeedEnvironmentRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env, args []string
		say       []string
	}{
		{env: []string{"MCPV2_SESSION_TTL=-5"}, say: []string{"MCPV2_SESSION_TTL", `"-5" is negative`, "--session-ttl takes whole seconds (3600) or a Go duration (1h, 90m)"}},
		{env: []string{"MCPV2_SESSION_TIMEOUT=0"}, say: []string{"MCPV2_SESSION_TIMEOUT", "is zero"}},
		{env: []string{"MCPV2_CLOCK_SKEW=86400"}, say: []string{"MCPV2_CLOCK_SKEW", "is more than 1h", "--clock-skew takes whole seconds (300)"}},
		{args: []string{"--clock-skew", "1.5s"}, say: []string{"clock-skew", "is not whole seconds"}},
		{env: []string{"MCPV2_SESSION_TTL=1h", "MCPV2_SESSION_TIMEOUT=7200"}, say: []string{"MCPV2_SESSION_TTL", "MCPV2_SESSION_TIMEOUT", "disagree"}},
		{env: []string{"MCPV2_TOOL_TIMEOUT=30"}, say: []string{"MCPV2_TOOL_TIMEOUT", `"timeout_s"`, "--skills"}},
		{env: []string{"MCPV2_AUDIT_FILE=mcpv2_audit.log"}, say: []string{"MCPV2_AUDIT_FILE", "audit.jsonl", "--data-dir"}},
		{env: []string{"MCPV2_MEMORY_LIMIT_MB=256"}, say: []string{"MCPV2_MEMORY_LIMIT_MB", `"memory_mb"`}},
	} {
		t.Run(strings.Join(append(slices.Clone(c.env), c.args...), " "), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			start := time.Now()
			out, errs, code := runEnv(t, append([]string{"MCPV2_HOME=" + dir}, c.env...),
				append([]string{"node", "--no-mesh", "--listen", "/ip4/127.0.0.1/tcp/0"}, c.args...)...)
			if code == 0 || strings.Contains(out, "MCPV2_PEER_ID=") {
				t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
			}
			for _, s := range c.say {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr does not say %q:\n%s", s, errs)
				}
			}
			if _, err := os.Stat(identityPath(dir)); err == nil {
				t.Errorf("refused, but the node created its identity first")
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("refused after %v", took)
			}
		})
	}
}

// TestEnvWarningClient: a client command warns about an unknown MCPV2_*
// name, and a seed setting that only a node refuses does not stop it.
func TestEnvWarningClient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, errs, code := runEnv(t, []string{"MCPV2_HOME=" + dir, "MCPV2_DATADIR=/elsewhere", "MCPV2_TOOL_TIMEOUT=30"}, "id")
	if code != 0 || !strings.Contains(out, "MCPV2_PEER_ID=") {
		t.Fatalf("id: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if !strings.Contains(errs, "MCPV2_DATADIR is not a setting of mcpv2; did you mean MCPV2_DATA_DIR?") || strings.Contains(errs, "MCPV2_TOOL_TIMEOUT") {
		t.Fatalf("id: stderr %s", errs)
	}
	if _, err := os.Stat(identityPath(dir)); err != nil {
		t.Fatalf("id did not use MCPV2_HOME: %v", err)
	}
}
