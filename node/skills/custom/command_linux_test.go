//go:build linux

package custom

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// runTestTool makes the test binary act as the program of a command
// skill; TestMain calls it when testToolEnv is set. It returns the
// exit code.
func runTestTool(tool string) int {
	switch tool {
	case "echo": // report what the program sees
		in, err := io.ReadAll(os.Stdin)
		if err != nil {
			return 1
		}
		var as, cpu, core unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_AS, &as)
		_ = unix.Getrlimit(unix.RLIMIT_CPU, &cpu)
		_ = unix.Getrlimit(unix.RLIMIT_CORE, &core)
		wd, _ := os.Getwd()
		_ = os.WriteFile("left-behind.txt", []byte("x"), 0o600)
		err = json.NewEncoder(os.Stdout).Encode(map[string]any{
			"args": json.RawMessage(in), "argv": os.Args, "cwd": wd, "env": os.Environ(),
			"pid": os.Getpid(), "pgid": syscall.Getpgrp(),
			"rlimit_as": as.Cur, "rlimit_cpu": cpu.Cur, "rlimit_cpu_max": cpu.Max, "rlimit_core": core.Max,
		})
		if err != nil {
			return 1
		}
	case "sleep":
		time.Sleep(time.Hour)
	case "spawn": // start a child in the same group, report both pids, then sleep or exit
		child := exec.Command(os.Args[0])
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, testToolEnv+"=") {
				child.Env = append(child.Env, kv)
			}
		}
		child.Env = append(child.Env, testToolEnv+"=sleep")
		child.Stdout, child.Stderr = os.Stdout, os.Stderr // holds the pipes open
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pidfile := os.Getenv("PIDFILE")
		if err := os.WriteFile(pidfile+".tmp", fmt.Appendf(nil, "%d %d", os.Getpid(), child.Process.Pid), 0o600); err != nil {
			return 1
		}
		if err := os.Rename(pidfile+".tmp", pidfile); err != nil {
			return 1
		}
		if os.Getenv("SPAWN_EXIT") != "" {
			fmt.Print(`{"ok":true}`)
			return 0
		}
		time.Sleep(time.Hour)
	case "alloc": // reserve ALLOC_MB of address space
		mb, _ := strconv.Atoi(os.Getenv("ALLOC_MB"))
		if _, err := unix.Mmap(-1, 0, mb<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON); err != nil {
			fmt.Fprintf(os.Stderr, "alloc %d MiB: %v\n", mb, err)
			return 1
		}
		fmt.Printf(`{"allocated_mb":%d}`, mb)
	case "garbage":
		fmt.Println("hello, this is not JSON")
	case "array":
		fmt.Println("[1,2,3]")
	case "silent":
	case "flood":
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := os.Stdout.Write(chunk); err != nil {
				return 1
			}
		}
	case "fail":
		wd, _ := os.Getwd()
		fmt.Fprintf(os.Stderr, "starting in %s\n\nboom: bad input\n", wd)
		return 3
	case "selfkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Hour)
	default:
		fmt.Fprintf(os.Stderr, "unknown test tool %q\n", tool)
		return 2
	}
	return 0
}

// commandSkill is a command skill that runs this test binary as tool. The
// memory limit is generous by default: a race-enabled Go binary reserves
// about 1 GiB of address space just to start.
func commandSkill(name, tool string, handler map[string]any) map[string]any {
	h := map[string]any{"type": "command", "command": []string{os.Args[0]}, "memory_mb": 8192, "timeout_s": 20}
	// A race-enabled binary sleeps 1s at exit unless told otherwise.
	env := map[string]string{testToolEnv: tool, "GORACE": "atexit_sleep_ms=0"}
	for k, v := range handler {
		if k == "env" {
			for ek, ev := range v.(map[string]string) {
				env[ek] = ev
			}
			continue
		}
		h[k] = v
	}
	h["env"] = env
	return map[string]any{"name": name, "handler": h}
}

// wantScratchEmpty checks that every per-call scratch directory is gone.
func wantScratchEmpty(t *testing.T, scratch string) {
	t.Helper()
	ents, err := os.ReadDir(scratch)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("scratch directory %s still holds %v", scratch, ents)
	}
}

// processGone reports whether pid has exited (a zombie not yet reaped by
// an init that does not reap counts as gone).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// wantGone waits briefly for pids to exit and fails the test if one does not
// (killing it, so that the test leaves nothing behind).
func wantGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for _, pid := range pids {
		if !waitExit(pid, time.Until(deadline)) && !processGone(pid) {
			t.Errorf("process %d is still running", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func readPids(t *testing.T, pidfile string) []int {
	t.Helper()
	data, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatalf("the tool wrote no pid file: %v", err)
	}
	var a, b int
	if _, err := fmt.Sscanf(string(data), "%d %d", &a, &b); err != nil {
		t.Fatalf("pid file %q: %v", data, err)
	}
	return []int{a, b}
}

// TestGoodFile loads a file with all three handler kinds and runs
// each through Registry.Call.
func TestGoodFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		fmt.Fprintf(w, `{"echo":%s}`, body)
	}))
	defer srv.Close()
	scratch := filepath.Join(t.TempDir(), "scratch")
	path := writeFile(t, greetSkill,
		commandSkill("echo", "echo", nil),
		map[string]any{"name": "web", "tags": []string{"net"}, "handler": map[string]any{"type": "http", "url": srv.URL}},
	)
	r := newTestRegistry(t)
	names, err := loadInto(t, r, path, WithScratchDir(scratch), WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"greet", "echo", "web"}) || !slices.Equal(r.Names(), []string{"ping", "greet", "echo", "web"}) {
		t.Fatalf("names %q, registry %q", names, r.Names())
	}
	if fi, err := os.Stat(scratch); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("scratch root: %v, %v; want a 0700 directory", fi, err)
	}
	ctx := t.Context()
	if out, pe := callSkill(t, ctx, r, "greet", `{"name":"mesh"}`); pe != nil || string(out) != `{"result":"Hello, mesh!"}` {
		t.Errorf("greet = %s, %v", out, pe)
	}
	out, pe := callSkill(t, ctx, r, "echo", `{"a":1}`)
	var echo struct{ Args json.RawMessage }
	if pe != nil || json.Unmarshal(out, &echo) != nil || string(echo.Args) != `{"a":1}` {
		t.Errorf("echo = %s, %v", out, pe)
	}
	if out, pe := callSkill(t, ctx, r, "web", `{"b":[true]}`); pe != nil || string(out) != `{"echo":{"b":[true]}}` {
		t.Errorf("web = %s, %v", out, pe)
	}
	wantScratchEmpty(t, scratch)
}

func TestCommandDefaults(t *testing.T) {
	c, err := newCommand("c", json.RawMessage(`{"type":"command","command":["true","x"]}`), newTestLoader(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.timeout != 30*time.Second || c.memBytes != 1<<30 || !filepath.IsAbs(c.path) || !slices.Equal(c.argv, []string{"true", "x"}) || c.maxOut != 1<<20 {
		t.Errorf("defaults: timeout %v, mem %d, path %q, argv %q, maxOut %d", c.timeout, c.memBytes, c.path, c.argv, c.maxOut)
	}
	// A relative path with a slash is taken relative to baseDir.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err = newCommand("c", json.RawMessage(`{"type":"command","command":["./tool"]}`), newTestLoader(t), dir)
	if err != nil || c.path != filepath.Join(dir, "tool") {
		t.Errorf("relative program: %v, %+v", err, c)
	}
	if _, err := newCommand("c", json.RawMessage(`{"type":"command","command":["./tool"]}`), newTestLoader(t), t.TempDir()); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing relative program: %v", err)
	}
}

// TestCommandEcho checks what the program gets: its arguments on
// stdin, a fresh scratch working directory that is removed afterwards, a
// minimal environment without the node's secrets, its own process group
// and the rlimits.
func TestCommandEcho(t *testing.T) {
	t.Setenv("MCPV2_LLM_API_KEY", "secret")
	t.Setenv("MCPV2_TEST_EXTRA", "from-parent")
	scratch := filepath.Join(t.TempDir(), "scratch")
	path := writeFile(t, commandSkill("echo", "echo", map[string]any{
		"timeout_s": 6.5, "memory_mb": 3000,
		"env": map[string]string{"EXTRA": "${ENV:MCPV2_TEST_EXTRA}"},
	}))
	r := loadFile(t, path, WithScratchDir(scratch))
	ctx := skills.WithCallInfo(t.Context(), skills.CallInfo{Caller: "12D3KooWcaller", Via: "mesh"})
	out, pe := callSkill(t, ctx, r, "echo", `{"text":"héllo","n":[1,2]}`)
	if pe != nil {
		t.Fatal(pe)
	}
	var got struct {
		Args         json.RawMessage
		Argv         []string
		Cwd          string
		Env          []string
		Pid, Pgid    int
		RlimitAS     uint64 `json:"rlimit_as"`
		RlimitCPU    uint64 `json:"rlimit_cpu"`
		RlimitCPUMax uint64 `json:"rlimit_cpu_max"`
		RlimitCore   uint64 `json:"rlimit_core"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if string(got.Args) != `{"text":"héllo","n":[1,2]}` {
		t.Errorf("stdin = %s", got.Args)
	}
	if !slices.Equal(got.Argv, []string{os.Args[0]}) {
		t.Errorf("argv = %q", got.Argv)
	}
	if filepath.Dir(got.Cwd) != scratch || !strings.HasPrefix(filepath.Base(got.Cwd), "mcpv2-call-") {
		t.Errorf("cwd %q is not a fresh directory under %q", got.Cwd, scratch)
	}
	if _, err := os.Stat(got.Cwd); !os.IsNotExist(err) {
		t.Errorf("scratch %q not removed: %v", got.Cwd, err)
	}
	wantScratchEmpty(t, scratch)
	slices.Sort(got.Env)
	want := []string{
		"EXTRA=from-parent", "GORACE=atexit_sleep_ms=0", "HOME=" + got.Cwd, "LANG=C.UTF-8", "MCPV2_CALLER=12D3KooWcaller",
		testToolEnv + "=echo", "PATH=" + os.Getenv("PATH"), "TMPDIR=" + got.Cwd,
	}
	if !slices.Equal(got.Env, want) {
		t.Errorf("env = %q\nwant  %q", got.Env, want)
	}
	for _, kv := range got.Env {
		if strings.Contains(kv, "secret") || strings.HasPrefix(kv, "MCPV2_LLM_API_KEY") {
			t.Errorf("the program sees the parent's secret: %q", kv)
		}
	}
	if got.Pgid != got.Pid || got.Pgid == syscall.Getpgrp() {
		t.Errorf("pgid %d, pid %d (test's pgid %d); want its own process group", got.Pgid, got.Pid, syscall.Getpgrp())
	}
	if got.RlimitAS != 3000<<20 || got.RlimitCPU != 7 || got.RlimitCPUMax != 8 || got.RlimitCore != 0 {
		t.Errorf("rlimits AS %d CPU %d/%d core %d; want %d, 7/8, 0", got.RlimitAS, got.RlimitCPU, got.RlimitCPUMax, got.RlimitCore, 3000<<20)
	}
}

// TestCommandTimeoutKillsGroup checks that a timeout kills the whole
// process group promptly, the program's own child included.
func TestCommandTimeoutKillsGroup(t *testing.T) {
	scratch := filepath.Join(t.TempDir(), "scratch")
	pidfile := filepath.Join(t.TempDir(), "pids")
	path := writeFile(t, commandSkill("spawn", "spawn", map[string]any{
		"timeout_s": 1.5, "env": map[string]string{"PIDFILE": pidfile},
	}))
	r := loadFile(t, path, WithScratchDir(scratch))
	start := time.Now()
	_, pe := callSkill(t, t.Context(), r, "spawn", `{}`)
	elapsed := time.Since(start)
	wantError(t, pe, protocol.CodeToolExecution, `command skill "spawn": timed out after 1.5s`)
	if elapsed < 1500*time.Millisecond || elapsed > 1500*time.Millisecond+900*time.Millisecond {
		t.Errorf("the call took %v; want about 1.5s", elapsed)
	}
	wantGone(t, readPids(t, pidfile)...)
	wantScratchEmpty(t, scratch)
}

func TestCommandCancel(t *testing.T) {
	scratch := filepath.Join(t.TempDir(), "scratch")
	pidfile := filepath.Join(t.TempDir(), "pids")
	path := writeFile(t, commandSkill("spawn", "spawn", map[string]any{
		"timeout_s": 120, "env": map[string]string{"PIDFILE": pidfile},
	}))
	r := loadFile(t, path, WithScratchDir(scratch))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var canceledAt time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitDir(t, filepath.Dir(pidfile), 10*time.Second, func() bool {
			_, err := os.Stat(pidfile)
			return err == nil
		})
		canceledAt = time.Now()
		cancel()
	}()
	_, pe := callSkill(t, ctx, r, "spawn", `{}`)
	returned := time.Now()
	<-done
	wantError(t, pe, protocol.CodeToolExecution, `command skill "spawn": canceled`)
	if d := returned.Sub(canceledAt); d > 900*time.Millisecond {
		t.Errorf("the call returned %v after the cancel", d)
	}
	wantGone(t, readPids(t, pidfile)...)
	wantScratchEmpty(t, scratch)
}

// TestCommandLeftoverChild checks that a program that exits leaving a
// child behind (holding its stdout) still answers, and the child dies.
func TestCommandLeftoverChild(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	path := writeFile(t, commandSkill("spawn", "spawn", map[string]any{
		"env": map[string]string{"PIDFILE": pidfile, "SPAWN_EXIT": "1"},
	}))
	r := loadFile(t, path, WithScratchDir(t.TempDir()))
	start := time.Now()
	out, pe := callSkill(t, t.Context(), r, "spawn", `{}`)
	if pe != nil || string(out) != `{"ok":true}` {
		t.Errorf("spawn = %s, %v", out, pe)
	}
	if d := time.Since(start); d > waitDelay+3*time.Second {
		t.Errorf("the call took %v", d)
	}
	wantGone(t, readPids(t, pidfile)...)
}

func TestCommandMemoryLimit(t *testing.T) {
	const allocMB = 4096
	path := writeFile(t,
		commandSkill("small", "alloc", map[string]any{"memory_mb": 2048, "env": map[string]string{"ALLOC_MB": strconv.Itoa(allocMB)}}),
		commandSkill("large", "alloc", map[string]any{"memory_mb": 16384, "env": map[string]string{"ALLOC_MB": strconv.Itoa(allocMB)}}),
	)
	r := loadFile(t, path, WithScratchDir(t.TempDir()))
	_, pe := callSkill(t, t.Context(), r, "small", `{}`)
	wantError(t, pe, protocol.CodeToolExecution, `command skill "small": exit status 1: stderr: alloc 4096 MiB: cannot allocate memory`)
	// The same allocation under a larger limit succeeds: the limit, not the
	// machine, stopped the first one.
	if out, pe := callSkill(t, t.Context(), r, "large", `{}`); pe != nil || string(out) != `{"allocated_mb":4096}` {
		t.Errorf("large = %s, %v", out, pe)
	}
}

func TestCommandBadOutput(t *testing.T) {
	scratch := t.TempDir()
	path := writeFile(t,
		commandSkill("garbage", "garbage", nil),
		commandSkill("array", "array", nil),
		commandSkill("silent", "silent", nil),
		commandSkill("fail", "fail", nil),
		commandSkill("selfkill", "selfkill", nil),
	)
	r := loadFile(t, path, WithScratchDir(scratch))
	ctx := t.Context()
	for _, tc := range []struct{ skill, want string }{
		{"garbage", `command skill "garbage": output is not valid JSON`},
		{"array", `command skill "array": output is a JSON array, want a JSON object`},
		{"silent", `command skill "silent": empty output, want a JSON object`},
		{"fail", `command skill "fail": exit status 3: stderr: starting in . | boom: bad input`},
		{"selfkill", `command skill "selfkill": killed by signal (SIGKILL: killed)`},
	} {
		_, pe := callSkill(t, ctx, r, tc.skill, `{}`)
		wantError(t, pe, protocol.CodeToolExecution)
		if pe != nil && pe.Message != tc.want {
			t.Errorf("%s: message %q\nwant %q", tc.skill, pe.Message, tc.want)
		}
		if pe != nil && strings.Contains(pe.Message, scratch) {
			t.Errorf("%s: message names a host path: %q", tc.skill, pe.Message)
		}
	}
	wantScratchEmpty(t, scratch)
}

func TestCommandStdoutCap(t *testing.T) {
	path := writeFile(t, commandSkill("flood", "flood", map[string]any{"timeout_s": 60}))
	r := loadFile(t, path, WithScratchDir(t.TempDir()), WithMaxOutput(4096))
	start := time.Now()
	_, pe := callSkill(t, t.Context(), r, "flood", `{}`)
	wantError(t, pe, protocol.CodeToolExecution, `command skill "flood": output exceeds 4096 bytes`)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("an endless writer was stopped after %v; want it killed at the cap", d)
	}
}

func TestStderrTail(t *testing.T) {
	c := &command{path: "/opt/tools/bin/wc", scratch: "/var/lib/mcpv2/scratch", baseDir: "/etc/mcpv2"}
	long := strings.Repeat("é", 400) // 800 bytes of two-byte runes
	got := c.stderrTail([]byte("/opt/tools/bin/wc: reading /var/lib/mcpv2/scratch/mcpv2-call-1/x\n\n  config /etc/mcpv2/a  \n"+long+"\xff\n"), "/var/lib/mcpv2/scratch/mcpv2-call-1")
	if strings.Contains(got, "/opt") || strings.Contains(got, "/var") || strings.Contains(got, "/etc") {
		t.Errorf("tail names host paths: %q", got)
	}
	if len(got) > stderrShow+len("…") || !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "é?") {
		t.Errorf("tail %q (%d bytes) not cut to its end", got, len(got))
	}
	got = c.stderrTail([]byte("/opt/tools/bin/wc: reading /var/lib/mcpv2/scratch/mcpv2-call-1/x\n\n  config /etc/mcpv2/a  \n"), "/var/lib/mcpv2/scratch/mcpv2-call-1")
	if want := "wc: reading ./x | config <skills-dir>/a"; got != want {
		t.Errorf("tail %q; want %q", got, want)
	}
	tb := &tailBuffer{keep: 4}
	for _, s := range []string{"ab", "cde", "f", "ghijkl", "m"} {
		_, _ = tb.Write([]byte(s))
	}
	if string(tb.Bytes()) != "jklm" {
		t.Errorf("tail buffer %q; want %q", tb.Bytes(), "jklm")
	}
}

// TestCommandSchemaFirst checks that arguments that do not match the
// input schema are refused with -32602 before the program runs.
func TestCommandSchemaFirst(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	s := commandSkill("spawn", "spawn", map[string]any{"env": map[string]string{"PIDFILE": pidfile, "SPAWN_EXIT": "1"}})
	s["input_schema"] = map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []string{"n"}}
	r := loadFile(t, writeFile(t, s), WithScratchDir(t.TempDir()))
	for _, args := range []string{`{}`, `{"n":"x"}`, `[1]`} {
		_, pe := callSkill(t, t.Context(), r, "spawn", args)
		wantError(t, pe, protocol.CodeInvalidParams)
	}
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Fatalf("the program ran on invalid arguments (pid file: %v)", err)
	}
	if out, pe := callSkill(t, t.Context(), r, "spawn", `{"n":1}`); pe != nil || string(out) != `{"ok":true}` {
		t.Errorf("valid call = %s, %v", out, pe)
	}
	wantGone(t, readPids(t, pidfile)...)
}

// TestCommandConcurrent runs calls side by side, as many as the cap
// allows: each gets its own scratch directory and its own answer.
func TestCommandConcurrent(t *testing.T) {
	const n = 8
	scratch := t.TempDir()
	r := loadFile(t, writeFile(t, commandSkill("echo", "echo", nil)), WithScratchDir(scratch), WithMaxCommandRuns(n))
	type answer struct {
		Args json.RawMessage
		Cwd  string
	}
	answers := make([]answer, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			out, err := r.Call(t.Context(), "echo", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
			if err == nil {
				err = json.Unmarshal(out, &answers[i])
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	dirs := map[string]bool{}
	for i, a := range answers {
		if string(a.Args) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("call %d got args %s", i, a.Args)
		}
		dirs[a.Cwd] = true
	}
	if len(dirs) != n {
		t.Errorf("%d distinct scratch directories for %d calls", len(dirs), n)
	}
	wantScratchEmpty(t, scratch)
}

func TestCommandWritableFileWarns(t *testing.T) {
	path := writeFile(t, commandSkill("echo", "echo", nil))
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := loadInto(t, skills.NewRegistry(nil), path, WithScratchDir(t.TempDir()), WithLogger(log)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "writable by group or others") {
		t.Errorf("no warning about a world-writable file with command skills; logs: %s", logs.String())
	}
}

// TestCommandGoProgramDefaultMemory: a Go program, the usual kind of
// tool, runs under the default memory_mb every time. A Go program
// reserves over 1 GiB of address space as it starts; with RLIMIT_AS set
// by prlimit(2) after the start, a call whose limit landed after that
// reservation died "fatal error: runtime: out of memory" (25 of 60 calls
// of examples/orchestrate's demotools on a 2-core machine). Set before
// the program runs (the shell prologue), the limit is one the runtime
// sizes itself to.
func TestCommandGoProgramDefaultMemory(t *testing.T) {
	if !shellUsable() {
		t.Skipf("no %s: limits are set with prlimit(2) after the start", shell)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH (go test runs it): %v", err)
	}
	src := t.TempDir()
	prog := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module gotool\n\ngo 1.26\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	main := "package main\n\nimport (\n\t\"io\"\n\t\"os\"\n)\n\nfunc main() {\n\tin, _ := io.ReadAll(os.Stdin)\n\tos.Stdout.Write(in)\n}\n"
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(goBin, "build", "-o", prog, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the tool: %v\n%s", err, out)
	}
	r := loadFile(t, writeFile(t, map[string]any{"name": "gotool",
		"handler": map[string]any{"type": "command", "command": []string{prog}, "timeout_s": 20}}))
	for i := range 30 {
		out, pe := callSkill(t, t.Context(), r, "gotool", fmt.Sprintf(`{"n":%d}`, i))
		if pe != nil || string(out) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("call %d of a Go program under the default memory_mb (%d): %s, %v", i, DefaultMemoryMB, out, pe)
		}
	}
}

// TestCommandLimitsWithoutShell: without a shell (an image FROM scratch)
// the program itself runs, argv[0] as written, and prlimit(2) sets its
// limits before its input is written.
func TestCommandLimitsWithoutShell(t *testing.T) {
	old := shellUsable
	shellUsable = func() bool { return false }
	t.Cleanup(func() { shellUsable = old })
	r := loadFile(t, writeFile(t, commandSkill("echo", "echo", map[string]any{"timeout_s": 6.5, "memory_mb": 3000})))
	out, pe := callSkill(t, t.Context(), r, "echo", `{"x":1}`)
	if pe != nil {
		t.Fatal(pe)
	}
	var got struct {
		Argv         []string
		RlimitAS     uint64 `json:"rlimit_as"`
		RlimitCPU    uint64 `json:"rlimit_cpu"`
		RlimitCPUMax uint64 `json:"rlimit_cpu_max"`
		RlimitCore   uint64 `json:"rlimit_core"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if !slices.Equal(got.Argv, []string{os.Args[0]}) || got.RlimitAS != 3000<<20 || got.RlimitCPU != 7 || got.RlimitCPUMax != 8 || got.RlimitCore != 0 {
		t.Errorf("argv %q, rlimits AS %d CPU %d/%d core %d; want %q, %d, 7/8, 0", got.Argv, got.RlimitAS, got.RlimitCPU, got.RlimitCPUMax, got.RlimitCore, os.Args[0], 3000<<20)
	}
}
