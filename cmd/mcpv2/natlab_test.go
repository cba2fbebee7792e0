//go:build linux

package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// The NAT lab (issue: NAT traversal acceptance 1 and 2; docs/natlab.md):
// two agents behind two NAT routers find each other through the DHT, with
// a relay node as the only public peer and bootstrap, call each other and
// send a 64 MiB file with `mcpv2 send`, every command a fresh client
// process in A's private network. natlab_lab_test.go builds the topology.

var (
	natlabTrials    = flag.Int("natlab.trials", 20, "TestNATLab: trials per transport behind endpoint-independent NAT")
	natlabSymTrials = flag.Int("natlab.symtrials", 5, "TestNATLab: trials behind symmetric NAT")
)

const (
	natlabSecret   = "natlab-shared-secret"
	natlabFileSize = 64 << 20
	// natlabWaitDirect is the clients' --wait-direct behind
	// endpoint-independent NAT, and natlabSymWait behind symmetric NAT
	// (where no direct connection comes).
	natlabWaitDirect = 20 * time.Second
	natlabSymWait    = 3 * time.Second
	// natlabSymRelayData is the relay's --relay-max-data in the symmetric
	// lab: a 64 MiB transfer needs several circuits.
	natlabSymRelayData = 16 << 20
	// natlabSkills is B's custom skill.
	natlabSkills = `{"skills":[{"name":"chess","description":"Answers a chess move","tags":["games"],
 "input_schema":{"type":"object","properties":{"move":{"type":"string"}},"required":["move"]},
 "handler":{"type":"template","template":"I answer {{.move}} with e5"}}]}`
	natlabAnswer = `{"result":"I answer e4 with e5"}`
)

// natlabTransport is what a client of a trial listens on and reaches the
// relay with.
type natlabTransport struct {
	name, kind, listen string
}

var natlabTransports = []natlabTransport{
	{"tcp", "/tcp/", "/ip4/0.0.0.0/tcp/0"},
	{"quic", "/quic-v1", "/ip4/0.0.0.0/udp/0/quic-v1"},
}

// natlabDirectRE is the line `mcpv2 call --wait-direct` prints on stderr.
var natlabDirectRE = regexp.MustCompile(`mcpv2: direct connection to (\S+) via (\S+) after ([0-9.]+)s`)

// natTrial is the outcome of one trial: find, call, send.
type natTrial struct {
	n         int
	transport string
	found     bool
	findTook  time.Duration
	callOK    bool
	direct    bool    // the call's connection: no /p2p-circuit, client and B agree
	toDirect  float64 // seconds, as the client reports it
	via       string  // the client's remote address of B
	callTook  time.Duration
	sendOK    bool // exit 0 and the stored file's sha256 matches
	sendPath  string
	sendTook  time.Duration
	problems  []string
}

func (tr *natTrial) fail(format string, args ...any) {
	tr.problems = append(tr.problems, fmt.Sprintf(format, args...))
}

// TestNATLab: the lab with endpoint-independent NAT (masquerade) on both
// routers, TCP and QUIC each: -natlab.trials trials of find → call (must
// become direct: at least 95%) → send 64 MiB (sha256 must match). Then a
// fresh lab with symmetric NAT (masquerade random): -natlab.symtrials
// trials where the call succeeds over the relay every time and the send
// completes across the relay's 16 MiB circuits, and one send that gives up
// with a clear message and leaves no visible partial file.
func TestNATLab(t *testing.T) {
	ipBin, nftBin := natlabTools(t)
	if *natlabTrials < 1 || *natlabSymTrials < 1 {
		t.Fatalf("-natlab.trials %d, -natlab.symtrials %d: want at least 1", *natlabTrials, *natlabSymTrials)
	}
	natlabRemoveStale(t, ipBin)
	begin := time.Now()
	dir := t.TempDir()
	skills := writeFile(t, filepath.Join(dir, "skills.json"), natlabSkills)
	file, sum := natlabRandomFile(t, filepath.Join(dir, "payload.bin"), natlabFileSize)

	t.Run("endpoint-independent", func(t *testing.T) {
		lab := newNATLab(t, ipBin, nftBin, "e", false)
		relay := natlabRelay(t, lab)
		bDir := t.TempDir()
		for _, tr := range natlabTransports {
			// B reaches the relay over the trial's transport: a peer learns
			// its public address per transport from the connections it has
			// (here only the one to the relay), and hole punching needs it.
			relayAddr := relay.addr(t, natlabRelayIP, tr.kind)
			start := time.Now()
			b := lab.startNode("peerB", "B", bDir, natlabBArgs(relayAddr, skills, "private")...)
			natlabWaitReady(t, lab, b, relayAddr, tr)
			t.Logf("%s: B %s ready (relay reservation, card with a /p2p-circuit address) after %v", tr.name, b.peerID, time.Since(start).Round(time.Millisecond))
			var trials []*natTrial
			for i := 1; i <= *natlabTrials; i++ {
				trials = append(trials, natlabTrialRun(t, lab, b, relayAddr, tr, i, file, sum, false))
			}
			natlabReport(t, fmt.Sprintf("endpoint-independent NAT, %s", tr.name), trials, b)
			found, calls, direct, sends := natlabCount(trials)
			n := len(trials)
			if need := int(math.Ceil(0.95 * float64(n))); found < n || calls < n || direct < need || sends < n {
				t.Errorf("%s: found %d/%d, called %d/%d, direct %d/%d (need %d), sent %d/%d: want every find, call and send to succeed and at least 95%% direct",
					tr.name, found, n, calls, n, direct, n, need, sends, n)
			}
			b.stop()
		}
	})

	t.Run("symmetric", func(t *testing.T) {
		lab := newNATLab(t, ipBin, nftBin, "s", true)
		relay := natlabRelay(t, lab, "--relay-max-data", fmt.Sprint(natlabSymRelayData))
		relayTCP := relay.addr(t, natlabRelayIP, "/tcp/")
		start := time.Now()
		// Reachability auto here: AutoNAT (the relay's dial-back fails)
		// finds B private, then B reserves a slot on the relay.
		b := lab.startNode("peerB", "B", t.TempDir(), natlabBArgs(relayTCP, skills, "auto")...)
		natlabWaitReady(t, lab, b, relayTCP, natlabTransports[0])
		t.Logf("symmetric: B %s ready after %v (AutoNAT)", b.peerID, time.Since(start).Round(time.Millisecond))
		var trials []*natTrial
		for i := 1; i <= *natlabSymTrials; i++ {
			tr := natlabTransports[(i-1)%len(natlabTransports)]
			trials = append(trials, natlabTrialRun(t, lab, b, relay.addr(t, natlabRelayIP, tr.kind), tr, i, file, sum, true))
		}
		natlabReport(t, "symmetric NAT (masquerade random)", trials, b)
		found, calls, direct, sends := natlabCount(trials)
		problems := 0
		for _, tr := range trials {
			problems += len(tr.problems)
		}
		if n := len(trials); found < n || calls < n || direct > 0 || sends < n || problems > 0 {
			t.Errorf("symmetric: found %d/%d, called %d/%d over the relay (direct %d), sent %d/%d, %d problems (above): want every find, call and send to succeed over the relay",
				found, n, calls, n, direct, sends, n, problems)
		}
		natlabGiveUp(t, lab, b, relayTCP, file, sum)
	})
	t.Logf("NAT lab: %v in all", time.Since(begin).Round(time.Second))
}

// natlabRelay starts the relay node: the only public peer, DHT server,
// circuit relay and AutoNAT server.
func natlabRelay(t *testing.T, lab *natLab, extra ...string) *natProc {
	t.Helper()
	args := append([]string{"--relay-service", "--no-mdns", "--routable-cidr", natlabWAN,
		"--listen", "/ip4/" + natlabRelayIP + "/tcp/4001", "--listen", "/ip4/" + natlabRelayIP + "/udp/4001/quic-v1"}, extra...)
	return lab.startNode("relay", "relay", t.TempDir(), args...)
}

// natlabBArgs are B's flags: behind natB on fixed ports, its skill, the
// shared secret that grants A every skill.
func natlabBArgs(relayAddr, skills, reachability string) []string {
	return []string{"--bootstrap", relayAddr, "--routable-cidr", natlabWAN, "--no-mdns",
		"--listen", "/ip4/0.0.0.0/tcp/4001", "--listen", "/ip4/0.0.0.0/udp/4001/quic-v1",
		"--skills", skills, "--secret", natlabSecret, "--name", "bob", "--reachability", reachability, "--log-level", "debug"}
}

// natlabWaitReady waits until A's side of the lab finds B by skill with a
// relay (/p2p-circuit) address in its card, which B publishes once it holds
// a reservation, and B has run for 2 s: go-libp2p serves DCUtR only once it
// has seen its own public address, checked after 250 ms, 750 ms, ….
func natlabWaitReady(t *testing.T, lab *natLab, b *natProc, relayAddr string, tr natlabTransport) {
	t.Helper()
	probe := t.TempDir()
	deadline := time.Now().Add(60 * time.Second)
	var last natRun
	for time.Now().Before(deadline) {
		last = lab.run("peerA", 30*time.Second, "find", "chess", "--json", "--data-dir", probe,
			"--bootstrap", relayAddr, "--routable-cidr", natlabWAN, "--listen", tr.listen)
		if card, ok := natlabFound(last.stdout, b.peerID); ok && slices.ContainsFunc(card.Addrs, func(a string) bool { return strings.Contains(a, "/p2p-circuit") }) {
			if wait := 2*time.Second - time.Since(b.started); wait > 0 {
				time.Sleep(wait)
			}
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("B is not found with a relay address within 60 s; last find: %s\nB's log:\n%s", last, b.logTail(40))
}

// natlabFound returns B's card from `find --json` output.
func natlabFound(stdout, peerID string) (protocol.AgentCard, bool) {
	var res []protocol.FindResult
	if json.Unmarshal([]byte(stdout), &res) != nil {
		return protocol.AgentCard{}, false
	}
	for _, r := range res {
		if r.Card.PeerID == peerID {
			return r.Card, true
		}
	}
	return protocol.AgentCard{}, false
}

// natlabTrialRun runs one trial with a new client identity: find B by skill,
// call it with --wait-direct, send the file. symmetric expects the relay to
// carry everything.
func natlabTrialRun(t *testing.T, lab *natLab, b *natProc, relayAddr string, tr natlabTransport, n int, file, sum string, symmetric bool) *natTrial {
	t.Helper()
	res := &natTrial{n: n, transport: tr.name}
	aDir := t.TempDir()
	aID := natlabIdentity(t, aDir)
	common := []string{"--data-dir", aDir, "--bootstrap", relayAddr, "--routable-cidr", natlabWAN, "--listen", tr.listen}
	wait := natlabWaitDirect
	if symmetric {
		wait = natlabSymWait
	}

	r := lab.run("peerA", time.Minute, append([]string{"find", "chess", "--json"}, common...)...)
	res.findTook = r.took
	if _, ok := natlabFound(r.stdout, b.peerID); ok && r.code == 0 {
		res.found = true
	} else {
		res.fail("find: B not in the results: %s", r)
	}

	r = lab.run("peerA", 2*time.Minute, append([]string{"call", b.peerID, "chess", `{"move":"e4"}`,
		"--secret", natlabSecret, "--wait-direct", wait.String()}, common...)...)
	res.callTook = r.took
	res.callOK = r.code == 0 && strings.TrimSpace(r.stdout) == natlabAnswer
	if !res.callOK {
		res.fail("call: %s", r)
	}
	clientDirect := false
	if m := natlabDirectRE.FindStringSubmatch(r.stderr); m != nil && m[1] == b.peerID {
		res.via = m[2]
		fmt.Sscanf(m[3], "%g", &res.toDirect)
		clientDirect = !strings.Contains(res.via, "/p2p-circuit") && strings.Contains(res.via, tr.kind)
	}
	remote := natlabAudit(t, b, aID, protocol.MethodToolsCall)
	res.direct = clientDirect && remote != "" && !strings.Contains(remote, "/p2p-circuit")
	switch {
	case symmetric && (res.via != "" || !strings.Contains(remote, "/p2p-circuit")):
		res.fail("call: a direct connection through symmetric NAT (client: %q, B saw %q): the lab is not what it claims", res.via, remote)
	case !symmetric && !res.direct:
		res.fail("call not direct: client reports %q, B saw the call from %q; client stderr:\n%s", res.via, remote, natlabTail(r.stderr, 15))
	}

	name := fmt.Sprintf("natlab-%s-%02d.bin", tr.name, n)
	r = lab.run("peerA", 3*time.Minute, append([]string{"send", file, b.peerID, "--name", name, "--quiet",
		"--secret", natlabSecret, "--wait-direct", wait.String()}, common...)...)
	res.sendTook = r.took
	var out struct {
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	}
	stored := filepath.Join(b.dataDir, "files", name)
	got := natlabSHA(stored)
	res.sendOK = r.code == 0 && json.Unmarshal([]byte(r.stdout), &out) == nil && out.SHA256 == sum && out.Size == natlabFileSize && got == sum
	if !res.sendOK {
		res.fail("send: stored sha256 %q, want %q: %s", got, sum, r)
	}
	res.sendPath = "direct"
	if remote := natlabAudit(t, b, aID, "blob"); remote == "" {
		res.sendPath = "?"
	} else if strings.Contains(remote, "/p2p-circuit") {
		res.sendPath = "relay"
		if !symmetric {
			res.fail("send went through the relay (not an assertion: the call's direct connection is); client stderr:\n%s", natlabTail(r.stderr, 25))
		}
	}
	_ = os.Remove(stored)
	return res
}

// natlabIdentity creates the identity of a client data dir and returns its
// PeerID (without running `mcpv2 id`: a process start costs a second under
// -race).
func natlabIdentity(t *testing.T, dir string) string {
	t.Helper()
	key, err := transport.LoadOrCreateIdentity(identityPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

// natlabAudit returns the remote address of caller's last audit line for
// method on B, waiting a little for B to write it.
func natlabAudit(t *testing.T, b *natProc, caller, method string) string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		data, _ := os.ReadFile(filepath.Join(b.dataDir, "audit.jsonl"))
		remote := ""
		for _, line := range strings.Split(string(data), "\n") {
			var rec store.AuditRecord
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Caller == caller && rec.Method == method {
				remote = rec.Remote
			}
		}
		if remote != "" || time.Now().After(deadline) {
			return remote
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// natlabGiveUp: over symmetric NAT, a send allowed one attempt stops where
// the relay cuts the circuit, fails saying so, and leaves no visible file;
// sent again, it resumes and completes.
func natlabGiveUp(t *testing.T, lab *natLab, b *natProc, relayAddr, file, sum string) {
	t.Helper()
	aDir := t.TempDir()
	name := "natlab-limit.bin"
	args := []string{"send", file, b.peerID, "--name", name, "--secret", natlabSecret, "--data-dir", aDir,
		"--bootstrap", relayAddr, "--routable-cidr", natlabWAN, "--listen", natlabTransports[0].listen}
	r := lab.run("peerA", 2*time.Minute, append(args, "--attempts", "1")...)
	if r.code == 0 || !strings.Contains(r.stderr, "gave up") || !strings.Contains(r.stderr, "send again to resume") {
		t.Errorf("send with one attempt across a %d-byte relay limit: want a non-zero exit saying it gave up and how to resume: %s", natlabSymRelayData, r)
	}
	visible, parts := natlabFiles(t, b)
	if slices.Contains(visible, name) {
		t.Errorf("a partial %s is visible in B's files after the failed send: %v", name, visible)
	}
	t.Logf("symmetric, one attempt: exit %d, %q; B's files: visible %v, partial uploads kept %d",
		r.code, natlabLastLine(r.stderr), visible, len(parts))
	r = lab.run("peerA", 3*time.Minute, args...)
	got := natlabSHA(filepath.Join(b.dataDir, "files", name))
	if r.code != 0 || got != sum || !strings.Contains(r.stderr, "resuming at ") {
		t.Errorf("send again: want it to resume and store the file (sha256 %s), got %s: %s", sum, got, r)
	}
	t.Logf("symmetric, sent again: exit %d after %v, resumed: %v, sha256 match: %v",
		r.code, r.took.Round(time.Millisecond), strings.Contains(r.stderr, "resuming at "), got == sum)
	_ = os.Remove(filepath.Join(b.dataDir, "files", name))
}

// natlabFiles lists B's files directory: the visible names and the partial
// uploads (kept under a reserved hidden prefix).
func natlabFiles(t *testing.T, b *natProc) (visible, parts []string) {
	t.Helper()
	return filesIn(t, b.dataDir)
}

func natlabLastLine(s string) string {
	return natlabTail(s, 1)
}

// natlabRandomFile writes size random bytes to path and returns it with its
// hex sha256.
func natlabRandomFile(t *testing.T, path string, size int64) (string, string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		t.Fatal(err)
	}
	return path, hex.EncodeToString(h.Sum(nil))
}

// natlabSHA returns the hex sha256 of the file at path, "" when unreadable.
func natlabSHA(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

func natlabCount(trials []*natTrial) (found, calls, direct, sends int) {
	for _, tr := range trials {
		found += natlabB2I(tr.found)
		calls += natlabB2I(tr.callOK)
		direct += natlabB2I(tr.direct)
		sends += natlabB2I(tr.sendOK)
	}
	return
}

func natlabB2I(b bool) int {
	if b {
		return 1
	}
	return 0
}

// natlabSeconds formats the nearest-rank p-th percentile of sorted
// seconds with prec decimals, "-" for none.
func natlabSeconds(sorted []float64, p float64, prec int) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return fmt.Sprintf("%.*fs", prec, sorted[max(i, 0)])
}

// natlabReport logs the trials as a table and a summary line, and the
// problems of failed trials with B's log.
func natlabReport(t *testing.T, title string, trials []*natTrial, b *natProc) {
	t.Helper()
	var sb strings.Builder
	w := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "#\ttransport\tfound\tfind\tcall\tdirect\tto direct\tvia\tcall took\tsend+sha256\tsend path\tsend took")
	var ttd, sendS []float64
	var sendDirect int
	for _, tr := range trials {
		d := "-"
		if tr.direct {
			d = fmt.Sprintf("%.3fs", tr.toDirect)
			ttd = append(ttd, tr.toDirect)
		}
		if tr.sendOK {
			sendS = append(sendS, tr.sendTook.Seconds())
		}
		if tr.sendPath == "direct" && tr.sendOK {
			sendDirect++
		}
		via := tr.via
		if via == "" {
			via = "(relay)"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%.2fs\t%s\t%s\t%s\t%s\t%.2fs\t%s\t%s\t%.2fs\n", tr.n, tr.transport, natlabOK(tr.found), tr.findTook.Seconds(),
			natlabOK(tr.callOK), natlabYes(tr.direct), d, via, tr.callTook.Seconds(), natlabOK(tr.sendOK), tr.sendPath, tr.sendTook.Seconds())
	}
	w.Flush()
	slices.Sort(ttd)
	slices.Sort(sendS)
	found, calls, direct, sends := natlabCount(trials)
	n := len(trials)
	t.Logf("NAT lab, %s, %d trials:\n%s", title, n, sb.String())
	t.Logf("SUMMARY %s: found %d/%d, call %d/%d, direct %d/%d (%.0f%%), time to direct p50 %s p95 %s, send 64 MiB + sha256 %d/%d (direct %d), send took p50 %s p95 %s",
		title, found, n, calls, n, direct, n, 100*float64(direct)/float64(n), natlabSeconds(ttd, 50, 3), natlabSeconds(ttd, 95, 3),
		sends, n, sendDirect, natlabSeconds(sendS, 50, 2), natlabSeconds(sendS, 95, 2))
	failed := false
	for _, tr := range trials {
		for _, p := range tr.problems {
			t.Logf("trial %d (%s): %s", tr.n, tr.transport, p)
			failed = true
		}
	}
	if failed {
		t.Logf("B's log (last lines):\n%s", b.logTail(60))
	}
}

func natlabOK(b bool) string {
	if b {
		return "ok"
	}
	return "FAIL"
}

func natlabYes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
