//go:build linux

package natlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// The NAT lab's topology (docs/natlab.md): six network namespaces of one
// run, named natlabPrefix<pid>-<tag>-<role>.
//
//	relay 11.77.0.10/16 ─┐
//	natA wan 11.77.0.21 ─┼─ inet (a bridge: the "internet", 11.77.0.0/16)
//	natB wan 11.77.0.22 ─┘
//	natA lan 10.78.1.1/24 ── peerA 10.78.1.2 (default route via natA)
//	natB lan 10.78.2.1/24 ── peerB 10.78.2.2 (default route via natB)
//
// The routers forward and masquerade lan → wan, and drop anything new from
// the wan: to the router itself (without that, TCP gets a RST and QUIC's
// port is lost) and through it (forward policy drop). Nothing leaves the
// namespaces; the test process itself stays in the root namespace.

// natlabPrefix starts the name of every namespace of the lab.
const natlabPrefix = "m2nat-"

// Addresses of the lab. The "internet" is a public range, as it is for a
// user: nothing needs --routable-cidr, and a node sees at once that its
// private addresses sit behind a NAT from the public relay. No packet
// leaves the namespaces (they have no route to anything else), so the
// range's real owner never sees one.
const (
	natlabRelayIP = "11.77.0.10"
	natlabAWan    = "11.77.0.21"
	natlabBWan    = "11.77.0.22"
	natlabALan    = "10.78.1.1"
	natlabBLan    = "10.78.2.1"
	natlabAIP     = "10.78.1.2"
	natlabBIP     = "10.78.2.2"
)

// natlabRoles are the namespaces of a lab, in creation order.
var natlabRoles = []string{"inet", "relay", "natA", "natB", "peerA", "peerB"}

// natLab is one instance of the topology.
type natLab struct {
	t         *testing.T
	ip, nft   string
	symmetric bool
	ns        map[string]string // role → namespace name
}

// natlabTools returns the paths of ip and nft, skipping the test (saying
// why) when it cannot build namespaces here.
func natlabTools(t *testing.T) (ipBin, nftBin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipEnv(t, "skipped: the NAT lab builds network namespaces and nftables NAT: it needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN); CI runs it as root")
	}
	ipBin, err := exec.LookPath("ip")
	if err != nil {
		testenv.SkipEnv(t, "skipped: iproute2's ip is not installed (apt-get install -y iproute2; CI's .ci/run installs it): %v", err)
	}
	nftBin, err = exec.LookPath("nft")
	if err != nil {
		testenv.SkipEnv(t, "skipped: nftables' nft is not installed (apt-get install -y nftables; CI's .ci/run installs it): %v", err)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		testenv.SkipEnv(t, "skipped: curl (the gateway trial's HTTP client inside a namespace) is not installed (apt-get install -y curl; CI's .ci/run installs it): %v", err)
	}
	return ipBin, nftBin
}

// natlabCmd runs a command, returning its combined output in the error.
func natlabCmd(stdin string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// natlabRemoveStale deletes the namespaces, and kills the processes in
// them, that an earlier run of this test left behind when it was killed:
// natlabPrefix<pid>-… whose pid is no longer running.
func natlabRemoveStale(t *testing.T, ipBin string) {
	out, err := exec.Command(ipBin, "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, natlabPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // its test is still running
		}
		natlabKillIn(ipBin, name)
		if err := natlabCmd("", ipBin, "netns", "del", name); err == nil {
			t.Logf("removed the namespace %s left by an earlier run", name)
		}
	}
}

// natlabKillIn kills every process in namespace ns.
func natlabKillIn(ipBin, ns string) {
	out, _ := exec.Command(ipBin, "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// newNATLab builds the topology; symmetric selects `masquerade random`
// (a new port for every flow: symmetric NAT) instead of `masquerade`
// (Linux keeps the source port: endpoint-independent mapping). Cleanup
// deletes the namespaces (processes are killed by their own cleanups,
// registered later, so run first), also when the test fails.
func newNATLab(t *testing.T, ipBin, nftBin, tag string, symmetric bool) *natLab {
	t.Helper()
	l := &natLab{t: t, ip: ipBin, nft: nftBin, symmetric: symmetric, ns: map[string]string{}}
	for _, r := range natlabRoles {
		l.ns[r] = fmt.Sprintf("%s%d-%s-%s", natlabPrefix, os.Getpid(), tag, r)
	}
	t.Cleanup(func() {
		for _, r := range natlabRoles {
			natlabKillIn(ipBin, l.ns[r]) // a process of ours that escaped its cleanup
			if err := natlabCmd("", ipBin, "netns", "del", l.ns[r]); err != nil && !strings.Contains(err.Error(), "No such file") {
				t.Errorf("cleanup: %v", err)
			}
		}
		if out, _ := exec.Command(ipBin, "netns", "list").Output(); bytes.Contains(out, []byte(fmt.Sprintf("%s%d-%s-", natlabPrefix, os.Getpid(), tag))) {
			t.Errorf("cleanup: namespaces left behind:\n%s", out)
		}
	})
	for i, r := range natlabRoles {
		if err := natlabCmd("", ipBin, "netns", "add", l.ns[r]); err != nil {
			if i == 0 && (strings.Contains(err.Error(), "Operation not permitted") || strings.Contains(err.Error(), "Permission denied")) {
				testenv.SkipEnv(t, "skipped: the kernel refuses to create a network namespace here (no CAP_SYS_ADMIN in this container?): %v", err)
			}
			t.Fatal(err)
		}
		l.mustIP("-n", l.ns[r], "link", "set", "dev", "lo", "up")
	}
	// The "internet": a bridge in inet, one veth pair per public host. The
	// pairs are created directly in their namespaces, so names only need to
	// be unique inside each namespace.
	inet := l.ns["inet"]
	l.mustIP("-n", inet, "link", "add", "br0", "type", "bridge")
	l.mustIP("-n", inet, "link", "set", "dev", "br0", "up")
	for _, p := range []struct{ role, dev, port, addr string }{
		{"relay", "eth0", "to-relay", natlabRelayIP},
		{"natA", "wan", "to-natA", natlabAWan},
		{"natB", "wan", "to-natB", natlabBWan},
	} {
		l.mustIP("link", "add", p.dev, "netns", l.ns[p.role], "type", "veth", "peer", "name", p.port, "netns", inet)
		l.mustIP("-n", inet, "link", "set", "dev", p.port, "master", "br0", "up")
		l.mustIP("-n", l.ns[p.role], "addr", "add", p.addr+"/16", "dev", p.dev)
		l.mustIP("-n", l.ns[p.role], "link", "set", "dev", p.dev, "up")
	}
	// The two private networks behind the routers.
	for _, p := range []struct{ router, peer, gw, addr string }{
		{"natA", "peerA", natlabALan, natlabAIP},
		{"natB", "peerB", natlabBLan, natlabBIP},
	} {
		l.mustIP("link", "add", "lan", "netns", l.ns[p.router], "type", "veth", "peer", "name", "eth0", "netns", l.ns[p.peer])
		l.mustIP("-n", l.ns[p.router], "addr", "add", p.gw+"/24", "dev", "lan")
		l.mustIP("-n", l.ns[p.router], "link", "set", "dev", "lan", "up")
		l.mustIP("-n", l.ns[p.peer], "addr", "add", p.addr+"/24", "dev", "eth0")
		l.mustIP("-n", l.ns[p.peer], "link", "set", "dev", "eth0", "up")
		l.mustIP("-n", l.ns[p.peer], "route", "add", "default", "via", p.gw)
		if err := natlabCmd("1\n", ipBin, "netns", "exec", l.ns[p.router], "tee", "/proc/sys/net/ipv4/ip_forward"); err != nil {
			t.Fatal(err)
		}
		if err := natlabCmd(natlabRules(symmetric), ipBin, "netns", "exec", l.ns[p.router], nftBin, "-f", "-"); err != nil {
			if strings.Contains(err.Error(), "Operation not supported") || strings.Contains(err.Error(), "No such file or directory") {
				testenv.SkipEnv(t, "skipped: this kernel has no nftables NAT (nf_tables, nft_masq, nf_conntrack): %v", err)
			}
			t.Fatal(err)
		}
	}
	return l
}

// natlabRules is a router's ruleset (the same as examples/nat/run.sh).
func natlabRules(symmetric bool) string {
	masq := "masquerade"
	if symmetric {
		masq = "masquerade random"
	}
	return `table ip natlab {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "wan" ` + masq + `
	}
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "wan" ct state new drop
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		iifname "lan" oifname "wan" accept
	}
}
`
}

func (l *natLab) mustIP(args ...string) {
	l.t.Helper()
	if err := natlabCmd("", l.ip, args...); err != nil {
		l.t.Fatal(err)
	}
}

// natlabEnv is the environment of the lab's processes: no MCPV2_* of the
// caller, and go-libp2p's hole punching and relay logs at debug (stderr,
// shown when a test fails).
func natlabEnv() []string {
	return append(testenv.CleanEnv(), "GOLOG_LOG_LEVEL=p2p-holepunch=debug,autorelay=debug,error")
}

// natlabTail returns the last n lines of s.
func natlabTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// natProc is a long-running `mcpv2 node` in a namespace of the lab.
type natProc struct {
	name    string
	cmd     *exec.Cmd
	peerID  string
	addrs   []string
	dataDir string
	started time.Time
	// bannerAt is when the node had printed its banner.
	bannerAt time.Time
	exited   chan struct{}

	mu     sync.Mutex
	stderr bytes.Buffer
}

func (p *natProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

// logTail returns the last n lines of the process's stderr.
func (p *natProc) logTail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return natlabTail(p.stderr.String(), n)
}

// addr returns the node's multiaddr with kind ("/tcp/" or "/quic-v1") and
// its public address.
func (p *natProc) addr(t *testing.T, ip, kind string) string {
	t.Helper()
	for _, a := range p.addrs {
		if strings.HasPrefix(a, "/ip4/"+ip+"/") && strings.Contains(a, kind) {
			return a
		}
	}
	t.Fatalf("%s: no %s address on %s in %v", p.name, kind, ip, p.addrs)
	return ""
}

// stop kills the node and waits for it and its readers.
func (p *natProc) stop() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// startNode runs `mcpv2 node --data-dir dataDir args…` in the namespace of
// role and waits for its banner. The process dies with the test process
// (Pdeathsig) and is killed by the test's cleanup.
func (l *natLab) startNode(role, name, dataDir string, args ...string) *natProc {
	l.t.Helper()
	all := append([]string{"netns", "exec", l.ns[role], binPath, "node", "--data-dir", dataDir}, args...)
	cmd := exec.Command(l.ip, all...)
	cmd.Env = natlabEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &natProc{name: name, cmd: cmd, dataDir: dataDir, exited: make(chan struct{}), started: time.Now()}
	cmd.Stderr = p
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	banner := make(chan struct{})
	go func() {
		testenv.ReadBanner(stdout, &p.peerID, &p.addrs, banner)
		_ = cmd.Wait()
		close(p.exited)
	}()
	l.t.Cleanup(p.stop)
	select {
	case <-banner:
		p.bannerAt = time.Now()
	case <-p.exited:
		l.t.Fatalf("%s exited before its banner:\n%s", name, p.logTail(40))
	case <-time.After(30 * time.Second):
		l.t.Fatalf("%s: no banner in 30s:\n%s", name, p.logTail(40))
	}
	return p
}

// natRun is one finished client command.
type natRun struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

func (r natRun) String() string {
	return fmt.Sprintf("exit %d after %v\nstdout: %s\nstderr:\n%s", r.code, r.took.Round(time.Millisecond),
		strings.TrimSpace(r.stdout), natlabTail(r.stderr, 30))
}

// run runs `mcpv2 args…` in the namespace of role, killed after timeout.
func (l *natLab) run(role string, timeout time.Duration, args ...string) natRun {
	l.t.Helper()
	return l.exec(role, timeout, binPath, args...)
}

// exec runs the program bin with args in the namespace of role, killed
// after timeout.
func (l *natLab) exec(role string, timeout time.Duration, bin string, args ...string) natRun {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.ip, append([]string{"netns", "exec", l.ns[role], bin}, args...)...)
	cmd.Env = natlabEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := natRun{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		l.t.Fatalf("run %v: %v", args, err)
	}
	if ctx.Err() != nil {
		r.code = -1
		r.stderr += fmt.Sprintf("\n(killed after %v)", timeout)
	}
	return r
}
