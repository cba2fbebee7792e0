package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpv2/mcpv2/internal/supervise"
	"github.com/mcpv2/mcpv2/protocol"
)

const (
	// readyTimeout bounds how long ReadyTo waits for a peer's banner.
	readyTimeout = 90 * time.Second
	// healthTimeout bounds how long ReadyTo then waits for its health.
	healthTimeout = 20 * time.Second
	// stopGrace is how long StopTo waits after SIGTERM before SIGKILL.
	stopGrace = 15 * time.Second
	// logTailLines is how many of the last lines of a peer's log a
	// failed ReadyTo quotes.
	logTailLines = 8
)

// shellPeer is a node process that ReadyTo started.
type shellPeer struct {
	proc     *supervise.Proc // the process, its banner, output and exit
	port     int             // the edge's bound port
	wanted   int             // the port asked for
	bindHost string          // where the edge listens (the host of the demo address)
	peerID   string
	address  string   // MCPV2_PEER_ADDRESS, the shareable one
	demo     string   // MCPV2_DEMO_SESSION_ADDRESS, for this host
	p2p      []string // MCPV2_P2P_ADDRESS lines
	dataDir  string
	logPath  string
	secret   string
	llmMode  bool
}

// readyTo starts `mcpv2 node` with an HTTP edge (internal/supervise: its
// stderr going to a log file, its stdout read through a pipe for the banner
// and copied there), waits for its banner, checks the edge's health and
// prints the addresses.
func (sh *shell) readyTo(ctx context.Context, a shellArgs) error {
	if err := noArgs("ReadyTo", a); err != nil {
		return fmt.Errorf("%w (usage: ReadyTo [--port N] [--secret S] [--public-ip IP] [--llm-mode])", err)
	}
	port, strict := sh.cfg.DefaultPort, false
	if v, ok := a.opts["port"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("ReadyTo: --port %q is not a TCP port (1-65535)", v)
		}
		port, strict = n, true
	}
	secret := sh.cfg.Secret
	if v, ok := a.opts["secret"]; ok {
		if v == "" {
			return errors.New("ReadyTo: --secret is empty")
		}
		secret = v
	}
	llmMode := a.opts["llm-mode"] == "true"

	base := filepath.Join(sh.cfg.DataDir, "shell")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return fmt.Errorf("ReadyTo: %w", err)
	}
	dir, err := os.MkdirTemp(base, fmt.Sprintf("peer-%d-", port))
	if err != nil {
		return fmt.Errorf("ReadyTo: %w", err)
	}
	logPath := filepath.Join(dir, "node.log")
	if sh.cfg.LogDir != "" {
		if err := os.MkdirAll(sh.cfg.LogDir, 0o700); err != nil {
			return fmt.Errorf("ReadyTo: --log-dir: %w", err)
		}
		logPath = filepath.Join(sh.cfg.LogDir, filepath.Base(dir)+".log")
	}
	args := []string{"node", "--data-dir", dir, "--port", strconv.Itoa(port),
		"--port-fallback=" + strconv.FormatBool(!strict), "--p2p-port", "0"}
	if ip := a.opts["public-ip"]; ip != "" {
		args = append(args, "--public-ip", ip)
	}
	if llmMode {
		args = append(args, "--llm-mode")
	}
	// The peer's stderr is this file itself, so it goes on logging should
	// the shell die; supervise closes it once the peer has exited.
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("ReadyTo: open the log: %w", err)
	}
	// The secret travels in the environment, not on the command line that
	// every user of the machine can read; the rest of the environment is
	// inherited, so MCPV2_* settings reach the peer.
	proc, err := supervise.New(sh.cfg.Exe, args,
		supervise.WithEnv(append(os.Environ(), "MCPV2_SECRET="+secret)),
		supervise.WithLogFile(logFile), supervise.WithGrace(stopGrace))
	var startErr *supervise.StartError
	switch {
	case errors.As(err, &startErr):
		return fmt.Errorf("ReadyTo: start %s: %w", sh.cfg.Exe, startErr.Err)
	case err != nil:
		return fmt.Errorf("ReadyTo: %w", err)
	}
	p := &shellPeer{proc: proc, wanted: port, dataDir: dir, logPath: logPath, secret: secret, llmMode: llmMode}
	sh.log.Debug("shell: started a peer", "pid", proc.Pid(), "args", args, "log", logPath)
	fmt.Fprintf(sh.out, "Starting a peer (pid %d, log %s)…\n", proc.Pid(), logPath)

	fail := func(err error) error {
		sh.stopPeer(p)
		return fmt.Errorf("ReadyTo: %w%s", err, logTail(p))
	}
	bctx, cancel := context.WithTimeout(ctx, readyTimeout)
	banner, err := proc.Banner(bctx)
	cancel()
	var exited *supervise.ExitError
	switch {
	case errors.As(err, &exited):
		if why := exitReason(exited.Log); why != "" {
			return fail(fmt.Errorf("the peer exited before it was ready: %s", why))
		}
		return fail(fmt.Errorf("the peer exited before it was ready (%v)", supervise.ExitText(exited.Err)))
	case err != nil && ctx.Err() != nil:
		return fail(fmt.Errorf("interrupted while the peer was starting: %w", ctx.Err()))
	case err != nil:
		return fail(fmt.Errorf("no banner from the peer within %s", readyTimeout))
	}
	p.peerID = banner.First("MCPV2_PEER_ID")
	p.p2p = banner["MCPV2_P2P_ADDRESS"]
	p.address = banner.First("MCPV2_PEER_ADDRESS")
	p.demo = banner.First("MCPV2_DEMO_SESSION_ADDRESS")
	p.port, _ = strconv.Atoi(banner.First("MCPV2_BOUND_PORT"))
	demo, err := protocol.ParseAddress(p.demo)
	if err != nil || p.port == 0 || p.peerID == "" || p.address == "" {
		return fail(fmt.Errorf("the peer's banner is incomplete: %v", banner))
	}
	// The edge answers on the same-host address, or else (when that names
	// an address it does not listen on) on the shareable one; the one that
	// answers is where StopTo later checks the port.
	demo.SessionID = ""
	targets := []protocol.Address{demo}
	if pa, err := protocol.ParseAddress(p.address); err == nil && pa.Kind == protocol.AddrHTTP && pa.Host != demo.Host {
		targets = append(targets, pa)
	}
	hctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	for p.bindHost == "" {
		var lastErr error
		for _, t := range targets {
			h, err := sh.edge.Health(hctx, t)
			if err != nil {
				lastErr = err
				continue
			}
			if h.PeerID != "" && h.PeerID != p.peerID {
				return fail(fmt.Errorf("%s answers as %s, not as the peer just started (%s)", t, h.PeerID, p.peerID))
			}
			p.bindHost = t.Host
			break
		}
		if p.bindHost != "" {
			break
		}
		if p.proc.Exited() {
			return fail(fmt.Errorf("the peer exited before its edge answered (%v)", supervise.ExitText(p.proc.Err())))
		}
		select {
		case <-hctx.Done():
			return fail(fmt.Errorf("its edge does not answer: %s", describeCallErr(lastErr, demo)))
		case <-p.proc.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	sh.peers = append(sh.peers, p)

	var b strings.Builder
	fmt.Fprintf(&b, "Peer ready: %s\n", p.address)
	if pa, err := protocol.ParseAddress(p.address); err == nil {
		if ip, err := netip.ParseAddr(pa.Host); err == nil && ip.IsLoopback() {
			b.WriteString("  (a loopback address: only this machine reaches it; --public-ip IP shares it)\n")
		}
	}
	if p.port != p.wanted {
		fmt.Fprintf(&b, "  port %d was busy, so it took %d\n", p.wanted, p.port)
	}
	fmt.Fprintf(&b, "  same host: %s\n", p.demo)
	if p.bindHost != demo.Host {
		fmt.Fprintf(&b, "    (that address does not answer here: the edge listens on %s; use the one above)\n", p.bindHost)
	}
	if m := preferredP2P(p.p2p); m != "" {
		fmt.Fprintf(&b, "  mesh:      %s\n", m)
	}
	fmt.Fprintf(&b, "  peer id:   %s\n", p.peerID)
	mode := "stateless"
	if llmMode {
		mode = "LLM mode"
	}
	fmt.Fprintf(&b, "  pid %d, %s, data dir %s\n  log: %s\n", p.proc.Pid(), mode, p.dataDir, p.logPath)
	fmt.Fprintf(&b, "Stop it with: StopTo %d\n", p.port)
	_, err = io.WriteString(sh.out, b.String())
	return err
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// preferredP2P picks the mesh address to show: TCP on a non-loopback IPv4
// first, then any TCP, then the first.
func preferredP2P(addrs []string) string {
	for _, a := range addrs {
		if strings.HasPrefix(a, "/ip4/") && strings.Contains(a, "/tcp/") && !strings.HasPrefix(a, "/ip4/127.") {
			return a
		}
	}
	for _, a := range addrs {
		if strings.Contains(a, "/tcp/") {
			return a
		}
	}
	return first(addrs)
}

// exitReason returns the error that `mcpv2 node` printed last on its
// stderr ("mcpv2: …"), without its prefix, from the last lines of its log,
// or "".
func exitReason(log []string) string {
	for _, l := range slices.Backward(log) {
		if r, ok := strings.CutPrefix(l, "mcpv2: "); ok {
			return r
		}
	}
	return ""
}

// logTail returns the last lines of p's log file (read once, now),
// indented, for an error message, or "" when there is nothing to show.
func logTail(p *shellPeer) string {
	lines := p.proc.Tail()
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	if len(lines) == 0 {
		return ""
	}
	return "\n  last lines of " + p.logPath + ":\n    " + strings.Join(lines, "\n    ")
}

// stopTo stops a peer this shell started, named by port or address.
func (sh *shell) stopTo(_ context.Context, a shellArgs) error {
	if len(a.pos) != 1 {
		return errors.New("usage: StopTo <port|address>")
	}
	i, err := sh.findPeer("StopTo", a.pos[0])
	if err != nil {
		return err
	}
	p := sh.peers[i]
	sh.peers = append(sh.peers[:i:i], sh.peers[i+1:]...)
	fmt.Fprintln(sh.out, sh.stopPeer(p))
	return nil
}

// findPeer returns the index in sh.peers of the peer named by s, an
// address by the shell's one rule (resolveTarget): a port, an edge
// address of this machine, or a mesh address.
func (sh *shell) findPeer(cmd, s string) (int, error) {
	addr, err := sh.resolveTarget(cmd, s)
	if err != nil {
		return -1, err
	}
	for i, p := range sh.peers {
		switch addr.Kind {
		case protocol.AddrMesh:
			if addr.PeerID == p.peerID {
				return i, nil
			}
		case protocol.AddrHTTP:
			if addr.Port == p.port && sh.isPeerHost(addr.Host, p) {
				return i, nil
			}
		}
	}
	if isPortWord(s) {
		return -1, fmt.Errorf("%s: no peer started by this shell has port %s%s", cmd, s, sh.startedList())
	}
	return -1, fmt.Errorf("%s: no peer started by this shell is at %s%s", cmd, s, sh.startedList())
}

// isPeerHost reports whether host names the machine where p listens.
func (sh *shell) isPeerHost(host string, p *shellPeer) bool {
	if host == p.bindHost || host == "localhost" {
		return true
	}
	if pa, err := protocol.ParseAddress(p.address); err == nil && pa.Host == host {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func (sh *shell) startedList() string {
	if len(sh.peers) == 0 {
		return " (this shell runs no peers)"
	}
	ports := make([]string, len(sh.peers))
	for i, p := range sh.peers {
		ports[i] = strconv.Itoa(p.port)
	}
	return " (this shell's peers have ports " + strings.Join(ports, ", ") + ")"
}

// stopPeer ends p's process (SIGTERM, then SIGKILL after stopGrace), waits
// for it, checks that its port is free and says how it went. It is safe to
// call on a peer that has exited already, and is called once for each peer.
func (sh *shell) stopPeer(p *shellPeer) string {
	what := fmt.Sprintf("peer on port %d (pid %d)", p.port, p.proc.Pid())
	if p.port == 0 {
		what = fmt.Sprintf("peer (pid %d)", p.proc.Pid())
	}
	var how string
	if p.proc.Exited() {
		how = fmt.Sprintf("had already exited (%v); see %s", supervise.ExitText(p.proc.Err()), p.logPath)
		_ = p.proc.Close()
	} else {
		how = "stopped"
		if err := p.proc.Close(); errors.Is(err, supervise.ErrKilled) {
			how = fmt.Sprintf("killed: it did not stop within %s of SIGTERM", stopGrace)
		}
		sh.log.Debug("shell: peer stopped", "pid", p.proc.Pid(), "exit", supervise.ExitText(p.proc.Err()))
	}
	if p.port == 0 {
		return fmt.Sprintf("The %s %s.", what, how)
	}
	if err := checkPortFree(p.bindHost, p.port); err != nil {
		return fmt.Sprintf("The %s %s, but port %d is still busy: %v", what, how, p.port, err)
	}
	return fmt.Sprintf("The %s %s; port %d is free.", what, how, p.port)
}

// checkPortFree checks, by listening on it, that host:port can be bound. It is
// called once the peer has exited and been reaped, when the system has
// closed its listener (its accepted connections, lingering in TIME_WAIT,
// do not keep a listener with SO_REUSEADDR out, and Go sets that), so a
// busy port is another process's and waiting would not free it.
func checkPortFree(host string, port int) error {
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}

// stopAll stops every peer this shell started, all at once, and prints one
// line for each in start order.
func (sh *shell) stopAll() {
	if len(sh.peers) == 0 {
		return
	}
	peers := sh.peers
	sh.peers = nil
	msgs := make([]string, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Go(func() { msgs[i] = sh.stopPeer(p) })
	}
	wg.Wait()
	for _, m := range msgs {
		fmt.Fprintln(sh.out, m)
	}
}

// listPeers prints the peers this shell started.
func (sh *shell) listPeers(_ context.Context, a shellArgs) error {
	if err := noArgs("Peers", a); err != nil {
		return err
	}
	if len(sh.peers) == 0 {
		fmt.Fprintln(sh.out, "This shell runs no peers: start one with ReadyTo.")
		return nil
	}
	for _, p := range sh.peers {
		state := "running"
		if p.proc.Exited() {
			state = "exited: " + supervise.ExitText(p.proc.Err())
		}
		fmt.Fprintf(sh.out, "port %d  pid %d  %s  %s  %s\n  log: %s\n", p.port, p.proc.Pid(), state, p.address, p.peerID, p.logPath)
	}
	return nil
}
