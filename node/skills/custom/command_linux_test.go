//go:build linux

package skills

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

	"github.com/mcpv2/mcpv2/protocol"
)

// runCustomTestTool makes the test binary act as the program of a command
// skill; TestMain calls it when customTestToolEnv is set. It returns the
// exit code.
func runCustomTestTool(tool string) int {
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
			if !strings.HasPrefix(kv, customTestToolEnv+"=") {
				child.Env = append(child.Env, kv)
			}
		}
		child.Env = append(child.Env, customTestToolEnv+"=sleep")
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
	env := map[string]string{customTestToolEnv: tool, "GORACE": "atexit_sleep_ms=0"}
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
		for !processGone(pid) {
			if time.Now().After(deadline) {
				t.Errorf("process %d is still running", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(10 * time.Millisecond)
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

// TestCustomGoodFile loads a file with all three handler kinds and runs
// each through Registry.Call.
func TestCustomGoodFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		fmt.Fprintf(w, `{"echo":%s}`, body)
	}))
	defer srv.Close()
	scratch := filepath.Join(t.TempDir(), "scratch")
	path := writeCustomFile(t, greetSkill,
		commandSkill("echo", "echo", nil),
		map[string]any{"name": "web", "tags": []string{"net"}, "handler": map[string]any{"type": "http", "url": srv.URL}},
	)
	r := newCustomTestRegistry(t)
	names, err := LoadCustomFile(path, r, CustomOptions{ScratchDir: scratch, HTTPClient: srv.Client()})
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
	if out, pe := callCustom(t, ctx, r, "greet", `{"name":"mesh"}`); pe != nil || string(out) != `{"result":"Hello, mesh!"}` {
		t.Errorf("greet = %s, %v", out, pe)
	}
	out, pe := callCustom(t, ctx, r, "echo", `{"a":1}`)
	var echo struct{ Args json.RawMessage }
	if pe != nil || json.Unmarshal(out, &echo) != nil || string(echo.Args) != `{"a":1}` {
		t.Errorf("echo = %s, %v", out, pe)
	}
	if out, pe := callCustom(t, ctx, r, "web", `{"b":[true]}`); pe != nil || string(out) != `{"echo":{"b":[true]}}` {
		t.Errorf("web = %s, %v", out, pe)
	}
	wantScratchEmpty(t, scratch)
}

func TestCustomCommandDefaults(t *testing.T) {
	c, err := newCustomCommand("c", json.RawMessage(`{"type":"command","command":["true","x"]}`), CustomOptions{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if c.timeout != 30*time.Second || c.memBytes != 1<<30 || !filepath.IsAbs(c.path) || !slices.Equal(c.argv, []string{"true", "x"}) || c.maxOut != 1<<20 {
		t.Errorf("defaults: timeout %v, mem %d, path %q, argv %q, maxOut %d", c.timeout, c.memBytes, c.path, c.argv, c.maxOut)
	}
	// A relative path with a slash is taken relative to BaseDir.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err = newCustomCommand("c", json.RawMessage(`{"type":"command","command":["./tool"]}`), CustomOptions{BaseDir: dir}.withDefaults())
	if err != nil || c.path != filepath.Join(dir, "tool") {
		t.Errorf("relative program: %v, %+v", err, c)
	}
	if _, err := newCustomCommand("c", json.RawMessage(`{"type":"command","command":["./tool"]}`), CustomOptions{BaseDir: t.TempDir()}.withDefaults()); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing relative program: %v", err)
	}
}

// TestCustomCommandEcho checks what the program gets: its arguments on
// stdin, a fresh scratch working directory that is removed afterwards, a
// minimal environment without the node's secrets, its own process group
// and the rlimits.
func TestCustomCommandEcho(t *testing.T) {
	t.Setenv("MCPV2_LLM_API_KEY", "secret")
	t.Setenv("MCPV2_TEST_EXTRA", "from-parent")
	scratch := filepath.Join(t.TempDir(), "scratch")
	path := writeCustomFile(t, commandSkill("echo", "echo", map[string]any{
		"timeout_s": 6.5, "memory_mb": 3000,
		"env": map[string]string{"EXTRA": "${ENV:MCPV2_TEST_EXTRA}"},
	}))
	r := loadCustom(t, path, CustomOptions{ScratchDir: scratch})
	ctx := WithCallInfo(t.Context(), CallInfo{Caller: "12D3KooWcaller", Via: "mesh"})
	out, pe := callCustom(t, ctx, r, "echo", `{"text":"héllo","n":[1,2]}`)
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
		customTestToolEnv + "=echo", "PATH=" + os.Getenv("PATH"), "TMPDIR=" + got.Cwd,
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

// TestCustomCommandTimeoutKillsGroup checks that a timeout kills the whole
// process group promptly, the program's own child included.
func TestCustomCommandTimeoutKillsGroup(t *testing.T) {
	scratch := filepath.Join(t.TempDir(), "scratch")
	pidfile := filepath.Join(t.TempDir(), "pids")
	path := writeCustomFile(t, commandSkill("spawn", "spawn", map[string]any{
		"timeout_s": 1.5, "env": map[string]string{"PIDFILE": pidfile},
	}))
	r := loadCustom(t, path, CustomOptions{ScratchDir: scratch})
	start := time.Now()
	_, pe := callCustom(t, t.Context(), r, "spawn", `{}`)
	elapsed := time.Since(start)
	wantCustomError(t, pe, protocol.CodeToolExecution, `command skill "spawn": timed out after 1.5s`)
	if elapsed < 1500*time.Millisecond || elapsed > 1500*time.Millisecond+900*time.Millisecond {
		t.Errorf("the call took %v; want about 1.5s", elapsed)
	}
	wantGone(t, readPids(t, pidfile)...)
	wantScratchEmpty(t, scratch)
}

func TestCustomCommandCancel(t *testing.T) {
	scratch := filepath.Join(t.TempDir(), "scratch")
	pidfile := filepath.Join(t.TempDir(), "pids")
	path := writeCustomFile(t, commandSkill("spawn", "spawn", map[string]any{
		"timeout_s": 120, "env": map[string]string{"PIDFILE": pidfile},
	}))
	r := loadCustom(t, path, CustomOptions{ScratchDir: scratch})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var canceledAt time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			if _, err := os.Stat(pidfile); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		canceledAt = time.Now()
		cancel()
	}()
	_, pe := callCustom(t, ctx, r, "spawn", `{}`)
	returned := time.Now()
	<-done
	wantCustomError(t, pe, protocol.CodeToolExecution, `command skill "spawn": canceled`)
	if d := returned.Sub(canceledAt); d > 900*time.Millisecond {
		t.Errorf("the call returned %v after the cancel", d)
	}
	wantGone(t, readPids(t, pidfile)...)
	wantScratchEmpty(t, scratch)
}

// TestCustomCommandLeftoverChild checks that a program that exits leaving a
// child behind (holding its stdout) still answers, and the child dies.
func TestCustomCommandLeftoverChild(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	path := writeCustomFile(t, commandSkill("spawn", "spawn", map[string]any{
		"env": map[string]string{"PIDFILE": pidfile, "SPAWN_EXIT": "1"},
	}))
	r := loadCustom(t, path, CustomOptions{ScratchDir: t.TempDir()})
	start := time.Now()
	out, pe := callCustom(t, t.Context(), r, "spawn", `{}`)
	if pe != nil || string(out) != `{"ok":true}` {
		t.Errorf("spawn = %s, %v", out, pe)
	}
	if d := time.Since(start); d > customWaitDelay+3*time.Second {
		t.Errorf("the call took %v", d)
	}
	wantGone(t, readPids(t, pidfile)...)
}

func TestCustomCommandMemoryLimit(t *testing.T) {
	const allocMB = 4096
	path := writeCustomFile(t,
		commandSkill("small", "alloc", map[string]any{"memory_mb": 2048, "env": map[string]string{"ALLOC_MB": strconv.Itoa(allocMB)}}),
		commandSkill("large", "alloc", map[string]any{"memory_mb": 16384, "env": map[string]string{"ALLOC_MB": strconv.Itoa(allocMB)}}),
	)
	r := loadCustom(t, path, CustomOptions{ScratchDir: t.TempDir()})
	_, pe := callCustom(t, t.Context(), r, "small", `{}`)
	wantCustomError(t, pe, protocol.CodeToolExecution, `command skill "small": exit status 1: stderr: alloc 4096 MiB: cannot allocate memory`)
	// The same allocation under a larger limit succeeds: the limit, not the
	// machine, stopped the first one.
	if out, pe := callCustom(t, t.Context(), r, "large", `{}`); pe != nil || string(out) != `{"allocated_mb":4096}` {
		t.Errorf("large = %s, %v", out, pe)
	}
}

func TestCustomCommandBadOutput(t *testing.T) {
	scratch := t.TempDir()
	path := writeCustomFile(t,
		commandSkill("garbage", "garbage", nil),
		commandSkill("array", "array", nil),
		commandSkill("silent", "silent", nil),
		commandSkill("fail", "fail", nil),
		commandSkill("selfkill", "selfkill", nil),
	)
	r := loadCustom(t, path, CustomOptions{ScratchDir: scratch})
	ctx := t.Context()
	for _, tc := range []struct{ skill, want string }{
		{"garbage", `command skill "garbage": output is not valid JSON`},
		{"array", `command skill "array": output is a JSON array, want a JSON object`},
		{"silent", `command skill "silent": empty output, want a JSON object`},
		{"fail", `command skill "fail": exit status 3: stderr: starting in . | boom: bad input`},
		{"selfkill", `command skill "selfkill": killed by signal (SIGKILL: killed)`},
	} {
		_, pe := callCustom(t, ctx, r, tc.skill, `{}`)
		wantCustomError(t, pe, protocol.CodeToolExecution)
		if pe != nil && pe.Message != tc.want {
			t.Errorf("%s: message %q\nwant %q", tc.skill, pe.Message, tc.want)
		}
		if pe != nil && strings.Contains(pe.Message, scratch) {
			t.Errorf("%s: message names a host path: %q", tc.skill, pe.Message)
		}
	}
	wantScratchEmpty(t, scratch)
}

func TestCustomCommandStdoutCap(t *testing.T) {
	path := writeCustomFile(t, commandSkill("flood", "flood", map[string]any{"timeout_s": 60}))
	r := loadCustom(t, path, CustomOptions{ScratchDir: t.TempDir(), MaxOutput: 4096})
	start := time.Now()
	_, pe := callCustom(t, t.Context(), r, "flood", `{}`)
	wantCustomError(t, pe, protocol.CodeToolExecution, `command skill "flood": output exceeds 4096 bytes`)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("an endless writer was stopped after %v; want it killed at the cap", d)
	}
}

func TestCustomStderrTail(t *testing.T) {
	c := &customCommand{path: "/opt/tools/bin/wc", scratch: "/var/lib/mcpv2/scratch", baseDir: "/etc/mcpv2"}
	long := strings.Repeat("é", 400) // 800 bytes of two-byte runes
	got := c.stderrTail([]byte("/opt/tools/bin/wc: reading /var/lib/mcpv2/scratch/mcpv2-call-1/x\n\n  config /etc/mcpv2/a  \n"+long+"\xff\n"), "/var/lib/mcpv2/scratch/mcpv2-call-1")
	if strings.Contains(got, "/opt") || strings.Contains(got, "/var") || strings.Contains(got, "/etc") {
		t.Errorf("tail names host paths: %q", got)
	}
	if len(got) > customStderrShow+len("…") || !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "é?") {
		t.Errorf("tail %q (%d bytes) not cut to its end", got, len(got))
	}
	got = c.stderrTail([]byte("/opt/tools/bin/wc: reading /var/lib/mcpv2/scratch/mcpv2-call-1/x\n\n  config /etc/mcpv2/a  \n"), "/var/lib/mcpv2/scratch/mcpv2-call-1")
	if want := "wc: reading ./x | config <skills-dir>/a"; got != want {
		t.Errorf("tail %q; want %q", got, want)
	}
	tb := &customTailBuffer{keep: 4}
	for _, s := range []string{"ab", "cde", "f", "ghijkl", "m"} {
		_, _ = tb.Write([]byte(s))
	}
	if string(tb.Bytes()) != "jklm" {
		t.Errorf("tail buffer %q; want %q", tb.Bytes(), "jklm")
	}
}

// TestCustomCommandSchemaFirst checks that arguments that do not match the
// input schema are refused with -32602 before the program runs.
func TestCustomCommandSchemaFirst(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	s := commandSkill("spawn", "spawn", map[string]any{"env": map[string]string{"PIDFILE": pidfile, "SPAWN_EXIT": "1"}})
	s["input_schema"] = map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []string{"n"}}
	r := loadCustom(t, writeCustomFile(t, s), CustomOptions{ScratchDir: t.TempDir()})
	for _, args := range []string{`{}`, `{"n":"x"}`, `[1]`} {
		_, pe := callCustom(t, t.Context(), r, "spawn", args)
		wantCustomError(t, pe, protocol.CodeInvalidParams)
	}
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Fatalf("the program ran on invalid arguments (pid file: %v)", err)
	}
	if out, pe := callCustom(t, t.Context(), r, "spawn", `{"n":1}`); pe != nil || string(out) != `{"ok":true}` {
		t.Errorf("valid call = %s, %v", out, pe)
	}
	wantGone(t, readPids(t, pidfile)...)
}

// TestCustomCommandConcurrent runs calls side by side, as many as the cap
// allows: each gets its own scratch directory and its own answer.
func TestCustomCommandConcurrent(t *testing.T) {
	const n = 8
	scratch := t.TempDir()
	r := loadCustom(t, writeCustomFile(t, commandSkill("echo", "echo", nil)), CustomOptions{ScratchDir: scratch, MaxCommandRuns: n})
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

func TestCustomCommandWritableFileWarns(t *testing.T) {
	path := writeCustomFile(t, commandSkill("echo", "echo", nil))
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := LoadCustomFile(path, NewRegistry(nil), CustomOptions{ScratchDir: t.TempDir(), Logger: log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "writable by group or others") {
		t.Errorf("no warning about a world-writable file with command skills; logs: %s", logs.String())
	}
}
