// Package testenv holds what the project's tests share about their
// environment: skipping for a reason of the machine (not root, a tool or
// the kernel missing) unless CI requires every test to run, and the mcpv2
// binary and the processes of it that they start (StartProc).
//
// It is imported by _test.go files only.
package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// RequireAllEnv names the variable that CI (.ci/run) sets so that a test
// which cannot run here fails instead of skipping.
const RequireAllEnv = "MCPV2_REQUIRE_ALL"

// SkipEnv skips t for a reason of the environment (not root, a tool or the
// kernel missing, another OS), with msg formatted as by fmt.Sprintf. Where
// every test must run it fails t with the same message instead, so that CI
// cannot go green by skipping: when MCPV2_REQUIRE_ALL is set and not "0"
// (.ci/run sets it), or when CI=true (as GitHub Actions and most CI
// services set it) and MCPV2_REQUIRE_ALL is not "0". It is the one rule of
// every test that needs what the machine may lack.
func SkipEnv(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if why := requireAll(); why != "" {
		t.Fatalf("%s (%s: this test must run, not skip)", msg, why)
	}
	t.Skip(msg)
}

// requireAll says why a test must run here ("MCPV2_REQUIRE_ALL=1",
// "CI=true"), or "" when it may skip: MCPV2_REQUIRE_ALL decides when set,
// else CI=true requires.
func requireAll() string {
	if v, ok := os.LookupEnv(RequireAllEnv); ok && v != "" {
		if v == "0" {
			return ""
		}
		return RequireAllEnv + "=" + v
	}
	if os.Getenv("CI") == "true" {
		return "CI=true"
	}
	return ""
}

// IsPermissionError reports whether err (of a command such as ip or nft)
// says the kernel refused for lack of privilege, as in a container without
// CAP_SYS_ADMIN or CAP_NET_ADMIN.
func IsPermissionError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Operation not permitted") || strings.Contains(s, "Permission denied")
}

// ProcStatus returns a size field of /proc/PID/status (VmRSS, VmHWM, …)
// in bytes. A zombie has none: its error says so.
func ProcStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	if strings.Contains(string(b), "\nState:\tZ") {
		return 0, fmt.Errorf("process %d is a zombie", pid)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: %s %q: %w", pid, field, strings.TrimSpace(v), err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// CleanEnv is the test process's environment without the MCPV2_ variables,
// for the mcpv2 processes a test starts: a developer's MCPV2_BOOTSTRAP or
// CI's MCPV2_REQUIRE_ALL must not change what a test's node does.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPV2_") {
			env = append(env, kv)
		}
	}
	return env
}

// RemoveStaleNetns deletes the network namespaces (ip netns) whose name
// matches re when the test process that made them is gone: re's first
// group is that process's pid. A test killed before its cleanup leaves
// its namespaces behind; the next run removes them.
func RemoveStaleNetns(t testing.TB, ipBin string, re *regexp.Regexp) {
	t.Helper()
	out, err := exec.Command(ipBin, "netns", "list").Output()
	if err != nil {
		return
	}
	for line := range strings.Lines(string(out)) {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		m := re.FindStringSubmatch(name)
		if len(m) < 2 {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // its test is still running
		}
		if err := exec.Command(ipBin, "netns", "del", name).Run(); err == nil {
			t.Logf("removed the namespace %s left by an earlier run", name)
		}
	}
}

// BinEnv names a prebuilt mcpv2 binary for MainWithMCPV2 to test instead
// of building one.
const BinEnv = "MCPV2_TEST_BIN"

// BuildMCPV2 builds the mcpv2 command into a new temporary directory,
// with the race detector when race is set (a package whose few processes
// should run with it when its tests do; many race-detector processes would
// not fit a small machine). remove deletes that directory. A test
// package's TestMain calls it once.
func BuildMCPV2(dirPrefix string, race bool) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "mcpv2")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, "github.com/mcpv2/mcpv2/cmd/mcpv2")...).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build mcpv2: %v\n%s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// Buffer is a bytes.Buffer safe for concurrent writes (a process's stderr)
// and reads (the test's).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// FilesIn lists a node data dir's files directory: the visible names and
// the partial uploads (kept under the reserved hidden prefix .mcpv2-part-).
func FilesIn(t testing.TB, dataDir string) (visible, parts []string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dataDir, "files"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".mcpv2-part-") {
			parts = append(parts, e.Name())
		} else {
			visible = append(visible, e.Name())
		}
	}
	return visible, parts
}

// MainWithMCPV2 is the TestMain of a package of process tests: it builds
// the mcpv2 binary into *bin (BuildMCPV2), runs the tests, removes the
// binary, and when they passed calls leaks (goleak.Find, with the
// package's ignores), a failure of which fails the run. It returns the exit
// code for os.Exit.
//
// With BinEnv set (MCPV2_TEST_BIN=/path/to/mcpv2) it runs the tests against
// that binary instead of building one: the attack tests are run so against
// an earlier release, to show what they find there.
func MainWithMCPV2(m *testing.M, dirPrefix string, race bool, bin *string, leaks func() error) int {
	b, remove, err := "", func() {}, error(nil)
	if p := os.Getenv(BinEnv); p != "" {
		b = p
	} else if b, remove, err = BuildMCPV2(dirPrefix, race); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*bin = b
	code := m.Run()
	remove()
	if code == 0 {
		// Every test waits for the processes it started and their readers.
		if err := leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// AuditLines reads the audit log of the node whose data dir is dataDir
// (audit.jsonl), each line decoded; a line that is not JSON fails t.
func AuditLines(t testing.TB, dataDir string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(dataDir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// CloseTwice closes c twice, as every owner's Close must allow (DESIGN
// rule 1): the first Close must return nil, the second net.ErrClosed.
func CloseTwice(t testing.TB, c io.Closer) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatalf("first Close = %v", err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close = %v, want net.ErrClosed", err)
	}
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago (for
// a server that must be told its port before it starts).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
