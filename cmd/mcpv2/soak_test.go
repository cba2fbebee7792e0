//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/zeebo/blake3"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/protocol/translate"
	"github.com/mcpv2/mcpv2/transport"
)

// The soak run of issue 7 (acceptance 3; docs/soak.md), with the MCP and
// A2A clients of issue 18 (acceptance 2): one real `mcpv2 node` under
// mixed mesh, edge, gateway, blob, MCP and A2A traffic from 36 clients for
// MCPV2_SOAK (a duration), with faults injected: calls cut mid-flight,
// client hosts closed mid-call, `mcpv2 send` processes SIGKILLed mid-file,
// MCP sessions closed or abandoned mid-way, A2A event streams dropped and
// resumed, and the node itself SIGKILLed and restarted twice. It passes
// with 0 wrong answers, 0 lost committed files, 0 tasks or sessions seen
// by a caller that does not own them, RSS, open files and state.db flat
// after warm-up, and every error a clear JSON-RPC error. Without
// MCPV2_SOAK it skips; CI runs it for 90s (.ci/run).

const (
	soakEnv    = "MCPV2_SOAK"     // the run's length, e.g. 10m
	soakOutEnv = "MCPV2_SOAK_OUT" // keep the summary and samples in this directory
	soakSecret = "soak-shared-secret"

	soakMeshWorkers = 8
	soakEdgeWorkers = 8 // the odd ones also call through the gateway
	soakBlobWorkers = 4
	soakRate        = 20 // operations per second per mesh or edge worker

	soakCallTimeout = 30 * time.Second
	// soakGrace is how long after a restarted node's banner failures to
	// reach it are still put down to the restart (dial backoff, the
	// gateway's reconnection to the stable peer).
	soakGrace = 15 * time.Second
	// soakKeepFiles and soakKeepBlobs bound what one worker keeps stored;
	// beyond them it deletes its oldest file.
	soakKeepFiles = 12
	soakKeepBlobs = 2
	// soakBlobRate is each send's --limit-rate, so that a send lasts long
	// enough to be killed mid-way and the clients do not take both cores.
	soakBlobRate  = 8 << 20
	soakConvTurns = 20 // turns of one conversation before a worker starts another

	// Flatness: after warm-up, the largest sample of a lifetime's last third
	// may exceed the largest of its first third by soakFlatRatio plus the
	// slack.
	soakFlatRatio = 1.25
	soakRSSSlack  = 16 << 20
	soakFDSlack   = 16

	// The MCP and A2A clients (issue 18): even workers are anonymous
	// (GET /mcpv2/session, two of each face per source address), odd ones
	// secret holders.
	soakMCPWorkers = 8
	soakA2AWorkers = 8
	soakFaceRate   = 5 // operations per second per MCP or A2A worker
	// soakNapSkill is the node's custom command skill that sleeps 1.2 s and
	// answers its arguments: a task that runs long enough for its event
	// stream to be dropped and resumed.
	soakNapSkill = "soak_nap"
	// soakAnonRenew is how long an anonymous A2A worker keeps a session
	// (plus up to 20 s): then it takes a new one, a new owner, and its old
	// tasks must be another caller's to it.
	soakAnonRenew = 30 * time.Second

	// The node's caps on state.db's contents, low enough that a soak
	// reaches them within its first minute or two: then state.db must
	// stop growing. Its file (bbolt) grows sparsely, by doubling up to
	// 16 MiB, and never shrinks, so its size moves in steps too coarse to
	// judge; the bytes the file system holds for it are the pages bbolt
	// ever wrote. It is flat when, after warm-up, the largest of those of
	// the last third is at most soakDBRatio × the first third's +
	// soakDBSlack, and its size never exceeds soakDBMax.
	soakMaxTasksBytes    = 1 << 20
	soakMaxConversations = 64
	soakDBRatio          = 1.25
	soakDBSlack          = 1 << 20
	soakDBMax            = 64 << 20
)

// soakAnonIPs are the source addresses of the anonymous MCP and A2A
// workers: several anonymous sessions per address, each its own owner.
var soakAnonIPs = []string{"127.0.0.40", "127.0.0.41"}

// soakKnownCodes are the error codes of SPEC §2.
var soakKnownCodes = map[int]bool{-32700: true, -32600: true, -32601: true, -32602: true, -32603: true,
	-32001: true, -32002: true, -32003: true, -32004: true, -32005: true, -32006: true, -32007: true,
	-32008: true, -32009: true, -32010: true}

func TestSoak(t *testing.T) {
	v := os.Getenv(soakEnv)
	if v == "" {
		t.Skipf("the soak runs only with %s set: %s=10m go test -run TestSoak -timeout 30m -v ./cmd/mcpv2/ (CI runs 90s; docs/soak.md)", soakEnv, soakEnv)
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur < 30*time.Second {
		t.Fatalf("%s=%q: want a duration of at least 30s, like 10m", soakEnv, v)
	}
	s := newSoakRun(t, dur)
	s.run()
}

// --- the run

// soakRun is one soak run. Workers record into it from their goroutines;
// only the test's goroutine starts, kills and restarts processes.
type soakRun struct {
	t      *testing.T
	dur    time.Duration
	warm   time.Duration // samples this soon after a (re)start are not judged
	every  time.Duration // sampling interval
	secret []byte
	begin  time.Time
	out    string // where the summary and the samples are written

	dataDir  string   // the node under test
	nodeArgs []string // its flags, the same at every start
	nodeID   string
	meshAddr protocol.Address // its loopback TCP address with /p2p/
	meshText string
	edgeBase string // http://127.0.0.1:PORT
	bID      string // the stable peer behind the gateway
	bDataDir string
	corpus   []soakHistory // translate_history inputs

	mu       sync.Mutex // guards node, lives, bLife, windows
	node     *edgeProc
	lives    []*soakLife
	bLife    *soakLife
	windows  []soakWindow
	restarts []time.Duration // kill to banner
	db       []soakDBSample  // state.db's samples, guarded by mu

	ownMu    sync.Mutex                // guards mcpSess, a2aTasks, a2aNext
	mcpSess  map[string]soakSessionRef // by MCP worker: its stateful session now
	a2aTasks []soakTaskRef             // the A2A workers' recent tasks (a ring), for the cross-owner probes
	a2aNext  int

	ledger soakLedger
	stats  soakStats
}

// soakDBSample is one sample of state.db: its size, and the bytes the
// file system holds for it (bbolt grows the file sparsely, so these are
// the pages it ever wrote: its high-water mark).
type soakDBSample struct {
	at          time.Time
	size, alloc int64
}

// soakWindow is a span in which the node was down or just back: [from, to];
// to is zero while it is open.
type soakWindow struct{ from, to time.Time }

// soakLife is one lifetime of a node process, with its samples.
type soakLife struct {
	node    string // "A" (under test) or "B" (stable)
	n       int    // 1, 2, 3 for A
	pid     int
	start   time.Time
	samples []soakSample
}

type soakSample struct {
	at  time.Time
	rss int64 // bytes
	fds int
}

func newSoakRun(t *testing.T, dur time.Duration) *soakRun {
	s := &soakRun{t: t, dur: dur, secret: []byte(soakSecret), dataDir: t.TempDir(), bDataDir: t.TempDir()}
	s.warm = min(60*time.Second, dur/6)
	s.every = min(5*time.Second, max(time.Second, dur/120))
	s.ledger.files = map[string]*soakFile{}
	s.stats.calls = map[string]*soakCount{}
	s.stats.codes = map[int]int{}
	s.stats.lostSet = map[string]bool{}
	s.stats.probes = map[string]*soakProbe{}
	s.mcpSess = map[string]soakSessionRef{}
	s.out = os.Getenv(soakOutEnv)
	if s.out == "" {
		s.out = t.TempDir()
	} else if err := os.MkdirAll(s.out, 0o755); err != nil {
		t.Fatal(err)
	}
	s.corpus = soakCorpus(t)
	return s
}

func (s *soakRun) run() {
	t := s.t
	// B: the stable peer that the gateway forwards to.
	bp := startEdgeProc(t, "B", nil, "--data-dir", s.bDataDir, "--listen", "/ip4/127.0.0.1/tcp/0",
		"--listen", "/ip4/127.0.0.1/udp/0/quic-v1", "--secret", soakSecret, "--no-mdns", "--no-nat")
	s.bID = bp.first("MCPV2_PEER_ID")
	s.bLife = &soakLife{node: "B", n: 1, pid: bp.Cmd.Process.Pid, start: time.Now()}

	// A: the node under test, at fixed addresses so that it comes back where
	// it was, with the same identity (its data dir).
	// Its policy grants anonymous sessions the nap skill and translations
	// (list_files and the rest stay refused to them, -32009).
	port, p2p := edgeFreePort(t, "127.0.0.1"), soakFreeP2PPort(t)
	policy, skillsFile := filepath.Join(s.dataDir, "policy.json"), filepath.Join(s.dataDir, "custom_skills.json")
	if err := os.WriteFile(policy, []byte(`{"grants":{"http":["`+soakNapSkill+`","translate_history"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(skillsFile, []byte(`{"skills":[{"name":"`+soakNapSkill+`","description":"sleeps 1.2 s and answers its arguments",`+
		`"input_schema":{"type":"object","properties":{"payload":{"type":"string"}},"required":["payload"]},`+
		`"handler":{"type":"command","command":["/bin/sh","-c","sleep 1.2; cat"]}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s.nodeArgs = []string{"--data-dir", s.dataDir,
		"--listen", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", p2p), "--listen", fmt.Sprintf("/ip4/127.0.0.1/udp/%d/quic-v1", p2p),
		"--port", strconv.Itoa(port), "--bind-host", "127.0.0.1", "--secret", soakSecret,
		"--llm-mode", "--no-mdns", "--no-nat", "--bootstrap", bp.tcpAddr(t),
		"--policy", policy, "--skills", skillsFile, "--max-command-runs", "16",
		"--max-tasks-bytes", strconv.Itoa(soakMaxTasksBytes), "--max-conversations", strconv.Itoa(soakMaxConversations)}
	s.edgeBase = "http://127.0.0.1:" + strconv.Itoa(port)
	s.startNode()
	s.nodeID = s.node.first("MCPV2_PEER_ID")
	s.meshText = fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/%s", p2p, s.nodeID)
	addr, err := protocol.ParseAddress(s.meshText)
	if err != nil {
		t.Fatal(err)
	}
	s.meshAddr = addr
	tok, _ := protocol.MintToken(s.secret, "127.0.0.1", time.Now(), 10*time.Minute)
	edgeWaitGateway(t, edgeHTTPClient(t, "", nil), s.edgeBase, tok, s.bID)

	checker, err := newSoakMeshClient(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer checker.close()

	s.begin = time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	defer stopSampling()
	wg.Go(func() { s.sample(sampleCtx) })
	var workers sync.WaitGroup
	for i := range soakMeshWorkers {
		w, err := newSoakMeshWorker(s, i)
		if err != nil {
			t.Fatal(err)
		}
		workers.Go(func() { w.run(ctx) })
	}
	for i := range soakEdgeWorkers {
		w := newSoakEdgeWorker(s, i)
		workers.Go(func() { w.run(ctx) })
	}
	for i := range soakBlobWorkers {
		w, err := newSoakBlobWorker(s, i)
		if err != nil {
			t.Fatal(err)
		}
		workers.Go(func() { w.run(ctx) })
	}
	for i := range soakMCPWorkers {
		w := newSoakMCPWorker(s, i)
		workers.Go(func() { w.run(ctx) })
	}
	for i := range soakA2AWorkers {
		w := newSoakA2AWorker(s, i)
		workers.Go(func() { w.run(ctx) })
	}
	t.Logf("soak: %v of traffic from %d clients (%d mesh, %d edge, %d blob, %d MCP, %d A2A) against %s; restarts at %v and %v",
		s.dur, soakClients, soakMeshWorkers, soakEdgeWorkers, soakBlobWorkers, soakMCPWorkers, soakA2AWorkers,
		s.nodeID, s.dur/3, 2*s.dur/3)

	// The fault injector's node kills, from this goroutine.
	for i := 1; i <= 2; i++ {
		time.Sleep(time.Until(s.begin.Add(time.Duration(i) * s.dur / 3)))
		s.killAndRestart()
		s.checkStore(checker, fmt.Sprintf("after restart %d", i))
	}
	time.Sleep(time.Until(s.begin.Add(s.dur)))
	cancel()
	workers.Wait()
	stopSampling()
	wg.Wait()

	s.checkStore(checker, "at the end")
	s.checkDisk()
	s.report()
}

// startNode starts the node under test with its flags and opens a lifetime.
func (s *soakRun) startNode() {
	s.t.Helper()
	n := len(s.lives) + 1
	p := startEdgeProc(s.t, fmt.Sprintf("A#%d", n), nil, s.nodeArgs...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.node = p
	s.lives = append(s.lives, &soakLife{node: "A", n: n, pid: p.Cmd.Process.Pid, start: time.Now()})
}

// killAndRestart SIGKILLs the node under test and starts it again with the
// same flags; the span from the kill to soakGrace after the new banner is a
// fault window.
func (s *soakRun) killAndRestart() {
	s.mu.Lock()
	p := s.node
	killed := time.Now()
	s.windows = append(s.windows, soakWindow{from: killed})
	s.mu.Unlock()
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatalf("SIGKILL the node: %v", err)
	}
	select {
	case <-p.Exited:
	case <-time.After(10 * time.Second):
		s.t.Fatal("the node did not die within 10s of SIGKILL")
	}
	s.startNode()
	up := time.Now()
	s.mu.Lock()
	s.windows[len(s.windows)-1].to = up.Add(soakGrace)
	s.restarts = append(s.restarts, up.Sub(killed))
	s.mu.Unlock()
	s.t.Logf("soak: t=%v: node SIGKILLed and back in %v (pid %d)", killed.Sub(s.begin).Round(time.Second), up.Sub(killed).Round(time.Millisecond), s.node.Cmd.Process.Pid)
}

// inFault reports whether [from, to] meets a fault window.
func (s *soakRun) inFault(from, to time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.windows {
		if !to.Before(w.from) && (w.to.IsZero() || !from.After(w.to)) {
			return true
		}
	}
	return false
}

// soakFreeP2PPort returns a port free for TCP and UDP on 127.0.0.1.
func soakFreeP2PPort(t *testing.T) int {
	for range 50 {
		p := edgeFreePort(t, "127.0.0.1")
		if c, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			c.Close()
			return p
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return 0
}

// --- sampling

// sample records VmRSS and the open descriptors of both nodes every s.every.
func (s *soakRun) sample(ctx context.Context) {
	tk := time.NewTicker(s.every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		s.mu.Lock()
		lives := []*soakLife{s.bLife}
		if n := len(s.lives); n > 0 {
			lives = append(lives, s.lives[n-1])
		}
		s.mu.Unlock()
		for _, l := range lives {
			rss, fds, err := soakProcStats(l.pid)
			if err != nil {
				continue // killed a moment ago
			}
			s.mu.Lock()
			l.samples = append(l.samples, soakSample{at: time.Now(), rss: rss, fds: fds})
			s.mu.Unlock()
		}
		if fi, err := os.Stat(filepath.Join(s.dataDir, "state.db")); err == nil {
			x := soakDBSample{at: time.Now(), size: fi.Size(), alloc: fi.Size()}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				x.alloc = st.Blocks * 512
			}
			s.mu.Lock()
			s.db = append(s.db, x)
			s.mu.Unlock()
		}
	}
}

// soakProcStats reads a process's VmRSS and counts its open descriptors.
func soakProcStats(pid int) (rss int64, fds int, err error) {
	rss, err = testenv.ProcStatus(pid, "VmRSS")
	if err != nil {
		return 0, 0, err
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, err
	}
	return rss, len(ents), nil
}

// soakFlat judges one lifetime: its samples after warm-up, cut in thirds.
type soakFlat struct {
	n                       int
	rssMin, rssMax          int64
	fdMin, fdMax            int
	rssFirst, rssLast       int64 // the largest of the first and last third
	fdFirst, fdLast         int
	judged, rssFlat, fdFlat bool
}

func (s *soakRun) flatness(l *soakLife) soakFlat {
	var post []soakSample
	for _, x := range l.samples {
		if x.at.Sub(l.start) >= s.warm {
			post = append(post, x)
		}
	}
	f := soakFlat{n: len(post)}
	for i, x := range post {
		if i == 0 || x.rss < f.rssMin {
			f.rssMin = x.rss
		}
		if i == 0 || x.fds < f.fdMin {
			f.fdMin = x.fds
		}
		f.rssMax, f.fdMax = max(f.rssMax, x.rss), max(f.fdMax, x.fds)
	}
	if len(post) < 3 {
		return f
	}
	third := len(post) / 3
	for _, x := range post[:third] {
		f.rssFirst, f.fdFirst = max(f.rssFirst, x.rss), max(f.fdFirst, x.fds)
	}
	for _, x := range post[len(post)-third:] {
		f.rssLast, f.fdLast = max(f.rssLast, x.rss), max(f.fdLast, x.fds)
	}
	f.judged = true
	f.rssFlat = float64(f.rssLast) <= soakFlatRatio*float64(f.rssFirst)+soakRSSSlack
	f.fdFlat = float64(f.fdLast) <= soakFlatRatio*float64(f.fdFirst)+soakFDSlack
	return f
}

// --- counts and verdicts

type soakStats struct {
	mu          sync.Mutex
	calls       map[string]*soakCount // by face and kind
	codes       map[int]int
	wrong       soakList // answers that do not match their request
	unclear     soakList // errors that are not clear JSON-RPC errors
	unexpected  soakList // clear errors refusing a correct request outside fault windows (rate limits aside)
	unexplained soakList // transport failures outside fault windows, not caused by the injector
	lost        soakList // committed files missing or changed
	lostSet     map[string]bool
	faults      map[string]int        // injected client faults by kind
	owners      soakList              // a task or session seen by a caller that does not own it
	probes      map[string]*soakProbe // cross-owner probes by kind
	sends       int                   // completed blob sends
	resumed     int                   // of which resumed a killed send
	blobBytes   int64
}

type soakCount struct{ ok, rpcErr, cut, transport int }

// soakList counts items and keeps the first few.
type soakList struct {
	n     int
	first []string
}

func (l *soakList) add(msg string) {
	l.n++
	if len(l.first) < 20 {
		l.first = append(l.first, msg)
	}
}

func (s *soakRun) since() string { return time.Since(s.begin).Round(100 * time.Millisecond).String() }

func (s *soakRun) count(key string, f func(c *soakCount)) {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	c := s.stats.calls[key]
	if c == nil {
		c = &soakCount{}
		s.stats.calls[key] = c
	}
	f(c)
}

func (s *soakRun) record(l *soakList, format string, args ...any) {
	msg := fmt.Sprintf("t=%s: ", s.since()) + fmt.Sprintf(format, args...)
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	l.add(msg)
}

func (s *soakRun) fault(kind string) {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	if s.stats.faults == nil {
		s.stats.faults = map[string]int{}
	}
	s.stats.faults[kind]++
}

// lostFile records a committed file as lost, once.
func (s *soakRun) lostFile(name, why string) {
	s.stats.mu.Lock()
	seen := s.stats.lostSet[name]
	s.stats.lostSet[name] = true
	s.stats.mu.Unlock()
	if !seen {
		s.record(&s.stats.lost, "%s: %s", name, why)
	}
}

// rpcError judges a JSON-RPC error answered to a slot of kind sent at
// start: it must have a known code and a message; a code the slot allows,
// a rate limit, or any code during a fault window is expected.
func (s *soakRun) rpcError(key string, code *int, msg *string, start time.Time, allowed func(int) bool) {
	s.count(key, func(c *soakCount) { c.rpcErr++ })
	if code == nil || msg == nil || strings.TrimSpace(*msg) == "" || !soakKnownCodes[*code] {
		s.record(&s.stats.unclear, "%s: an error without a known code and a message: code %v, message %q", key, soakDeref(code), soakDeref(msg))
		return
	}
	s.stats.mu.Lock()
	s.stats.codes[*code]++
	s.stats.mu.Unlock()
	if *code == protocol.CodeRateLimited || (allowed != nil && allowed(*code)) || s.inFault(start, time.Now()) {
		return
	}
	s.record(&s.stats.unexpected, "%s: error %d: %s", key, *code, soakClip(*msg, 300))
}

// failed judges a request that got no answer: cut by the injector, or a
// transport failure (expected only in a fault window).
func (s *soakRun) failed(face string, slots []soakSlot, start time.Time, err error, cut bool) {
	inFault := !cut && s.inFault(start, time.Now())
	for _, sl := range slots {
		s.count(face+" "+sl.kind, func(c *soakCount) {
			if cut {
				c.cut++
			} else {
				c.transport++
			}
		})
		if sl.onFail != nil {
			sl.onFail()
		}
	}
	if !cut && !inFault {
		s.record(&s.stats.unexplained, "%s %s: %v", face, soakKinds(slots), soakClip(err.Error(), 300))
	}
}

func soakKinds(slots []soakSlot) string {
	var k []string
	for _, sl := range slots {
		k = append(k, sl.kind)
	}
	return strings.Join(k, "+")
}

func soakDeref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func soakClip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// --- the ledger of files

// soakFile is one file name a worker used. Names are unique to one content,
// so a listed file must have its sha256 whatever its state.
type soakFile struct {
	owner       string
	sha         string
	size        int64
	committedAt time.Time // the node acknowledged it (upload_file result, completed send)
	deletingAt  time.Time // a delete was sent (first time)
	deletedAt   time.Time // a delete was acknowledged
}

type soakLedger struct {
	mu    sync.Mutex
	files map[string]*soakFile
}

func (l *soakLedger) add(name, owner, sha string, size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.files[name] = &soakFile{owner: owner, sha: sha, size: size}
}

func (l *soakLedger) commit(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.files[name]; f != nil && f.committedAt.IsZero() {
		f.committedAt = time.Now()
	}
}

// deleting marks name as being deleted and returns its state before.
func (l *soakLedger) deleting(name string) soakFile {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.files[name]
	before := *f
	if f.deletingAt.IsZero() {
		f.deletingAt = time.Now()
	}
	return before
}

func (l *soakLedger) deleted(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.files[name]; f.deletedAt.IsZero() {
		f.deletedAt = time.Now()
	}
}

type soakListed struct {
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

// checkListing checks a list_files answer to a call made at asked: every
// listed soak file is known, has its sha256 and size, and was not deleted
// before asked; every file committed before asked, and not being deleted
// by now, is listed.
func (s *soakRun) checkListing(who string, files []soakListed, asked time.Time) error {
	s.ledger.mu.Lock()
	listed := map[string]bool{}
	var wrong []string
	lost := map[string]string{} // name: why
	for _, f := range files {
		listed[f.Filename] = true
		if !strings.HasPrefix(f.Filename, "soak-") {
			wrong = append(wrong, fmt.Sprintf("a file no client stored: %q", f.Filename))
			continue
		}
		k := s.ledger.files[f.Filename]
		switch {
		case k == nil:
			wrong = append(wrong, fmt.Sprintf("a file no client stored: %q", f.Filename))
		case f.SHA256 != k.sha || f.Size != k.size:
			wrong = append(wrong, fmt.Sprintf("%s listed with %d bytes, sha256 %s; %s stored %d bytes, sha256 %s", f.Filename, f.Size, f.SHA256, k.owner, k.size, k.sha))
			if !k.committedAt.IsZero() {
				lost[f.Filename] = fmt.Sprintf("committed, listed by %s with sha256 %s", who, f.SHA256)
			}
		case !k.deletedAt.IsZero() && k.deletedAt.Before(asked):
			wrong = append(wrong, fmt.Sprintf("%s listed, though its deletion was acknowledged %v before", f.Filename, asked.Sub(k.deletedAt).Round(time.Millisecond)))
		}
	}
	for name, k := range s.ledger.files {
		if !k.committedAt.IsZero() && k.committedAt.Before(asked) && k.deletingAt.IsZero() && !listed[name] {
			lost[name] = "committed, not listed by " + who
		}
	}
	s.ledger.mu.Unlock()
	for name, why := range lost {
		s.lostFile(name, why)
	}
	if len(wrong) > 0 {
		return fmt.Errorf("list_files: %s", strings.Join(wrong, "; "))
	}
	return nil
}

// checkStore lists the node's files with the checker's client (retrying
// while the node comes back) and checks them against the ledger.
func (s *soakRun) checkStore(c *soakMeshClient, when string) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		asked := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), soakCallTimeout)
		sl := s.listSlot(1, "checker")
		var listErr error
		sl.check = func(res json.RawMessage) error {
			var r struct {
				Files []soakListed `json:"files"`
			}
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			listErr = s.checkListing("the checker "+when, r.Files, asked)
			s.t.Logf("soak: t=%s: %s: %d files listed", s.since(), when, len(r.Files))
			return listErr
		}
		body, err := c.send(ctx, []soakSlot{sl}, false)
		cancel()
		if err != nil {
			if time.Now().After(deadline) {
				s.t.Errorf("soak: %s: list_files failed for 60s: %v", when, err)
				return
			}
			c.clearBackoff()
			time.Sleep(250 * time.Millisecond)
			continue
		}
		s.verify("checker", []soakSlot{sl}, false, body, asked)
		return
	}
}

// checkDisk reads every committed, undeleted file from the node's files
// directory and compares its sha256 with the ledger's; and counts the
// partial uploads left.
func (s *soakRun) checkDisk() {
	s.ledger.mu.Lock()
	var names []string
	want := map[string]string{}
	for name, k := range s.ledger.files {
		if !k.committedAt.IsZero() && k.deletingAt.IsZero() {
			names = append(names, name)
			want[name] = k.sha
		}
	}
	s.ledger.mu.Unlock()
	dir := filepath.Join(s.dataDir, "files")
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			s.lostFile(name, fmt.Sprintf("on disk at the end: %v", err))
			continue
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want[name] {
			s.lostFile(name, fmt.Sprintf("on disk at the end with sha256 %x, committed as %s", got, want[name]))
		}
	}
	s.t.Logf("soak: %d committed files checked on disk", len(names))
}

// --- slots and answers

// soakSlot is one slot of a request, with what a correct answer is.
type soakSlot struct {
	kind  string // for the counts: ping, upload_file, …
	id    any    // nil: a notification
	skill string
	args  any
	// check says why a result does not match the request (nil: any result).
	check func(res json.RawMessage) error
	// allowed are error codes that are a correct answer to this slot.
	allowed func(code int) bool
	// onErr runs on an error answer; onFail when no answer came.
	onErr  func(code int)
	onFail func()
}

// soakEncode encodes slots as one request; session, when set, goes into
// every slot's context (the mesh session of SPEC §6).
func soakEncode(slots []soakSlot, batch bool, session string) []byte {
	var out []any
	for _, sl := range slots {
		args, _ := json.Marshal(sl.args)
		m := map[string]any{"jsonrpc": "2.0", "method": "tools/call", "params": map[string]any{"name": sl.skill, "arguments": json.RawMessage(args)}}
		if sl.id != nil {
			m["id"] = sl.id
		}
		if session != "" {
			m["context"] = map[string]any{"session": session}
		}
		out = append(out, m)
	}
	var b []byte
	if batch {
		b, _ = json.Marshal(out)
	} else {
		b, _ = json.Marshal(out[0])
	}
	return b
}

type soakResp struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *soakErrObj     `json:"error"`
}

type soakErrObj struct {
	Code    *int    `json:"code"`
	Message *string `json:"message"`
}

// verify checks the answer body (empty: none) to slots sent at start on face.
func (s *soakRun) verify(face string, slots []soakSlot, batch bool, body []byte, start time.Time) {
	var withID []soakSlot
	for _, sl := range slots {
		if sl.id != nil {
			withID = append(withID, sl)
		} else {
			s.count(face+" "+sl.kind+" (notification)", func(c *soakCount) { c.ok++ })
		}
	}
	body = bytes.TrimSpace(body)
	if len(withID) == 0 {
		if len(body) != 0 {
			s.record(&s.stats.wrong, "%s: an answer to a notification-only request: %s", face, soakClip(string(body), 300))
		}
		return
	}
	if len(body) == 0 {
		s.record(&s.stats.wrong, "%s: no answer to %d slots with ids (%s)", face, len(withID), soakKinds(withID))
		return
	}
	if body[0] == '{' {
		var r soakResp
		if err := json.Unmarshal(body, &r); err != nil {
			s.record(&s.stats.unclear, "%s: an answer that is not a JSON-RPC response: %s", face, soakClip(string(body), 300))
			return
		}
		if r.Error != nil && string(r.ID) == "null" {
			// The request refused as a whole.
			for _, sl := range withID {
				s.rpcError(face+" "+sl.kind, r.Error.Code, r.Error.Message, start, sl.allowed)
				if sl.onErr != nil && r.Error.Code != nil {
					sl.onErr(*r.Error.Code)
				}
			}
			return
		}
		if batch {
			s.record(&s.stats.wrong, "%s: one response object to a batch of %d: %s", face, len(slots), soakClip(string(body), 300))
			return
		}
		s.checkOne(face, withID[0], r, start)
		return
	}
	var rs []soakResp
	if err := json.Unmarshal(body, &rs); err != nil || !batch {
		s.record(&s.stats.wrong, "%s: an answer of the wrong shape to a %s: %s", face, map[bool]string{true: "batch", false: "single slot"}[batch], soakClip(string(body), 300))
		return
	}
	if len(rs) != len(withID) {
		s.record(&s.stats.wrong, "%s: %d responses to %d slots with ids (%s): %s", face, len(rs), len(withID), soakKinds(withID), soakClip(string(body), 300))
		return
	}
	for i, r := range rs {
		s.checkOne(face, withID[i], r, start)
	}
}

func (s *soakRun) checkOne(face string, sl soakSlot, r soakResp, start time.Time) {
	key := face + " " + sl.kind
	wantID, _ := json.Marshal(sl.id)
	if r.JSONRPC == nil || *r.JSONRPC != "2.0" {
		s.record(&s.stats.unclear, "%s: a response without jsonrpc 2.0 (id %s)", key, r.ID)
	}
	if !edgeJSONEqual(r.ID, wantID) {
		s.record(&s.stats.wrong, "%s: the response to id %s came with id %s", key, wantID, r.ID)
		return
	}
	switch {
	case r.Error != nil && r.Result == nil:
		s.rpcError(key, r.Error.Code, r.Error.Message, start, sl.allowed)
		if sl.onErr != nil && r.Error.Code != nil {
			sl.onErr(*r.Error.Code)
		}
	case r.Error == nil && r.Result != nil:
		if sl.check != nil {
			if err := sl.check(r.Result); err != nil {
				s.record(&s.stats.wrong, "%s (id %s): %v", key, wantID, err)
				return
			}
		}
		s.count(key, func(c *soakCount) { c.ok++ })
	default:
		s.record(&s.stats.unclear, "%s: want exactly one of result and error (id %s)", key, wantID)
	}
}

// pingSlot pings with a payload that must come back, from peer want.
func (s *soakRun) pingSlot(id any, rng *mrand.Rand, tag, want string) soakSlot {
	payload := fmt.Sprintf("%s-%016x-olá", tag, rng.Uint64())
	return soakSlot{kind: "ping", id: id, skill: "ping", args: map[string]any{"payload": payload},
		check: func(res json.RawMessage) error {
			var r struct {
				Pong    bool   `json:"pong"`
				PeerID  string `json:"peer_id"`
				Payload any    `json:"payload"`
			}
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			if !r.Pong || r.PeerID != want || r.Payload != payload {
				return fmt.Errorf("ping with payload %q answered pong %v from %s with payload %v (want from %s)", payload, r.Pong, r.PeerID, r.Payload, want)
			}
			return nil
		}}
}

// soakHistory is a translate_history input.
type soakHistory struct {
	from    string
	history json.RawMessage
}

// soakCorpus is the translator's golden inputs (every feature of every
// format), read once.
func soakCorpus(t *testing.T) []soakHistory {
	var out []soakHistory
	dirs, err := filepath.Glob(filepath.Join("..", "..", "protocol", "translate", "testdata", "golden", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no translate golden cases: %v", err)
	}
	for _, d := range dirs {
		for _, p := range translate.Providers() {
			b, err := os.ReadFile(filepath.Join(d, p+".json"))
			if err == nil && json.Valid(b) {
				out = append(out, soakHistory{from: p, history: b})
			}
		}
	}
	return out
}

// translateSlot translates a history (a golden case, or a fresh text-only
// one) to another provider; the answer must be what the translator package
// gives here.
func (s *soakRun) translateSlot(id any, rng *mrand.Rand, tag string) soakSlot {
	provs := translate.Providers()
	for {
		var h soakHistory
		if rng.IntN(2) == 0 {
			h = s.corpus[rng.IntN(len(s.corpus))]
		} else {
			msg := []map[string]string{
				{"role": "system", "content": "Answer briefly, " + tag + "."},
				{"role": "user", "content": fmt.Sprintf("What is %d plus %d? (%s %x)", rng.IntN(100), rng.IntN(100), tag, rng.Uint64())},
				{"role": "assistant", "content": fmt.Sprintf("It is %x.", rng.Uint32())},
				{"role": "user", "content": "Thanks, " + tag + "!"},
			}
			b, _ := json.Marshal(msg)
			h = soakHistory{from: "openai", history: b}
		}
		to := provs[rng.IntN(len(provs))]
		want, err := translate.Translate(h.history, h.from, to)
		if err != nil {
			continue
		}
		return soakSlot{kind: "translate_history", id: id, skill: "translate_history",
			args: map[string]any{"history": h.history, "from": h.from, "to": to},
			check: func(res json.RawMessage) error {
				var r struct {
					History json.RawMessage `json:"history"`
					From    string          `json:"from"`
					To      string          `json:"to"`
				}
				if err := json.Unmarshal(res, &r); err != nil {
					return err
				}
				if r.From != h.from || r.To != to || !edgeJSONEqual(r.History, want) {
					return fmt.Errorf("translate %s→%s of %s: got %s→%s %s, want %s", h.from, to, soakClip(string(h.history), 120), r.From, r.To, soakClip(string(r.History), 200), soakClip(string(want), 200))
				}
				return nil
			}}
	}
}

// listSlot lists the node's files and checks the list against the ledger.
func (s *soakRun) listSlot(id any, who string) soakSlot {
	asked := time.Now()
	return soakSlot{kind: "list_files", id: id, skill: "list_files", args: map[string]any{},
		check: func(res json.RawMessage) error {
			var r struct {
				Files []soakListed `json:"files"`
			}
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			return s.checkListing(who, r.Files, asked)
		}}
}

// soakOwned is a file a mesh or edge worker stored (or may have stored).
type soakOwned struct {
	name  string
	stats edgeStats
}

// uploadSlot stores a fresh file of owner under a unique name.
func (s *soakRun) uploadSlot(id any, rng *mrand.Rand, owner string, seq int, own *[]soakOwned) soakSlot {
	name := fmt.Sprintf("soak-%s-%06d.txt", owner, seq)
	n := 512 + rng.IntN(48<<10)
	var content []byte
	args := map[string]any{"filename": name}
	if rng.IntN(2) == 0 {
		content = edgeText(n, rng.Uint64(), true)
		args["content"] = string(content)
	} else {
		content = make([]byte, n)
		for i := range content {
			content[i] = byte(rng.Uint32())
		}
		args["content"], args["encoding"] = base64.StdEncoding.EncodeToString(content), "base64"
	}
	sum := sha256.Sum256(content)
	sha := hex.EncodeToString(sum[:])
	s.ledger.add(name, owner, sha, int64(n))
	*own = append(*own, soakOwned{name: name, stats: edgeStatsOf(content)})
	return soakSlot{kind: "upload_file", id: id, skill: "upload_file", args: args,
		check: func(res json.RawMessage) error {
			var r soakListed
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			if r != (soakListed{name, int64(n), sha}) {
				return fmt.Errorf("upload of %s (%d bytes, sha256 %s) answered %+v", name, n, sha, r)
			}
			s.ledger.commit(name)
			return nil
		}}
}

// processSlot runs process_instructions over a committed file of the
// worker's; its stats must be the file's.
func (s *soakRun) processSlot(id any, f soakOwned) soakSlot {
	return soakSlot{kind: "process_instructions", id: id, skill: "process_instructions",
		args: map[string]any{"filename": f.name, "instructions": "count the words"},
		check: func(res json.RawMessage) error {
			var r struct {
				Filename string    `json:"filename"`
				Stats    edgeStats `json:"stats"`
			}
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			if r.Filename != f.name || r.Stats != f.stats {
				return fmt.Errorf("process_instructions of %s (stats %+v) answered %s with %+v", f.name, f.stats, r.Filename, r.Stats)
			}
			return nil
		}}
}

// deleteSlot deletes a file of the worker's. A file that is gone is a
// correct answer only if it was never acknowledged or a delete was sent
// before; otherwise a committed file was lost.
func (s *soakRun) deleteSlot(id any, name string) soakSlot {
	before := s.ledger.deleting(name)
	return soakSlot{kind: "delete_file", id: id, skill: "delete_file", args: map[string]any{"filename": name},
		check: func(res json.RawMessage) error {
			var r struct {
				Filename string `json:"filename"`
				Deleted  bool   `json:"deleted"`
			}
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			if r.Filename != name || !r.Deleted {
				return fmt.Errorf("delete of %s answered %+v", name, r)
			}
			s.ledger.deleted(name)
			return nil
		},
		allowed: func(code int) bool { return code == protocol.CodeFileNotFound },
		onErr: func(code int) {
			if code != protocol.CodeFileNotFound {
				return
			}
			if !before.committedAt.IsZero() && before.deletingAt.IsZero() {
				s.lostFile(name, "delete_file answered file not found")
			}
			s.ledger.deleted(name)
		}}
}

// soakConv is a worker's conversation with ask (LLM mode): turns count up
// by one per acknowledged ask; the first turn tells a code word that later
// questions must get back.
type soakConv struct {
	id    string
	word  string
	turns int // acknowledged turns
	slack int // asks that got no clear answer and may yet be stored (a cut call can land late)
	n     int // conversations so far
}

func (c *soakConv) next(owner string, rng *mrand.Rand) {
	c.n++
	c.id = fmt.Sprintf("soak-%s-conv-%d-%x", owner, c.n, rng.Uint32())
	c.word = fmt.Sprintf("zq%08x", rng.Uint32())
	c.turns, c.slack = 0, 0
}

func (s *soakRun) askSlot(id any, rng *mrand.Rand, owner string, c *soakConv) soakSlot {
	// A conversation whose first turn may not have been stored may lack
	// its code word: start another.
	if c.id == "" || c.turns >= soakConvTurns || (c.turns == 0 && c.slack > 0) {
		c.next(owner, rng)
	}
	var query string
	question := false
	switch {
	case c.turns == 0 && c.slack == 0:
		query = "My code word is " + c.word + "."
	case c.turns > 0 && rng.IntN(2) == 0:
		query, question = "What was my code word?", true
	default:
		query = fmt.Sprintf("Note %d: the weather is %s today.", c.turns+c.slack+1, []string{"fine", "grey", "windy", "warm"}[rng.IntN(4)])
	}
	lo, hi := c.turns+1, c.turns+1+c.slack
	return soakSlot{kind: "ask", id: id, skill: "ask", args: map[string]any{"query": query, "conversation_id": c.id},
		check: func(res json.RawMessage) error {
			var r edgeAskResult
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			// A cut ask may still be running on the node and land after
			// this one: an answer uses up only the slack its turn shows.
			seen := r.Turn - c.turns - 1
			c.turns, c.slack = r.Turn, max(0, c.slack-seen)
			switch {
			case r.ConversationID != c.id || r.Provider != "local":
				return fmt.Errorf("ask in conversation %s answered for conversation %q by %q", c.id, r.ConversationID, r.Provider)
			case r.Turn < lo || r.Turn > hi:
				return fmt.Errorf("ask in conversation %s: turn %d, want %d..%d", c.id, r.Turn, lo, hi)
			case question && !strings.Contains(r.Response, c.word):
				return fmt.Errorf("ask in conversation %s: %q answered without the code word %s: %q", c.id, query, c.word, soakClip(r.Response, 200))
			}
			return nil
		},
		onErr:  func(int) { c.slack++ },
		onFail: func() { c.slack++ }}
}

// --- mesh clients

// soakMeshClient is an in-test libp2p host with a node.Client that calls
// the node under test with mesh sessions minted with the secret.
type soakMeshClient struct {
	s   *soakRun
	key crypto.PrivKey
	h   host.Host
	c   *node.Client
}

func newSoakMeshClient(s *soakRun, key crypto.PrivKey) (*soakMeshClient, error) {
	if key == nil {
		var err error
		if key, _, err = crypto.GenerateEd25519Key(cryptorand.Reader); err != nil {
			return nil, err
		}
	}
	h, err := transport.NewHost(transport.WithIdentity(key), transport.WithListenAddrs())
	if err != nil {
		return nil, err
	}
	c, err := node.NewClient(h, node.WithSecret(s.secret))
	if err != nil {
		return nil, errors.Join(err, h.Close())
	}
	return &soakMeshClient{s: s, key: key, h: h, c: c}, nil
}

func (m *soakMeshClient) close() {
	m.c.Close()
	_ = m.h.Close()
}

// send sends slots as one request and returns the raw answer.
func (m *soakMeshClient) send(ctx context.Context, slots []soakSlot, batch bool) ([]byte, error) {
	pid, err := m.c.Connect(ctx, m.s.meshAddr)
	if err != nil {
		return nil, err
	}
	tok := protocol.MintMeshToken(m.s.secret, m.h.ID().String(), pid.String(), protocol.PurposeRPC, time.Now(), 5*time.Minute)
	want := false
	for _, sl := range slots {
		want = want || sl.id != nil
	}
	return m.c.Send(ctx, pid, soakEncode(slots, batch, tok), want)
}

// clearBackoff forgets failed dials to the node, so that the next call
// dials at once (the node may be back).
func (m *soakMeshClient) clearBackoff() {
	pid, err := peer.Decode(m.s.nodeID)
	if err != nil {
		return
	}
	if sw, ok := m.h.Network().(*swarm.Swarm); ok {
		sw.Backoff().Clear(pid)
	}
}

// soakMeshWorker is a mesh client: pings, batches, uploads, lists,
// process_instructions, asks and translations. Now and then a call is cut
// after a few milliseconds, or its whole host is closed mid-call and a new
// one started with the same identity (a client killed mid-call).
type soakMeshWorker struct {
	s    *soakRun
	name string
	rng  *mrand.Rand
	m    *soakMeshClient
	seq  int
	own  []soakOwned
	conv soakConv
}

func newSoakMeshWorker(s *soakRun, i int) (*soakMeshWorker, error) {
	m, err := newSoakMeshClient(s, nil)
	if err != nil {
		return nil, err
	}
	return &soakMeshWorker{s: s, name: fmt.Sprintf("m%02d", i), rng: mrand.New(mrand.NewPCG(uint64(i), 1)), m: m}, nil
}

func (w *soakMeshWorker) run(ctx context.Context) {
	defer func() { w.m.close() }()
	tk := time.NewTicker(time.Second / soakRate)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		slots, batch := w.pick()
		w.do(ctx, slots, batch)
	}
}

// nextID returns a fresh id, a number or a string.
func soakNextID(rng *mrand.Rand, name string, seq *int) any {
	*seq++
	if rng.IntN(2) == 0 {
		return *seq
	}
	return fmt.Sprintf("%s-%d", name, *seq)
}

// soakPick chooses one operation of a mesh or edge worker against the node
// at want: slots and whether they go as a batch.
func soakPick(s *soakRun, rng *mrand.Rand, name string, seq *int, own *[]soakOwned, conv *soakConv, want string) ([]soakSlot, bool) {
	id := func() any { return soakNextID(rng, name, seq) }
	if len(*own) > soakKeepFiles {
		f := (*own)[0]
		*own = (*own)[1:]
		return []soakSlot{s.deleteSlot(id(), f.name)}, false
	}
	switch r := rng.IntN(100); {
	case r < 30:
		return []soakSlot{s.pingSlot(id(), rng, name, want)}, false
	case r < 45:
		return soakBatch(s, rng, name, seq, want), true
	case r < 48:
		var slots []soakSlot
		for range 1 + rng.IntN(3) {
			slots = append(slots, s.pingSlot(nil, rng, name, want))
		}
		return slots, true
	case r < 60:
		*seq++
		return []soakSlot{s.uploadSlot(id(), rng, name, *seq, own)}, false
	case r < 64:
		return []soakSlot{s.listSlot(id(), name)}, false
	case r < 70:
		// The oldest file still held that was acknowledged.
		s.ledger.mu.Lock()
		var f *soakOwned
		for i := range *own {
			if k := s.ledger.files[(*own)[i].name]; !k.committedAt.IsZero() && k.deletingAt.IsZero() {
				f = &(*own)[i]
				break
			}
		}
		s.ledger.mu.Unlock()
		if f != nil {
			return []soakSlot{s.processSlot(id(), *f)}, false
		}
		return []soakSlot{s.pingSlot(id(), rng, name, want)}, false
	case r < 85:
		return []soakSlot{s.askSlot(id(), rng, name, conv)}, false
	default:
		return []soakSlot{s.translateSlot(id(), rng, name)}, false
	}
}

// soakBatch is 2–7 slots with distinct ids (pings and translations) and
// sometimes a notification among them.
func soakBatch(s *soakRun, rng *mrand.Rand, name string, seq *int, want string) []soakSlot {
	var slots []soakSlot
	for range 2 + rng.IntN(5) {
		if rng.IntN(3) == 0 {
			slots = append(slots, s.translateSlot(soakNextID(rng, name, seq), rng, name))
		} else {
			slots = append(slots, s.pingSlot(soakNextID(rng, name, seq), rng, name, want))
		}
	}
	if rng.IntN(2) == 0 {
		slots = slices.Insert(slots, rng.IntN(len(slots)+1), s.pingSlot(nil, rng, name, want))
	}
	return slots
}

func (w *soakMeshWorker) pick() ([]soakSlot, bool) {
	return soakPick(w.s, w.rng, w.name, &w.seq, &w.own, &w.conv, w.s.nodeID)
}

// do sends one request; one in 25 is cut after 1–30 ms, and one in 30 s of
// requests closes the client's whole host mid-call.
func (w *soakMeshWorker) do(ctx context.Context, slots []soakSlot, batch bool) {
	start := time.Now()
	timeout, cut := soakCallTimeout, false
	killHost := w.rng.IntN(soakRate*30) == 0
	if !killHost && w.rng.IntN(25) == 0 {
		timeout, cut = time.Duration(1+w.rng.IntN(30))*time.Millisecond, true
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body []byte
	var err error
	if !killHost {
		body, err = w.m.send(cctx, slots, batch)
	} else {
		done := make(chan struct{})
		go func() {
			defer close(done)
			body, err = w.m.send(cctx, slots, batch)
		}()
		time.Sleep(time.Duration(w.rng.IntN(20)) * time.Millisecond)
		w.m.close()
		<-done
		w.s.fault("mesh client host closed mid-call")
		m, nerr := newSoakMeshClient(w.s, w.m.key)
		if nerr != nil {
			w.s.record(&w.s.stats.unexplained, "%s: a new host: %v", w.name, nerr)
			return
		}
		w.m = m
		cut = true
	}
	if err == nil && ctx.Err() == nil {
		w.s.verify("mesh", slots, batch, body, start)
		return
	}
	if ctx.Err() != nil {
		cut = true // the run ended
	} else if cut && soakPast(cctx, start, timeout) {
		w.s.fault("mesh call cut mid-flight")
	} else if killHost {
		cut = true
	} else {
		cut = false
	}
	w.s.failed("mesh", slots, start, err, cut)
	if !cut {
		w.m.clearBackoff()
		time.Sleep(100 * time.Millisecond)
	}
}

// soakPast reports whether a call's short deadline has passed: the stream
// or connection deadline may fire a moment before the context's timer.
func soakPast(ctx context.Context, start time.Time, timeout time.Duration) bool {
	return ctx.Err() != nil || !time.Now().Before(start.Add(timeout))
}

// --- edge clients

// soakEdgeWorker is an HTTP client of the edge, from its own loopback
// address, with a token minted with the secret: single slots, batches,
// notification-only batches, uploads, lists, asks, translations; the odd
// workers also send batches through the gateway to the stable peer.
type soakEdgeWorker struct {
	s       *soakRun
	name    string
	ip      string
	gateway bool
	rng     *mrand.Rand
	tr      *http.Transport
	c       *http.Client
	tok     string
	tokAt   time.Time
	seq     int
	own     []soakOwned
	conv    soakConv
}

func newSoakEdgeWorker(s *soakRun, i int) *soakEdgeWorker {
	ip := fmt.Sprintf("127.0.0.%d", 20+i)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second, DisableCompression: true,
	}
	return &soakEdgeWorker{s: s, name: fmt.Sprintf("e%02d", i), ip: ip, gateway: i%2 == 1,
		rng: mrand.New(mrand.NewPCG(uint64(i), 2)), tr: tr, c: &http.Client{Transport: tr}}
}

func (w *soakEdgeWorker) run(ctx context.Context) {
	defer w.tr.CloseIdleConnections()
	tk := time.NewTicker(time.Second / soakRate)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		if time.Since(w.tokAt) > time.Minute {
			w.tok, _ = protocol.MintToken(w.s.secret, w.ip, time.Now(), 5*time.Minute)
			w.tokAt = time.Now()
		}
		if w.gateway && w.rng.IntN(10) < 3 {
			var slots []soakSlot
			if w.rng.IntN(5) == 0 {
				for range 1 + w.rng.IntN(3) {
					slots = append(slots, w.s.pingSlot(nil, w.rng, w.name, w.s.bID))
				}
			} else {
				slots = soakBatch(w.s, w.rng, w.name, &w.seq, w.s.bID)
			}
			w.do(ctx, "gateway", "/mcpv2/peers/"+w.s.bID, slots, true)
			continue
		}
		slots, batch := soakPick(w.s, w.rng, w.name, &w.seq, &w.own, &w.conv, w.s.nodeID)
		w.do(ctx, "edge", "/mcpv2", slots, batch)
	}
}

// do posts one request; one in 25 is cut after 1–30 ms (the connection is
// closed mid-call). A status other than 200 and 204 must carry a JSON-RPC
// error object.
func (w *soakEdgeWorker) do(ctx context.Context, face, path string, slots []soakSlot, batch bool) {
	start := time.Now()
	timeout, cut := soakCallTimeout, false
	if w.rng.IntN(25) == 0 {
		timeout, cut = time.Duration(1+w.rng.IntN(30))*time.Millisecond, true
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	status, body, err := w.post(cctx, path, soakEncode(slots, batch, ""))
	if err != nil {
		switch {
		case ctx.Err() != nil:
			cut = true
		case cut && soakPast(cctx, start, timeout):
			w.s.fault(face + " call cut mid-flight")
		default:
			cut = false
		}
		w.s.failed(face, slots, start, err, cut)
		if !cut {
			time.Sleep(100 * time.Millisecond)
		}
		return
	}
	switch status {
	case http.StatusOK:
		w.s.verify(face, slots, batch, body, start)
	case http.StatusNoContent:
		w.s.verify(face, slots, batch, nil, start)
	default:
		var r soakResp
		if json.Unmarshal(body, &r) != nil || r.Error == nil || r.Result != nil {
			w.s.record(&w.s.stats.unclear, "%s %s: HTTP %d without a JSON-RPC error: %s", face, soakKinds(slots), status, soakClip(string(body), 300))
			return
		}
		for i, sl := range slots {
			if sl.id == nil {
				if i == len(slots)-1 && !slices.ContainsFunc(slots, func(x soakSlot) bool { return x.id != nil }) {
					w.s.rpcError(face+" "+sl.kind+" (notification)", r.Error.Code, r.Error.Message, start, nil)
				}
				continue
			}
			w.s.rpcError(face+" "+sl.kind, r.Error.Code, r.Error.Message, start, sl.allowed)
			if sl.onErr != nil && r.Error.Code != nil {
				sl.onErr(*r.Error.Code)
			}
		}
	}
}

func (w *soakEdgeWorker) post(ctx context.Context, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.s.edgeBase+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-MCPV2-Session", w.tok)
	resp, err := w.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// --- blob clients

// soakBlobWorker sends 1–16 MiB files with real `mcpv2 send` processes; one
// send in three is SIGKILLed mid-way and sent again to completion (it
// resumes). It keeps its last soakKeepBlobs files and deletes older ones
// over the mesh.
type soakBlobWorker struct {
	s       *soakRun
	name    string
	rng     *mrand.Rand
	dir     string // its identity for send, and its files
	m       *soakMeshClient
	seq, id int
	own     []soakOwned
}

func newSoakBlobWorker(s *soakRun, i int) (*soakBlobWorker, error) {
	m, err := newSoakMeshClient(s, nil)
	if err != nil {
		return nil, err
	}
	return &soakBlobWorker{s: s, name: fmt.Sprintf("b%02d", i), rng: mrand.New(mrand.NewPCG(uint64(i), 3)), dir: s.t.TempDir(), m: m}, nil
}

var soakSendErrRE = regexp.MustCompile(`mcpv2: error (-?\d+): (.*)`)

func (w *soakBlobWorker) run(ctx context.Context) {
	defer w.m.close()
	for ctx.Err() == nil {
		if len(w.own) > soakKeepBlobs {
			f := w.own[0]
			w.own = w.own[1:]
			sl := w.s.deleteSlot(soakNextID(w.rng, w.name, &w.id), f.name)
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
			body, err := w.m.send(cctx, []soakSlot{sl}, false)
			cancel()
			if err != nil {
				w.s.failed("blob", []soakSlot{sl}, start, err, ctx.Err() != nil)
				w.own = append(w.own, f) // delete it later
				w.m.clearBackoff()
				time.Sleep(200 * time.Millisecond)
				continue
			}
			w.s.verify("blob", []soakSlot{sl}, false, body, start)
			continue
		}
		w.sendOne(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(500+w.rng.IntN(1500)) * time.Millisecond):
		}
	}
}

// sendOne writes a fresh file and sends it until the node acknowledges it
// or the run ends.
func (w *soakBlobWorker) sendOne(ctx context.Context) {
	w.seq++
	name := fmt.Sprintf("soak-%s-%06d.bin", w.name, w.seq)
	size := int64(1<<20 + w.rng.IntN(15<<20))
	path := filepath.Join(w.dir, name)
	f, err := os.Create(path)
	if err != nil {
		w.s.t.Errorf("soak: %v", err)
		return
	}
	h, b3 := sha256.New(), blake3.New()
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], w.rng.Uint64())
	if _, err := io.CopyN(io.MultiWriter(f, h, b3), mrand.NewChaCha8(seed), size); err != nil {
		w.s.t.Errorf("soak: %v", err)
	}
	f.Close()
	defer os.Remove(path)
	sha := hex.EncodeToString(h.Sum(nil))
	w.s.ledger.add(name, w.name, sha, size)
	w.own = append(w.own, soakOwned{name: name})
	kill := w.rng.IntN(3) == 0
	for attempt := 1; ctx.Err() == nil; attempt++ {
		start := time.Now()
		cmd := exec.Command(binPath, "send", path, w.s.meshText, "--secret", soakSecret, "--data-dir", w.dir,
			"--name", name, "--limit-rate", strconv.Itoa(soakBlobRate))
		cmd.Env = testenv.CleanEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			w.s.t.Errorf("soak: start send: %v", err)
			return
		}
		var after time.Duration
		if kill {
			// Mid-way: the process starts in ~0.2 s, then sends at the rate.
			full := 200*time.Millisecond + time.Duration(float64(size)/soakBlobRate*float64(time.Second))
			after = time.Duration(float64(full) * (0.2 + 0.7*w.rng.Float64()))
		}
		killed := soakWaitOrKill(ctx, cmd, after)
		sl := soakSlot{kind: "send"}
		switch {
		case killed && ctx.Err() != nil:
			w.s.failed("blob", []soakSlot{sl}, start, errors.New("the run ended"), true)
			return
		case killed:
			w.s.fault("mcpv2 send SIGKILLed mid-file")
			w.s.failed("blob", []soakSlot{sl}, start, errors.New("SIGKILLed"), true)
			kill = false
			continue
		}
		if cmd.ProcessState.Success() {
			// Sent over blob 1.2.0: send prints the BLAKE3 (list_files
			// still gives the sha256 the ledger keeps).
			var r struct {
				Filename string `json:"filename"`
				Size     int64  `json:"size"`
				BLAKE3   string `json:"blake3"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || r.Filename != name || r.Size != size || r.BLAKE3 != hex.EncodeToString(b3.Sum(nil)) {
				w.s.record(&w.s.stats.wrong, "blob send of %s (%d bytes, blake3 %x) printed %q", name, size, b3.Sum(nil), soakClip(stdout.String(), 300))
				return
			}
			w.s.ledger.commit(name)
			w.s.count("blob send", func(c *soakCount) { c.ok++ })
			w.s.stats.mu.Lock()
			w.s.stats.sends++
			w.s.stats.blobBytes += size
			if strings.Contains(stderr.String(), "resuming at ") {
				w.s.stats.resumed++
			}
			w.s.stats.mu.Unlock()
			return
		}
		if m := soakSendErrRE.FindStringSubmatch(stderr.String()); m != nil {
			code, _ := strconv.Atoi(m[1])
			msg := m[2]
			w.s.rpcError("blob send", &code, &msg, start, nil)
		} else {
			w.s.failed("blob", []soakSlot{sl}, start, fmt.Errorf("send exited %v: %s", cmd.ProcessState, soakLastLine(stderr.String())), false)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// soakWaitOrKill waits for cmd; after > 0 SIGKILLs it then, and the end of
// ctx at once. It reports whether the process was killed.
func soakWaitOrKill(ctx context.Context, cmd *exec.Cmd, after time.Duration) bool {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	var timer <-chan time.Time
	if after > 0 {
		t := time.NewTimer(after)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-done:
		return false
	case <-timer:
	case <-ctx.Done():
	}
	_ = cmd.Process.Kill()
	<-done
	return true
}

func soakLastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return soakClip(lines[len(lines)-1], 300)
}

// --- MCP and A2A clients (issue 18)

// soakClients counts every client of the run.
const soakClients = soakMeshWorkers + soakEdgeWorkers + soakBlobWorkers + soakMCPWorkers + soakA2AWorkers

// soakProbe counts one kind of cross-owner probe: a caller presenting
// another owner's MCP session or A2A task. refused is the right answer
// (403, or A2A's -32001), gone a session that no longer exists (404), other
// an answer that says neither (busy); violations are answers that served
// the prober.
type soakProbe struct{ refused, gone, other, violations int }

func (s *soakRun) probe(kind string, f func(p *soakProbe)) {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	p := s.stats.probes[kind]
	if p == nil {
		p = &soakProbe{}
		s.stats.probes[kind] = p
	}
	f(p)
}

// violation records a task or session seen by a caller that does not own
// it.
func (s *soakRun) violation(kind, format string, args ...any) {
	s.probe(kind, func(p *soakProbe) { p.violations++ })
	s.record(&s.stats.owners, "%s: %s", kind, fmt.Sprintf(format, args...))
}

// noAnswer judges a request of key that got no answer: cut by the
// injector, or a transport failure (expected only in a fault window).
func (s *soakRun) noAnswer(key string, start time.Time, err error, cut bool) {
	s.count(key, func(c *soakCount) {
		if cut {
			c.cut++
		} else {
			c.transport++
		}
	})
	if !cut && !s.inFault(start, time.Now()) {
		s.record(&s.stats.unexplained, "%s: %v", key, soakClip(err.Error(), 300))
	}
}

// soakBusy reports whether an HTTP status is the edge's "busy" or rate
// limit (its JSON-RPC error is -32005).
func soakBusy(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// soakClient is an HTTP client whose connections come from ip.
func soakClient(ip string) (*http.Transport, *http.Client) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second, DisableCompression: true,
	}
	return tr, &http.Client{Transport: tr}
}

// anonSession takes an anonymous session the way any stranger does:
// GET /mcpv2/session (the token is bound to c's source address).
func (s *soakRun) anonSession(ctx context.Context, c *http.Client) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, s.edgeBase+"/mcpv2/session", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || r.SessionID == "" {
		return "", fmt.Errorf("GET /mcpv2/session: HTTP %d %s", resp.StatusCode, soakClip(string(b), 200))
	}
	return r.SessionID, nil
}

// soakSessionRef is an MCP worker's stateful session, as the probes of the
// other workers see it.
type soakSessionRef struct {
	id, owner string
}

// soakTaskRef is an A2A task and the owner label of the worker that made it.
type soakTaskRef struct {
	id, owner string
}

// addTask remembers a task for the probes (the last 512).
func (s *soakRun) addTask(id, owner string) {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	if len(s.a2aTasks) < 512 {
		s.a2aTasks = append(s.a2aTasks, soakTaskRef{id, owner})
		return
	}
	s.a2aTasks[s.a2aNext] = soakTaskRef{id, owner}
	s.a2aNext = (s.a2aNext + 1) % len(s.a2aTasks)
}

// pickTask returns a task of an owner other than owner (a secret holder:
// of an anonymous owner).
func (s *soakRun) pickTask(owner string, rng *mrand.Rand) (soakTaskRef, bool) {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	var c []soakTaskRef
	for _, r := range s.a2aTasks {
		if r.owner != owner {
			c = append(c, r)
		}
	}
	if len(c) == 0 {
		return soakTaskRef{}, false
	}
	return c[rng.IntN(len(c))], true
}

// pickSession returns another worker's stateful MCP session of an owner
// other than owner.
func (s *soakRun) pickSession(worker, owner string, rng *mrand.Rand) (soakSessionRef, bool) {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	var c []soakSessionRef
	for _, w := range slices.Sorted(maps.Keys(s.mcpSess)) {
		if r := s.mcpSess[w]; w != worker && r.owner != owner {
			c = append(c, r)
		}
	}
	if len(c) == 0 {
		return soakSessionRef{}, false
	}
	return c[rng.IntN(len(c))], true
}

func (s *soakRun) setSession(worker string, r *soakSessionRef) {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	if r == nil {
		delete(s.mcpSess, worker)
		return
	}
	s.mcpSess[worker] = *r
}

// --- MCP workers

// soakMCPEras are the MCP eras of streamable HTTP the node serves: with
// sessions (Mcp-Session-Id) and stateless.
var soakMCPEras = []string{"2025-11-25", "2026-07-28"}

// soakBearer is the MCP client's HTTP transport: it sends the worker's
// session token as a bearer token, and refuses every request once the
// client is "killed" (an abandoned session: no DELETE reaches the node).
type soakBearer struct {
	base http.RoundTripper
	tok  atomic.Pointer[string]
	dead atomic.Bool
}

func (b *soakBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.dead.Load() {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errors.New("soak: the client process is gone")
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+*b.tok.Load())
	return b.base.RoundTrip(r)
}

// soakMCPWorker is an MCP client on the go-sdk (the stock Go client) over
// streamable HTTP at /mcp, in either era: tools/list, ping with a payload,
// list_files (anonymous callers: refused -32009), translate_history,
// resources/read of mcpv2://card; sessions closed, abandoned and closed
// mid-call, then opened again; and, with a session ID of another owner's
// worker, raw requests that must be refused.
type soakMCPWorker struct {
	s     *soakRun
	name  string
	face  string // "mcp-anon" or "mcp-secret", for the counts
	anon  bool
	ip    string
	rng   *mrand.Rand
	tr    *http.Transport
	raw   *http.Client
	tok   string
	tokAt time.Time
	tokN  int
	owner string // "secret", or "anon-<name>-<n>": one per anonymous session token

	cs   *sdk.ClientSession
	rt   *soakBearer
	era  string
	seq  int
	lost bool // the session was lost to a transport failure (a restart)
}

func newSoakMCPWorker(s *soakRun, i int) *soakMCPWorker {
	w := &soakMCPWorker{s: s, name: fmt.Sprintf("m%02d", i), anon: i%2 == 0, rng: mrand.New(mrand.NewPCG(uint64(i), 4))}
	if w.anon {
		w.face, w.ip = "mcp-anon", soakAnonIPs[(i/2)%len(soakAnonIPs)]
	} else {
		w.face, w.ip, w.owner = "mcp-secret", fmt.Sprintf("127.0.0.%d", 50+i), "secret"
	}
	w.tr, w.raw = soakClient(w.ip)
	return w
}

func (w *soakMCPWorker) run(ctx context.Context) {
	defer func() {
		w.drop(false)
		w.tr.CloseIdleConnections()
	}()
	tk := time.NewTicker(time.Second / soakFaceRate)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		if !w.anon && time.Since(w.tokAt) > time.Minute {
			w.tok, _ = protocol.MintToken(w.s.secret, w.ip, time.Now(), 5*time.Minute)
			w.tokAt = time.Now()
			if w.rt != nil {
				tok := w.tok
				w.rt.tok.Store(&tok)
			}
		}
		if w.cs == nil {
			w.connect(ctx)
			continue
		}
		switch r := w.rng.IntN(100); {
		case r < 30:
			w.callTool(ctx, w.s.pingSlot(nil, w.rng, w.name, w.s.nodeID))
		case r < 38:
			w.listTools(ctx)
		case r < 46:
			w.readCard(ctx)
		case r < 60:
			if w.anon {
				w.callTool(ctx, soakSlot{kind: "list_files", skill: "list_files", args: map[string]any{},
					check: func(json.RawMessage) error {
						return errors.New("list_files answered to an anonymous caller, who is not granted it")
					},
					allowed: func(code int) bool { return code == protocol.CodeNotPermitted }})
			} else {
				w.callTool(ctx, w.s.listSlot(nil, w.face+" "+w.name))
			}
		case r < 70:
			w.callTool(ctx, w.s.translateSlot(nil, w.rng, w.name))
		case r < 82:
			if !w.probe(ctx) {
				w.callTool(ctx, w.s.pingSlot(nil, w.rng, w.name, w.s.nodeID))
			}
		case r < 85:
			w.s.fault("mcp session closed (DELETE)")
			w.drop(false)
		case r < 86:
			w.s.fault("mcp session abandoned (no DELETE)")
			w.drop(true)
		case r < 88:
			w.closeMidCall(ctx)
		default:
			w.callTool(ctx, w.s.pingSlot(nil, w.rng, w.name, w.s.nodeID))
		}
	}
}

// connect opens a session in a random era; an anonymous worker first
// takes an anonymous session token (a new one one time in three: a new
// owner).
func (w *soakMCPWorker) connect(ctx context.Context) {
	start := time.Now()
	if w.anon && (w.tok == "" || w.rng.IntN(3) == 0) {
		tok, err := w.s.anonSession(ctx, w.raw)
		if err != nil {
			w.s.noAnswer(w.face+" GET /mcpv2/session", start, err, ctx.Err() != nil)
			soakSleep(ctx, 200*time.Millisecond)
			return
		}
		w.tokN++
		w.tok, w.owner = tok, fmt.Sprintf("anon-%s-%d", w.name, w.tokN)
		w.s.count(w.face+" GET /mcpv2/session", func(c *soakCount) { c.ok++ })
	}
	era := soakMCPEras[w.rng.IntN(len(soakMCPEras))]
	key := w.face + " connect " + era
	rt := &soakBearer{base: w.tr}
	tok := w.tok
	rt.tok.Store(&tok)
	c := sdk.NewClient(&sdk.Implementation{Name: "soak-" + w.name, Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	cs, err := c.Connect(cctx, &sdk.StreamableClientTransport{Endpoint: w.s.edgeBase + "/mcp", HTTPClient: &http.Client{Transport: rt}},
		&sdk.ClientSessionOptions{ProtocolVersion: era})
	cancel()
	if err != nil {
		if w.failed(key, start, err, ctx.Err() != nil) {
			soakSleep(ctx, 200*time.Millisecond)
		}
		return
	}
	if got := cs.InitializeResult().ProtocolVersion; got != era || (era < "2026" && cs.ID() == "") {
		w.s.record(&w.s.stats.wrong, "%s: negotiated %q with session ID %q, want %s", key, got, cs.ID(), era)
		_ = cs.Close()
		return
	}
	w.cs, w.rt, w.era = cs, rt, era
	w.s.count(key, func(c *soakCount) { c.ok++ })
	if w.lost {
		w.s.fault("mcp session lost in a restart, opened again")
		w.lost = false
	}
	if id := cs.ID(); id != "" {
		w.s.setSession(w.name, &soakSessionRef{id: id, owner: w.owner})
	}
}

// drop ends the session: with a DELETE, or abandoned (the client process
// killed: the node hears nothing and keeps the session until it is idle
// or evicted).
func (w *soakMCPWorker) drop(abandon bool) {
	if w.cs == nil {
		return
	}
	w.s.setSession(w.name, nil)
	if abandon {
		w.rt.dead.Store(true)
	}
	_ = w.cs.Close() // the node may be down
	w.cs, w.rt = nil, nil
}

// failed judges a request of the session that got no answer and reports
// whether the session is lost (the worker opens another).
func (w *soakMCPWorker) failed(key string, start time.Time, err error, cut bool) bool {
	var we *jsonrpc.Error
	switch {
	case cut:
		w.s.noAnswer(key, start, err, true)
		return false
	case strings.Contains(err.Error(), http.StatusText(http.StatusServiceUnavailable)) || strings.Contains(err.Error(), http.StatusText(http.StatusTooManyRequests)):
		code, msg := protocol.CodeRateLimited, err.Error()
		w.s.rpcError(key, &code, &msg, start, nil)
		return false
	case errors.As(err, &we):
		code, msg := int(we.Code), we.Message
		w.s.rpcError(key, &code, &msg, start, nil)
		return false
	}
	w.s.noAnswer(key, start, err, false)
	w.drop(false)
	w.lost = true
	return true
}

// timeout is a call's context: one in 25 is cut after 1–30 ms.
func (w *soakMCPWorker) timeout(ctx context.Context) (context.Context, context.CancelFunc, time.Duration, bool) {
	d, cut := soakCallTimeout, false
	if w.rng.IntN(25) == 0 {
		d, cut = time.Duration(1+w.rng.IntN(30))*time.Millisecond, true
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	return cctx, cancel, d, cut
}

// cutErr reports whether a call that failed was cut (by the injector, or
// by the end of the run).
func (w *soakMCPWorker) cutErr(ctx, cctx context.Context, start time.Time, d time.Duration, cut bool) bool {
	switch {
	case ctx.Err() != nil:
		return true
	case cut && soakPast(cctx, start, d):
		w.s.fault("mcp call cut mid-flight")
		return true
	}
	return false
}

// callTool runs sl as tools/call: a result is checked by sl.check, an
// isError result's mcpv2 error is judged as a JSON-RPC error of the slot.
func (w *soakMCPWorker) callTool(ctx context.Context, sl soakSlot) {
	key := w.face + " " + sl.kind
	var res *sdk.CallToolResult
	if start, ok := w.do(ctx, key, func(cctx context.Context) (err error) {
		res, err = w.cs.CallTool(cctx, &sdk.CallToolParams{Name: sl.skill, Arguments: sl.args})
		return err
	}); ok {
		w.judgeTool(key, sl, res, start)
	}
}

// do runs call within a call's timeout (timeout) and judges its error
// (failed, cutErr); ok says that the call answered.
func (w *soakMCPWorker) do(ctx context.Context, key string, call func(context.Context) error) (start time.Time, ok bool) {
	start = time.Now()
	cctx, cancel, d, cut := w.timeout(ctx)
	defer cancel()
	if err := call(cctx); err != nil {
		w.failed(key, start, err, w.cutErr(ctx, cctx, start, d, cut))
		return start, false
	}
	return start, true
}

func (w *soakMCPWorker) judgeTool(key string, sl soakSlot, res *sdk.CallToolResult, start time.Time) {
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError {
		var e struct {
			Error *soakErrObj `json:"error"`
		}
		if json.Unmarshal(sc, &e) != nil || e.Error == nil {
			w.s.record(&w.s.stats.unclear, "%s: an isError result without the mcpv2 error: %s", key, soakClip(string(sc), 300))
			return
		}
		w.s.rpcError(key, e.Error.Code, e.Error.Message, start, sl.allowed)
		return
	}
	if sl.check != nil {
		if err := sl.check(sc); err != nil {
			w.s.record(&w.s.stats.wrong, "%s (%s era): %v", key, w.era, err)
			return
		}
	}
	w.s.count(key, func(c *soakCount) { c.ok++ })
}

// listTools checks that tools/list names the node's skills and the mesh
// tools.
func (w *soakMCPWorker) listTools(ctx context.Context) {
	key := w.face + " tools/list"
	var res *sdk.ListToolsResult
	if _, ok := w.do(ctx, key, func(cctx context.Context) (err error) {
		res, err = w.cs.ListTools(cctx, nil)
		return err
	}); !ok {
		return
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"ping", "list_files", "translate_history", soakNapSkill, "mesh_call"} {
		if !slices.Contains(names, want) {
			w.s.record(&w.s.stats.wrong, "%s: no %s in %v", key, want, names)
			return
		}
	}
	w.s.count(key, func(c *soakCount) { c.ok++ })
}

// readCard reads the resource mcpv2://card: the node's own card.
func (w *soakMCPWorker) readCard(ctx context.Context) {
	key := w.face + " resources/read mcpv2://card"
	var res *sdk.ReadResourceResult
	if _, ok := w.do(ctx, key, func(cctx context.Context) (err error) {
		res, err = w.cs.ReadResource(cctx, &sdk.ReadResourceParams{URI: "mcpv2://card"})
		return err
	}); !ok {
		return
	}
	var card struct {
		PeerID string `json:"peer_id"`
		Skills []struct {
			Name string `json:"name"`
		} `json:"skills"`
	}
	if len(res.Contents) != 1 || json.Unmarshal([]byte(res.Contents[0].Text), &card) != nil || card.PeerID != w.s.nodeID ||
		!slices.ContainsFunc(card.Skills, func(sk struct {
			Name string `json:"name"`
		}) bool {
			return sk.Name == soakNapSkill
		}) {
		w.s.record(&w.s.stats.wrong, "%s: not the node's card: %s", key, soakClip(fmt.Sprint(res.Contents), 300))
		return
	}
	w.s.count(key, func(c *soakCount) { c.ok++ })
}

// closeMidCall closes the session (with a DELETE or abandoned) while a
// ping is in flight.
func (w *soakMCPWorker) closeMidCall(ctx context.Context) {
	key := w.face + " ping"
	sl := w.s.pingSlot(nil, w.rng, w.name, w.s.nodeID)
	start := time.Now()
	cs := w.cs
	var res *sdk.CallToolResult
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: sl.skill, Arguments: sl.args})
	}()
	time.Sleep(time.Duration(w.rng.IntN(20)) * time.Millisecond)
	w.drop(w.rng.IntN(2) == 0)
	<-done
	w.s.fault("mcp session closed mid-call")
	if err != nil {
		w.s.noAnswer(key, start, err, true)
		return
	}
	w.judgeTool(key, sl, res, start)
}

// probe presents the session ID of another owner's worker, with this
// worker's own token, in a raw request (POST a tools/call, GET the event
// stream, or DELETE it): the node must refuse it 403 (the go-sdk's
// session check), or 404 when that session is gone. It reports whether
// there was a session to try.
func (w *soakMCPWorker) probe(ctx context.Context) bool {
	v, ok := w.s.pickSession(w.name, w.owner, w.rng)
	if !ok {
		return false
	}
	method := http.MethodPost
	switch r := w.rng.IntN(10); {
	case r == 0:
		method = http.MethodGet
	case r < 3:
		method = http.MethodDelete
	}
	kind := "mcp: another owner's session, " + method
	var body io.Reader
	if method == http.MethodPost {
		w.seq++
		body = strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ping","arguments":{"payload":"probe"}}}`, w.seq))
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, method, w.s.edgeBase+"/mcp", body)
	if err != nil {
		w.s.t.Error(err)
		return true
	}
	req.Header.Set("Authorization", "Bearer "+w.tok)
	req.Header.Set("Mcp-Session-Id", v.id)
	req.Header.Set("MCP-Protocol-Version", soakMCPEras[0])
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := w.raw.Do(req)
	if err != nil {
		w.s.noAnswer(kind, start, err, ctx.Err() != nil)
		return true
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	switch st := resp.StatusCode; {
	case st == http.StatusForbidden:
		w.s.probe(kind, func(p *soakProbe) { p.refused++ })
	case st == http.StatusNotFound:
		w.s.probe(kind, func(p *soakProbe) { p.gone++ })
	case st >= 200 && st < 300:
		w.s.violation(kind, "%s (owner %s) used session %s of owner %s: HTTP %d %s", w.name, w.owner, v.id, v.owner, st, soakClip(string(b), 200))
	case soakBusy(st):
		w.s.probe(kind, func(p *soakProbe) { p.other++ })
	default:
		w.s.probe(kind, func(p *soakProbe) { p.other++ })
		w.s.record(&w.s.stats.unclear, "%s: HTTP %d %s", kind, st, soakClip(string(b), 200))
	}
	return true
}

func soakSleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// --- A2A workers

// soakA2AWorker is an A2A client over raw HTTP JSON-RPC (the wire a stock
// client speaks; docs/a2a.md), in v1.0 (A2A-Version: 1.0) or v0.3 (no
// header), one at random per request: SendMessage of ping with a payload
// the artifact must carry; a streamed soak_nap task whose SSE stream is
// dropped part-way and resumed (SubscribeToTask / tasks/resubscribe, with
// or without Last-Event-ID: no event lost or repeated); an input-required
// task answered; GetTask of its newest task; ListTasks, which must list
// only tasks this worker's owner made; GetTask, CancelTask and
// SubscribeToTask of another owner's task, which must be "task not found".
// An anonymous worker takes a new session (a new owner) every 30–50 s;
// the tasks of its old one are then another owner's.
type soakA2AWorker struct {
	s       *soakRun
	name    string
	face    string // "a2a-anon" or "a2a-secret"
	anon    bool
	ip      string
	rng     *mrand.Rand
	tr      *http.Transport
	c       *http.Client
	tok     string
	tokAt   time.Time
	tokN    int
	owner   string // "secret", or "anon-<name>-<n>"
	renewAt time.Time
	last    *soakOwnTask // the newest task made with this token
	old     []string     // tasks made with this worker's previous anonymous tokens
	seq     int
}

// soakOwnTask is a task a worker made: what its artifact must carry.
type soakOwnTask struct {
	id, skill, payload string
	at                 time.Time
}

func newSoakA2AWorker(s *soakRun, i int) *soakA2AWorker {
	w := &soakA2AWorker{s: s, name: fmt.Sprintf("a%02d", i), anon: i%2 == 0, rng: mrand.New(mrand.NewPCG(uint64(i), 5))}
	if w.anon {
		w.face, w.ip = "a2a-anon", soakAnonIPs[(i/2)%len(soakAnonIPs)]
	} else {
		w.face, w.ip, w.owner = "a2a-secret", fmt.Sprintf("127.0.0.%d", 60+i), "secret"
	}
	w.tr, w.c = soakClient(w.ip)
	return w
}

func (w *soakA2AWorker) run(ctx context.Context) {
	defer w.tr.CloseIdleConnections()
	tk := time.NewTicker(time.Second / soakFaceRate)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		if !w.renew(ctx) {
			continue
		}
		switch r := w.rng.IntN(100); {
		case r < 28:
			w.sendPing(ctx)
		case r < 43:
			w.stream(ctx)
		case r < 52:
			w.getOwn(ctx)
		case r < 62:
			w.list(ctx)
		case r < 80:
			if !w.probe(ctx) {
				w.sendPing(ctx)
			}
		case r < 84:
			w.inputRequired(ctx)
		case r < 88 && w.anon:
			w.refused(ctx)
		default:
			w.sendPing(ctx)
		}
	}
}

// renew keeps the worker's token: a secret holder mints one a minute; an
// anonymous worker takes a new anonymous session now and then (a new
// owner). It reports whether the worker has a token.
func (w *soakA2AWorker) renew(ctx context.Context) bool {
	if !w.anon {
		if time.Since(w.tokAt) > time.Minute {
			w.tok, _ = protocol.MintToken(w.s.secret, w.ip, time.Now(), 5*time.Minute)
			w.tokAt = time.Now()
		}
		return true
	}
	if w.tok != "" && time.Now().Before(w.renewAt) {
		return true
	}
	start := time.Now()
	tok, err := w.s.anonSession(ctx, w.c)
	if err != nil {
		w.s.noAnswer(w.face+" GET /mcpv2/session", start, err, ctx.Err() != nil)
		soakSleep(ctx, 200*time.Millisecond)
		return false
	}
	w.s.count(w.face+" GET /mcpv2/session", func(c *soakCount) { c.ok++ })
	if w.last != nil {
		w.old = append(w.old, w.last.id)
		if len(w.old) > 8 {
			w.old = w.old[1:]
		}
	}
	w.tokN++
	w.tok, w.owner, w.last = tok, fmt.Sprintf("anon-%s-%d", w.name, w.tokN), nil
	w.renewAt = time.Now().Add(soakAnonRenew + time.Duration(w.rng.IntN(20))*time.Second)
	if len(w.old) > 0 {
		// At once: the newest task of the old session is another owner's now.
		w.probeTask(ctx, soakTaskRef{id: w.old[len(w.old)-1], owner: "previous"}, "a2a: its own previous anonymous session's task")
	}
	return true
}

// version is the A2A version of one request: "1.0" or "0.3".
func (w *soakA2AWorker) version() string {
	if w.rng.IntN(2) == 0 {
		return "1.0"
	}
	return "0.3"
}

var soakA2AMethods = map[string]map[string]string{
	"1.0": {"send": "SendMessage", "stream": "SendStreamingMessage", "get": "GetTask", "list": "ListTasks", "cancel": "CancelTask", "subscribe": "SubscribeToTask"},
	"0.3": {"send": "message/send", "stream": "message/stream", "get": "tasks/get", "cancel": "tasks/cancel", "subscribe": "tasks/resubscribe"},
}

// message is a user message of the worker in version v, with a data part
// (data non-nil) or a text part; its messageId names the worker's owner,
// so that a listing shows whose each task is.
func (w *soakA2AWorker) message(v string, data any, taskID string) map[string]any {
	w.seq++
	m := map[string]any{"messageId": fmt.Sprintf("soak-a2a|%s|%s|%d", w.owner, w.name, w.seq)}
	if v == "1.0" {
		m["role"], m["parts"] = "ROLE_USER", []any{map[string]any{"data": data}}
	} else {
		m["kind"], m["role"], m["parts"] = "message", "user", []any{map[string]any{"kind": "data", "data": data}}
	}
	if taskID != "" {
		m["taskId"] = taskID
	}
	return m
}

// post sends one JSON-RPC request to /a2a; sse asks for an event stream,
// lastEventID (when set) resumes one.
func (w *soakA2AWorker) post(ctx context.Context, v, op string, params any, sse bool, lastEventID string) (*http.Response, json.RawMessage, error) {
	w.seq++
	var id any = w.seq
	if w.rng.IntN(2) == 0 {
		id = fmt.Sprintf("%s-%d", w.name, w.seq)
	}
	idb, _ := json.Marshal(id)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": soakA2AMethods[v][op], "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.s.edgeBase+"/a2a", bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.tok)
	if v == "1.0" {
		req.Header.Set("A2A-Version", "1.0")
	}
	if sse {
		req.Header.Set("Accept", "text/event-stream")
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := w.c.Do(req)
	return resp, idb, err
}

// rpc sends one request and reads its JSON answer (status, response).
func (w *soakA2AWorker) rpc(ctx context.Context, v, op string, params any) (int, soakResp, []byte, json.RawMessage, error) {
	resp, id, err := w.post(ctx, v, op, params, false, "")
	if err != nil {
		return 0, soakResp{}, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, soakResp{}, nil, nil, err
	}
	var r soakResp
	_ = json.Unmarshal(b, &r)
	return resp.StatusCode, r, b, id, nil
}

// judge checks a JSON answer to a request of key: the request's id, and
// exactly one of result and error. An error is judged (allowed codes, the
// edge's busy and rate-limit refusals and the face's "busy" are expected)
// and false returned; true means a result to check.
func (w *soakA2AWorker) judge(key string, status int, r soakResp, body, id json.RawMessage, start time.Time, allowed func(int) bool) bool {
	if r.Error != nil && r.Result == nil {
		code, msg := r.Error.Code, r.Error.Message
		if soakBusy(status) || (code != nil && msg != nil && *code == protocol.CodeInternal && strings.HasPrefix(*msg, "busy:")) {
			w.s.count(key, func(c *soakCount) { c.rpcErr++ })
			w.s.stats.mu.Lock()
			w.s.stats.codes[soakDerefInt(code)]++
			w.s.stats.mu.Unlock()
			return false
		}
		if status != http.StatusOK && status != http.StatusBadRequest {
			w.s.record(&w.s.stats.unclear, "%s: HTTP %d with a JSON-RPC error: %s", key, status, soakClip(string(body), 300))
		}
		w.s.rpcError(key, code, msg, start, allowed)
		return false
	}
	switch {
	case status != http.StatusOK || r.Result == nil || r.Error != nil || r.JSONRPC == nil || *r.JSONRPC != "2.0":
		w.s.record(&w.s.stats.unclear, "%s: HTTP %d, not a JSON-RPC answer: %s", key, status, soakClip(string(body), 300))
		return false
	case !edgeJSONEqual(r.ID, id):
		w.s.record(&w.s.stats.wrong, "%s: the answer to id %s came with id %s", key, id, r.ID)
		return false
	}
	return true
}

func soakDerefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// soakTaskView is what the harness reads of a task, in either version.
type soakTaskView struct {
	id, state string
	payloads  []string // the payload members of its artifacts' data
	peers     []string // the peer_id members of its artifacts' data
	msgID     string   // the last message of its history
	errCode   int      // the code in its status message's data, if any
}

// soakState reads a state in either version as v0.3 names it.
func soakState(s string) string {
	if rest, ok := strings.CutPrefix(s, "TASK_STATE_"); ok {
		return strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
	}
	return s
}

type soakWirePart struct {
	Data json.RawMessage `json:"data"`
}

type soakWireArtifact struct {
	Parts []soakWirePart `json:"parts"`
}

type soakWireStatus struct {
	State   string `json:"state"`
	Message *struct {
		Parts []soakWirePart `json:"parts"`
	} `json:"message"`
}

type soakWireTask struct {
	ID        string             `json:"id"`
	Status    soakWireStatus     `json:"status"`
	Artifacts []soakWireArtifact `json:"artifacts"`
	History   []struct {
		MessageID string `json:"messageId"`
	} `json:"history"`
}

func (v *soakTaskView) addArtifact(a soakWireArtifact) {
	for _, p := range a.Parts {
		var d struct {
			Payload *string `json:"payload"`
			PeerID  *string `json:"peer_id"`
		}
		if json.Unmarshal(p.Data, &d) == nil {
			if d.Payload != nil {
				v.payloads = append(v.payloads, *d.Payload)
			}
			if d.PeerID != nil {
				v.peers = append(v.peers, *d.PeerID)
			}
		}
	}
}

func (v *soakTaskView) setStatus(st soakWireStatus) {
	v.state = soakState(st.State)
	if st.Message != nil {
		for _, p := range st.Message.Parts {
			var d struct {
				Error *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal(p.Data, &d) == nil && d.Error != nil {
				v.errCode = d.Error.Code
			}
		}
	}
}

// soakParseTask reads a task (v1.0 SendMessage wraps it in {"task": …}).
func soakParseTask(raw json.RawMessage) (soakTaskView, error) {
	var wrap struct {
		Task *soakWireTask `json:"task"`
	}
	var t soakWireTask
	if json.Unmarshal(raw, &wrap) == nil && wrap.Task != nil {
		t = *wrap.Task
	} else if err := json.Unmarshal(raw, &t); err != nil {
		return soakTaskView{}, err
	}
	if t.ID == "" || t.Status.State == "" {
		return soakTaskView{}, fmt.Errorf("not a task: %s", soakClip(string(raw), 200))
	}
	v := soakTaskView{id: t.ID}
	v.setStatus(t.Status)
	for _, a := range t.Artifacts {
		v.addArtifact(a)
	}
	if n := len(t.History); n > 0 {
		v.msgID = t.History[n-1].MessageID
	}
	return v, nil
}

// soakMsgOwner is the owner label a soak worker wrote into a messageId.
func soakMsgOwner(id string) (string, bool) {
	f := strings.Split(id, "|")
	if len(f) != 4 || f[0] != "soak-a2a" {
		return "", false
	}
	return f[1], true
}

// created records a task this worker made.
func (w *soakA2AWorker) created(id, skill, payload string) {
	w.last = &soakOwnTask{id: id, skill: skill, payload: payload, at: time.Now()}
	w.s.addTask(id, w.owner)
}

// checkDone checks a finished task of skill: completed with payload in its
// artifact (ping: from the node); failed only when it ran across a
// restart, which fails the tasks that ran (then it counts as a transport
// failure in a restart).
func (w *soakA2AWorker) checkDone(key string, t soakTaskView, skill, payload string, start time.Time) {
	switch {
	case t.state == "failed" && w.s.inFault(start, time.Now()):
		w.s.count(key, func(c *soakCount) { c.transport++ })
	case t.state != "completed":
		w.s.record(&w.s.stats.wrong, "%s: task %s of %s ended %s (error %d), want completed", key, t.id, skill, t.state, t.errCode)
	case !slices.Contains(t.payloads, payload) || (skill == "ping" && !slices.Contains(t.peers, w.s.nodeID)):
		w.s.record(&w.s.stats.wrong, "%s: task %s of %s with payload %q answered payloads %q from %v", key, t.id, skill, payload, t.payloads, t.peers)
	default:
		w.s.count(key, func(c *soakCount) { c.ok++ })
	}
}

func (w *soakA2AWorker) payload() string {
	return fmt.Sprintf("%s-%016x-olá", w.name, w.rng.Uint64())
}

// sendPing sends ping with a payload; the completed task's artifact must
// carry it.
func (w *soakA2AWorker) sendPing(ctx context.Context) {
	v := w.version()
	key := w.face + " " + soakA2AMethods[v]["send"] + " ping"
	payload := w.payload()
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	defer cancel()
	st, r, body, id, err := w.rpc(cctx, v, "send", map[string]any{"message": w.message(v, map[string]any{"skill": "ping", "arguments": map[string]any{"payload": payload}}, "")})
	if err != nil {
		w.s.noAnswer(key, start, err, ctx.Err() != nil)
		return
	}
	if !w.judge(key, st, r, body, id, start, nil) {
		return
	}
	t, err := soakParseTask(r.Result)
	if err != nil {
		w.s.record(&w.s.stats.wrong, "%s: %v", key, err)
		return
	}
	w.created(t.id, "ping", payload)
	w.checkDone(key, t, "ping", payload, start)
}

// refused sends list_files as an anonymous caller, who is not granted it:
// the task must be rejected with -32009.
func (w *soakA2AWorker) refused(ctx context.Context) {
	v := w.version()
	key := w.face + " " + soakA2AMethods[v]["send"] + " list_files (not granted)"
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	defer cancel()
	st, r, body, id, err := w.rpc(cctx, v, "send", map[string]any{"message": w.message(v, map[string]any{"skill": "list_files", "arguments": map[string]any{}}, "")})
	if err != nil {
		w.s.noAnswer(key, start, err, ctx.Err() != nil)
		return
	}
	if !w.judge(key, st, r, body, id, start, nil) {
		return
	}
	t, err := soakParseTask(r.Result)
	switch {
	case err != nil:
		w.s.record(&w.s.stats.wrong, "%s: %v", key, err)
	case t.state != "rejected" || t.errCode != protocol.CodeNotPermitted:
		w.s.record(&w.s.stats.wrong, "%s: task %s ended %s (error %d), want rejected with %d", key, t.id, t.state, t.errCode, protocol.CodeNotPermitted)
	default:
		w.created(t.id, "list_files", "")
		w.s.count(key, func(c *soakCount) { c.ok++ })
	}
}

// inputRequired sends soak_nap without its required payload: the task
// waits for input; a second message to it gives the payload, and the
// completed task must carry it.
func (w *soakA2AWorker) inputRequired(ctx context.Context) {
	v := w.version()
	key := w.face + " " + soakA2AMethods[v]["send"] + " input-required, answered"
	payload := w.payload()
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	defer cancel()
	st, r, body, id, err := w.rpc(cctx, v, "send", map[string]any{"message": w.message(v, map[string]any{"skill": soakNapSkill, "arguments": map[string]any{}}, "")})
	if err != nil {
		w.s.noAnswer(key, start, err, ctx.Err() != nil)
		return
	}
	if !w.judge(key, st, r, body, id, start, nil) {
		return
	}
	t, err := soakParseTask(r.Result)
	if err != nil || t.state != "input-required" {
		w.s.record(&w.s.stats.wrong, "%s: want an input-required task, got %+v (%v)", key, t, err)
		return
	}
	w.created(t.id, soakNapSkill, payload)
	st, r, body, id, err = w.rpc(cctx, v, "send", map[string]any{"message": w.message(v, map[string]any{"arguments": map[string]any{"payload": payload}}, t.id)})
	if err != nil {
		w.s.noAnswer(key, start, err, ctx.Err() != nil)
		return
	}
	if !w.judge(key, st, r, body, id, start, nil) {
		return
	}
	if t, err = soakParseTask(r.Result); err != nil {
		w.s.record(&w.s.stats.wrong, "%s: %v", key, err)
		return
	}
	w.checkDone(key, t, soakNapSkill, payload, start)
}

// getOwn gets the worker's newest task: it must be there, and a finished
// one must carry its payload.
func (w *soakA2AWorker) getOwn(ctx context.Context) {
	own := w.last
	if own == nil {
		w.sendPing(ctx)
		return
	}
	v := w.version()
	key := w.face + " " + soakA2AMethods[v]["get"] + " (own task)"
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	defer cancel()
	st, r, body, id, err := w.rpc(cctx, v, "get", map[string]any{"id": own.id, "historyLength": 1})
	if err != nil {
		w.s.noAnswer(key, start, err, ctx.Err() != nil)
		return
	}
	if !w.judge(key, st, r, body, id, start, nil) {
		return
	}
	t, err := soakParseTask(r.Result)
	switch {
	case err != nil:
		w.s.record(&w.s.stats.wrong, "%s: %v", key, err)
	case t.id != own.id:
		w.s.record(&w.s.stats.wrong, "%s: GetTask %s answered task %s", key, own.id, t.id)
	case t.state == "completed" && own.payload != "" && !slices.Contains(t.payloads, own.payload):
		w.s.record(&w.s.stats.wrong, "%s: task %s of %s with payload %q holds payloads %q", key, t.id, own.skill, own.payload, t.payloads)
	default:
		w.s.count(key, func(c *soakCount) { c.ok++ })
	}
}

// list lists the caller's tasks (v1.0): every task listed must be one a
// worker of the same owner made (its messageId says), and an anonymous
// worker's newest task must be among them.
func (w *soakA2AWorker) list(ctx context.Context) {
	key := w.face + " ListTasks"
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	defer cancel()
	st, r, body, id, err := w.rpc(cctx, "1.0", "list", map[string]any{"pageSize": 50, "historyLength": 1})
	if err != nil {
		w.s.noAnswer(key, start, err, ctx.Err() != nil)
		return
	}
	if !w.judge(key, st, r, body, id, start, nil) {
		return
	}
	var l struct {
		Tasks     []json.RawMessage `json:"tasks"`
		TotalSize int               `json:"totalSize"`
	}
	if err := json.Unmarshal(r.Result, &l); err != nil || l.TotalSize < len(l.Tasks) {
		w.s.record(&w.s.stats.wrong, "%s: not a task list: %s", key, soakClip(string(r.Result), 300))
		return
	}
	var ids []string
	for _, raw := range l.Tasks {
		t, err := soakParseTask(raw)
		if err != nil {
			w.s.record(&w.s.stats.wrong, "%s: %v", key, err)
			return
		}
		ids = append(ids, t.id)
		if o, ok := soakMsgOwner(t.msgID); !ok || o != w.owner {
			w.s.violation("a2a: ListTasks", "%s (owner %s) was listed task %s, made by %q (messageId %q)", w.name, w.owner, t.id, o, t.msgID)
		}
	}
	if w.anon && w.last != nil && !slices.Contains(ids, w.last.id) {
		w.s.record(&w.s.stats.wrong, "%s: %s's newest task %s is not among the %d listed (of %d)", key, w.name, w.last.id, len(ids), l.TotalSize)
		return
	}
	w.s.count(key, func(c *soakCount) { c.ok++ })
}

// probe tries a task of another owner (for an anonymous worker, one time
// in four a task of its own previous session). It reports whether there
// was one to try.
func (w *soakA2AWorker) probe(ctx context.Context) bool {
	if w.anon && len(w.old) > 0 && w.rng.IntN(4) == 0 {
		w.probeTask(ctx, soakTaskRef{id: w.old[w.rng.IntN(len(w.old))], owner: "previous"}, "a2a: its own previous anonymous session's task")
		return true
	}
	ref, ok := w.s.pickTask(w.owner, w.rng)
	if !ok {
		return false
	}
	w.probeTask(ctx, ref, "a2a: another owner's task")
	return true
}

// probeTask asks for ref's task with GetTask, CancelTask or
// SubscribeToTask: each must be refused as for a task that does not
// exist (-32001).
func (w *soakA2AWorker) probeTask(ctx context.Context, ref soakTaskRef, kind string) {
	v := w.version()
	op := "get"
	switch r := w.rng.IntN(10); {
	case r < 2:
		op = "cancel"
	case r < 4:
		op = "subscribe"
	}
	kind += ", " + soakA2AMethods["1.0"][op]
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	defer cancel()
	resp, _, err := w.post(cctx, v, op, map[string]any{"id": ref.id}, op == "subscribe", "")
	if err != nil {
		w.s.noAnswer(kind, start, err, ctx.Err() != nil)
		return
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	var r soakResp
	_ = json.Unmarshal(b, &r)
	switch {
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || (r.Result != nil && r.Error == nil):
		w.s.violation(kind, "%s (owner %s) was served task %s of %s: HTTP %d %s", w.name, w.owner, ref.id, ref.owner, resp.StatusCode, soakClip(string(b), 200))
	case resp.StatusCode == http.StatusOK && r.Error != nil && r.Error.Code != nil && *r.Error.Code == -32001:
		w.s.probe(kind, func(p *soakProbe) { p.refused++ })
	case soakBusy(resp.StatusCode) || (r.Error != nil && r.Error.Message != nil && strings.HasPrefix(*r.Error.Message, "busy:")):
		w.s.probe(kind, func(p *soakProbe) { p.other++ })
	default:
		w.s.probe(kind, func(p *soakProbe) { p.other++ })
		w.s.record(&w.s.stats.unexpected, "%s: HTTP %d %s", kind, resp.StatusCode, soakClip(string(b), 300))
	}
}

// soakSSE reads server-sent events.
type soakSSE struct{ r *bufio.Reader }

// next returns the next event's id and data.
func (x soakSSE) next() (uint64, []byte, error) {
	var id uint64
	var data []byte
	for {
		line, err := x.r.ReadString('\n')
		if err != nil {
			return 0, nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data != nil {
				return id, data, nil
			}
		case strings.HasPrefix(line, ":"): // a keep-alive comment
		case strings.HasPrefix(line, "id:"):
			id, _ = strconv.ParseUint(strings.TrimSpace(line[3:]), 10, 64)
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimSpace(line[5:])...)
		}
	}
}

// soakStream follows one task over its event streams: the events must be
// numbered one after another (a resumed stream starts after the last one
// seen, or with the task as it is now), all of one task.
type soakStream struct {
	view soakTaskView // the task as the events built it
	seen uint64       // the last event's number
	snap uint64       // the number of the snapshot that opened the current stream (0: none)
}

// take reads one event (its SSE id and data) of the stream answering
// request reqID; snapshot says whether it opens a resumed stream without
// Last-Event-ID (the task as it is now, numbered as its latest event).
func (st *soakStream) take(id uint64, data []byte, reqID json.RawMessage, snapshot bool) error {
	var r soakResp
	if err := json.Unmarshal(data, &r); err != nil || r.Result == nil || !edgeJSONEqual(r.ID, reqID) {
		return fmt.Errorf("event %d is not a result for id %s: %s", id, reqID, soakClip(string(data), 200))
	}
	var ev struct {
		Kind           string           `json:"kind"`
		Task           *soakWireTask    `json:"task"`
		StatusUpdate   *json.RawMessage `json:"statusUpdate"`
		ArtifactUpdate *json.RawMessage `json:"artifactUpdate"`
	}
	if err := json.Unmarshal(r.Result, &ev); err != nil {
		return err
	}
	var upd struct {
		TaskID   string           `json:"taskId"`
		Status   soakWireStatus   `json:"status"`
		Artifact soakWireArtifact `json:"artifact"`
	}
	kind := ev.Kind
	switch {
	case ev.Task != nil: // v1.0
		kind = "task"
	case ev.StatusUpdate != nil:
		kind = "status-update"
		_ = json.Unmarshal(*ev.StatusUpdate, &upd)
	case ev.ArtifactUpdate != nil:
		kind = "artifact-update"
		_ = json.Unmarshal(*ev.ArtifactUpdate, &upd)
	default: // v0.3
		_ = json.Unmarshal(r.Result, &upd)
		if kind == "task" {
			var t soakWireTask
			_ = json.Unmarshal(r.Result, &t)
			ev.Task = &t
		}
	}
	switch {
	case snapshot && kind != "task":
		return fmt.Errorf("a resumed stream without Last-Event-ID began with a %s (event %d), not the task", kind, id)
	case snapshot && id < st.seen:
		return fmt.Errorf("a resumed stream began with the task as of event %d, after event %d was seen", id, st.seen)
	case !snapshot && id != st.seen+1 && st.snap != 0 && st.snap == st.seen:
		return fmt.Errorf("event %d after the task as of event %d, which opened a stream resumed without Last-Event-ID: an event lost or repeated", id, st.seen)
	case !snapshot && id != st.seen+1:
		return fmt.Errorf("event %d after event %d: an event lost or repeated", id, st.seen)
	}
	if snapshot {
		st.snap = id
	}
	st.seen = id
	switch kind {
	case "task":
		t, err := soakParseTask(mustJSON(ev.Task))
		if err != nil {
			return err
		}
		if st.view.id != "" && t.id != st.view.id {
			return fmt.Errorf("event %d is of task %s, the stream's is %s", id, t.id, st.view.id)
		}
		st.view = t
	case "status-update", "artifact-update":
		if upd.TaskID != st.view.id {
			return fmt.Errorf("event %d is of task %q, the stream's is %s", id, upd.TaskID, st.view.id)
		}
		if kind == "status-update" {
			st.view.setStatus(upd.Status)
		} else {
			st.view.addArtifact(upd.Artifact)
		}
	default:
		return fmt.Errorf("event %d of kind %q", id, kind)
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// final says whether the stream's task is in a state that ends a stream.
func (st *soakStream) final() bool {
	switch st.view.state {
	case "completed", "failed", "canceled", "rejected", "input-required":
		return true
	}
	return false
}

// follow reads a stream's events until a final state, the drop (after
// dropAfter events, 0: never) or the end of the body; snapshot as take.
func (st *soakStream) follow(resp *http.Response, reqID json.RawMessage, snapshot bool, dropAfter int) (n int, err error) {
	rd := soakSSE{r: bufio.NewReader(resp.Body)}
	for {
		id, data, err := rd.next()
		if err != nil {
			return n, err
		}
		if err := st.take(id, data, reqID, snapshot && n == 0); err != nil {
			return n, &soakWrongEvent{err}
		}
		n++
		if st.final() || n == dropAfter {
			return n, nil
		}
	}
}

// soakWrongEvent is an event that does not follow from the ones before.
type soakWrongEvent struct{ error }

// stream streams a soak_nap task (SendStreamingMessage / message/stream)
// and, two times in three, drops the stream after its first or second
// event; then it resumes with SubscribeToTask / tasks/resubscribe (with
// Last-Event-ID two times in three), or gets the task if it has finished.
// The events must follow one another to completed, with the payload in
// the artifact.
func (w *soakA2AWorker) stream(ctx context.Context) {
	v := w.version()
	key := w.face + " " + soakA2AMethods[v]["stream"] + " " + soakNapSkill
	payload := w.payload()
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	defer cancel()
	resp, reqID, err := w.post(sctx, v, "stream", map[string]any{"message": w.message(v, map[string]any{"skill": soakNapSkill, "arguments": map[string]any{"payload": payload}}, "")}, true, "")
	if err != nil {
		w.s.noAnswer(key, start, err, ctx.Err() != nil)
		return
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var r soakResp
		_ = json.Unmarshal(b, &r)
		if w.judge(key, resp.StatusCode, r, b, reqID, start, nil) {
			w.s.record(&w.s.stats.unclear, "%s: a result without an event stream: %s", key, soakClip(string(b), 300))
		}
		return
	}
	dropAfter := 0
	if w.rng.IntN(3) != 0 {
		dropAfter = 1 + w.rng.IntN(2)
	}
	st := &soakStream{}
	n, ferr := st.follow(resp, reqID, false, dropAfter)
	resp.Body.Close()
	cancel()
	var we *soakWrongEvent
	switch {
	case errors.As(ferr, &we):
		w.s.record(&w.s.stats.wrong, "%s: %v", key, we.error)
		return
	case st.view.id == "":
		if ferr == nil {
			ferr = errors.New("no event")
		}
		w.s.noAnswer(key, start, ferr, ctx.Err() != nil)
		return
	}
	w.created(st.view.id, soakNapSkill, payload)
	if st.final() {
		w.checkDone(key, st.view, soakNapSkill, payload, start)
		return
	}
	if ferr == nil && n == dropAfter {
		w.s.fault("a2a stream dropped mid-task")
	} else if ctx.Err() != nil {
		w.s.noAnswer(key, start, ferr, true)
		return
	} else if !w.s.inFault(start, time.Now()) {
		w.s.record(&w.s.stats.unexplained, "%s: the stream of task %s ended at event %d before a final state: %v", key, st.view.id, st.seen, ferr)
		return
	} else {
		w.s.fault("a2a stream cut by a restart")
	}
	w.resume(ctx, v, key, st, payload, start)
}

// resume resubscribes to a task whose stream was dropped (or cut by a
// restart), and follows it to its end; a task that finished meanwhile is
// read with GetTask.
func (w *soakA2AWorker) resume(ctx context.Context, v, key string, st *soakStream, payload string, start time.Time) {
	lei := ""
	rkey := w.face + " " + soakA2AMethods[v]["subscribe"]
	if w.rng.IntN(3) != 0 {
		lei = strconv.FormatUint(st.seen, 10)
		rkey += " with Last-Event-ID"
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		rstart := time.Now()
		cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
		resp, reqID, err := w.post(cctx, v, "subscribe", map[string]any{"id": st.view.id}, true, lei)
		if err != nil {
			cancel()
			if w.s.inFault(start, time.Now()) && attempt < 100 {
				soakSleep(ctx, 250*time.Millisecond) // the node is coming back
				continue
			}
			w.s.noAnswer(rkey, rstart, err, ctx.Err() != nil)
			return
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			var r soakResp
			_ = json.Unmarshal(b, &r)
			finished := func(code int) bool { return code == -32004 }
			if w.judge(rkey, resp.StatusCode, r, b, reqID, rstart, finished) {
				w.s.record(&w.s.stats.unclear, "%s: a result without an event stream: %s", rkey, soakClip(string(b), 300))
				return
			}
			if r.Error != nil && r.Error.Code != nil && *r.Error.Code == -32004 {
				// It finished before the resubscription: read it whole.
				w.s.fault("a2a task finished before its stream was resumed")
				w.getDone(ctx, v, key, st.view.id, payload, start)
			}
			return
		}
		_, ferr := st.follow(resp, reqID, lei == "", 0)
		resp.Body.Close()
		cancel()
		var we *soakWrongEvent
		switch {
		case errors.As(ferr, &we):
			w.s.record(&w.s.stats.wrong, "%s: task %s: %v", rkey, st.view.id, we.error)
		case st.final():
			w.s.count(rkey, func(c *soakCount) { c.ok++ })
			w.checkDone(key, st.view, soakNapSkill, payload, start)
		default:
			w.s.noAnswer(rkey, rstart, fmt.Errorf("the resumed stream of task %s ended at event %d before a final state: %v", st.view.id, st.seen, ferr), ctx.Err() != nil)
		}
		return
	}
}

// getDone gets a finished task and checks it.
func (w *soakA2AWorker) getDone(ctx context.Context, v, key, taskID, payload string, start time.Time) {
	gkey := w.face + " " + soakA2AMethods[v]["get"] + " (finished before resumed)"
	gstart := time.Now()
	cctx, cancel := context.WithTimeout(ctx, soakCallTimeout)
	defer cancel()
	st, r, body, id, err := w.rpc(cctx, v, "get", map[string]any{"id": taskID})
	if err != nil {
		w.s.noAnswer(gkey, gstart, err, ctx.Err() != nil)
		return
	}
	if !w.judge(gkey, st, r, body, id, gstart, nil) {
		return
	}
	t, err := soakParseTask(r.Result)
	if err != nil {
		w.s.record(&w.s.stats.wrong, "%s: %v", gkey, err)
		return
	}
	w.s.count(gkey, func(c *soakCount) { c.ok++ })
	w.checkDone(key, t, soakNapSkill, payload, start)
}

// --- the report

func (s *soakRun) report() {
	t := s.t
	var b strings.Builder
	st := &s.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	fmt.Fprintf(&b, "# Soak run\n\n%v of traffic, %d clients (%d mesh, %d edge of which %d also through the gateway, %d blob, %d MCP and %d A2A of which half anonymous), node under test %s.\n\n",
		s.dur, soakClients, soakMeshWorkers, soakEdgeWorkers, soakEdgeWorkers/2, soakBlobWorkers, soakMCPWorkers, soakA2AWorkers, s.nodeID)
	s.mu.Lock()
	fmt.Fprintf(&b, "Node SIGKILLed and restarted %d times; back after %v.\n\n", len(s.restarts), s.restarts)
	s.mu.Unlock()

	b.WriteString("## Calls by kind\n\n| face and kind | ok | JSON-RPC error | cut by the injector | transport error (restart) |\n|---|---:|---:|---:|---:|\n")
	var total soakCount
	for _, k := range slices.Sorted(maps.Keys(st.calls)) {
		c := st.calls[k]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", k, c.ok, c.rpcErr, c.cut, c.transport)
		total.ok, total.rpcErr, total.cut, total.transport = total.ok+c.ok, total.rpcErr+c.rpcErr, total.cut+c.cut, total.transport+c.transport
	}
	fmt.Fprintf(&b, "| **total** | %d | %d | %d | %d |\n\n", total.ok, total.rpcErr, total.cut, total.transport)

	b.WriteString("## Errors by code\n\n| code | count |\n|---:|---:|\n")
	for _, c := range slices.Sorted(maps.Keys(st.codes)) {
		fmt.Fprintf(&b, "| %d | %d |\n", c, st.codes[c])
	}
	b.WriteString("\n## Injected client faults\n\n| fault | count |\n|---|---:|\n")
	for _, k := range slices.Sorted(maps.Keys(st.faults)) {
		fmt.Fprintf(&b, "| %s | %d |\n", k, st.faults[k])
	}

	b.WriteString("\n## Owners: another caller's MCP sessions and A2A tasks\n\nEach probe presents another owner's MCP session ID or A2A task ID with the prober's own token. Refused: 403 (MCP) or task not found, -32001 (A2A); gone: 404, the session no longer exists; other: busy. A violation is an answer that served the prober (and every A2A task listed to a caller that its owner did not make).\n\n")
	b.WriteString("| probe | refused | gone | other | violations |\n|---|---:|---:|---:|---:|\n")
	for _, k := range slices.Sorted(maps.Keys(st.probes)) {
		p := st.probes[k]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", k, p.refused, p.gone, p.other, p.violations)
	}

	s.ledger.mu.Lock()
	var committed, deleted, blobs int
	for _, f := range s.ledger.files {
		if !f.committedAt.IsZero() {
			committed++
			if strings.HasPrefix(f.owner, "b") {
				blobs++
			}
		}
		if !f.deletedAt.IsZero() {
			deleted++
		}
	}
	names := len(s.ledger.files)
	s.ledger.mu.Unlock()
	_, parts := filesIn(t, s.dataDir)
	fmt.Fprintf(&b, "\n## Files\n\n%d names used, %d committed (%d by `mcpv2 send`: %d sends, %d of them resumed, %.1f MiB), %d deletions acknowledged; %d partial uploads left in the store at the end.\n",
		names, committed, blobs, st.sends, st.resumed, float64(st.blobBytes)/(1<<20), deleted, len(parts))

	b.WriteString("\n## Memory and open files (after warm-up)\n\n")
	fmt.Fprintf(&b, "Sampled every %v; the first %v of each lifetime is warm-up. Flat: the largest sample of the last third ≤ %.2f × the largest of the first third + %d MiB (RSS) / + %d (fds).\n\n",
		s.every, s.warm, soakFlatRatio, soakRSSSlack>>20, soakFDSlack)
	b.WriteString("| node | lifetime | pid | samples | RSS min–max MiB | RSS first→last third max | fds min–max | fds first→last third max | flat |\n|---|---:|---:|---:|---|---|---|---|---|\n")
	s.mu.Lock()
	lives := append(append([]*soakLife{}, s.lives...), s.bLife)
	s.mu.Unlock()
	var notFlat []string
	var csv strings.Builder
	csv.WriteString("elapsed_s,node,lifetime,pid,rss_kib,fds\n")
	for _, l := range lives {
		f := s.flatness(l)
		verdict := "n/a (too few samples)"
		if f.judged {
			verdict = map[bool]string{true: "yes", false: "NO"}[f.rssFlat && f.fdFlat]
			if !f.rssFlat || !f.fdFlat {
				notFlat = append(notFlat, fmt.Sprintf("%s#%d", l.node, l.n))
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f–%.1f | %.1f→%.1f | %d–%d | %d→%d | %s |\n", l.node, l.n, l.pid, f.n,
			soakMiB(f.rssMin), soakMiB(f.rssMax), soakMiB(f.rssFirst), soakMiB(f.rssLast), f.fdMin, f.fdMax, f.fdFirst, f.fdLast, verdict)
		for _, x := range l.samples {
			fmt.Fprintf(&csv, "%.1f,%s,%d,%d,%d,%d\n", x.at.Sub(s.begin).Seconds(), l.node, l.n, l.pid, x.rss>>10, x.fds)
		}
	}

	db := s.dbFlatness()
	b.WriteString("\n## state.db\n\n")
	fmt.Fprintf(&b, "The node's caps: `--max-tasks-bytes %d` (one owner's share a sixteenth), `--max-conversations %d`. Sampled with the rest: the file's size, and the bytes allocated to it (bbolt's high-water mark). Flat: after warm-up, the largest allocation of the last third ≤ %.2f × the first third's + %d MiB, and the size never over %d MiB.\n\n",
		soakMaxTasksBytes, soakMaxConversations, soakDBRatio, soakDBSlack>>20, soakDBMax>>20)
	b.WriteString("| samples | size first → last MiB | allocated first → last MiB | allocated first→last third max MiB (after warm-up) | largest size MiB | flat |\n|---:|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %.2f → %.2f | %.2f → %.2f | %.2f→%.2f | %.2f | %s |\n", db.n, soakMiB(db.firstSize), soakMiB(db.lastSize),
		soakMiB(db.firstAlloc), soakMiB(db.lastAlloc), soakMiB(db.first), soakMiB(db.last), soakMiB(db.maxSize), map[bool]string{true: "yes", false: "NO"}[db.flat])
	var dbcsv strings.Builder
	dbcsv.WriteString("elapsed_s,state_db_bytes,state_db_allocated_bytes\n")
	s.mu.Lock()
	for _, x := range s.db {
		fmt.Fprintf(&dbcsv, "%.1f,%d,%d\n", x.at.Sub(s.begin).Seconds(), x.size, x.alloc)
	}
	s.mu.Unlock()

	b.WriteString("\n## Verdict\n\n| check | count |\n|---|---:|\n")
	for _, v := range []struct {
		what string
		l    *soakList
	}{{"wrong answers", &st.wrong}, {"lost committed files", &st.lost}, {"errors that are not clear JSON-RPC errors", &st.unclear},
		{"clear errors refusing a correct request outside restarts (rate limits aside)", &st.unexpected},
		{"transport failures outside restarts, not injected", &st.unexplained}} {
		fmt.Fprintf(&b, "| %s | %d |\n", v.what, v.l.n)
	}
	fmt.Fprintf(&b, "| tasks or sessions seen by a caller that does not own them | %d |\n", st.owners.n)
	fmt.Fprintf(&b, "| lifetimes not flat | %d |\n", len(notFlat))
	fmt.Fprintf(&b, "| state.db not flat | %d |\n", map[bool]int{true: 0, false: 1}[db.flat])
	for _, v := range []struct {
		what string
		l    *soakList
	}{{"Wrong answers", &st.wrong}, {"Lost committed files", &st.lost}, {"Unclear errors", &st.unclear},
		{"Unexpected errors", &st.unexpected}, {"Unexplained transport failures", &st.unexplained},
		{"Owner violations", &st.owners}} {
		if v.l.n == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s (first %d of %d):\n\n", v.what, len(v.l.first), v.l.n)
		for _, m := range v.l.first {
			fmt.Fprintf(&b, "- %s\n", m)
		}
	}

	summary, samples := filepath.Join(s.out, "soak-summary.md"), filepath.Join(s.out, "soak-samples.csv")
	if err := os.WriteFile(summary, []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(samples, []byte(csv.String()), 0o644); err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(filepath.Join(s.out, "soak-statedb.csv"), []byte(dbcsv.String()), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("soak summary (also in %s; samples in %s):\n%s", summary, samples, b.String())

	// The verdict.
	if st.wrong.n > 0 {
		t.Errorf("%d wrong answers", st.wrong.n)
	}
	if st.lost.n > 0 {
		t.Errorf("%d committed files lost", st.lost.n)
	}
	if st.unclear.n > 0 {
		t.Errorf("%d errors that are not clear JSON-RPC errors", st.unclear.n)
	}
	if st.unexpected.n > 0 {
		t.Errorf("%d correct requests refused outside the restarts", st.unexpected.n)
	}
	if st.unexplained.n > 0 {
		t.Errorf("%d transport failures outside the restarts", st.unexplained.n)
	}
	if len(notFlat) > 0 {
		t.Errorf("RSS or open files grew after warm-up in lifetimes %v", notFlat)
	}
	if st.owners.n > 0 {
		t.Errorf("%d tasks or sessions seen by a caller that does not own them", st.owners.n)
	}
	if !db.flat {
		t.Errorf("state.db grew after warm-up: %.2f MiB allocated at most in the first third, %.2f MiB in the last (%d samples); its size at most %.2f MiB",
			soakMiB(db.first), soakMiB(db.last), db.n, soakMiB(db.maxSize))
	}
	// A run that did not do what it says proves nothing.
	if len(s.restarts) != 2 {
		t.Errorf("%d restarts, want 2", len(s.restarts))
	}
	for _, k := range []string{"mesh ping", "mesh upload_file", "mesh ask", "mesh translate_history", "mesh list_files",
		"edge ping", "edge upload_file", "edge ask", "gateway ping", "blob send"} {
		if c := st.calls[k]; c == nil || c.ok == 0 {
			t.Errorf("no successful %s in the run", k)
		}
	}
	for _, k := range []string{"mcp-anon ping", "mcp-secret ping", "mcp-secret list_files", "mcp-anon translate_history",
		"mcp-anon connect 2025-11-25", "mcp-anon connect 2026-07-28", "mcp-secret connect 2025-11-25", "mcp-secret connect 2026-07-28",
		"mcp-anon tools/list", "mcp-secret resources/read mcpv2://card", "a2a-anon GET /mcpv2/session",
		"a2a-anon ListTasks", "a2a-secret ListTasks", "a2a-anon SendMessage ping", "a2a-secret message/send ping",
		"a2a-anon SendStreamingMessage " + soakNapSkill, "a2a-secret message/stream " + soakNapSkill,
		"a2a-anon message/send list_files (not granted)"} {
		if c := st.calls[k]; c == nil || c.ok == 0 {
			t.Errorf("no successful %s in the run", k)
		}
	}
	// A resumption with Last-Event-ID, in either face and version.
	resumed := 0
	for k, c := range st.calls {
		if strings.HasSuffix(k, "with Last-Event-ID") {
			resumed += c.ok
		}
	}
	if resumed == 0 {
		t.Errorf("no A2A stream was resumed with Last-Event-ID")
	}
	if c := st.calls["mcp-anon list_files"]; c == nil || c.rpcErr == 0 {
		t.Errorf("no anonymous MCP list_files was refused")
	}
	for _, k := range []string{"mcp: another owner's session, POST", "a2a: another owner's task, GetTask", "a2a: its own previous anonymous session's task, GetTask"} {
		if p := st.probes[k]; p == nil || p.refused == 0 {
			t.Errorf("no probe %q was refused: the check never ran", k)
		}
	}
	for _, k := range []string{"mesh call cut mid-flight", "edge call cut mid-flight", "mcpv2 send SIGKILLed mid-file",
		"mcp call cut mid-flight", "mcp session closed (DELETE)", "mcp session abandoned (no DELETE)", "mcp session closed mid-call",
		"a2a stream dropped mid-task"} {
		if st.faults[k] == 0 {
			t.Errorf("the injector never did %q", k)
		}
	}
}

// soakDBFlat judges state.db over the run.
type soakDBFlat struct {
	n                     int   // samples after warm-up
	firstSize, lastSize   int64 // the file's size, over the whole run
	firstAlloc, lastAlloc int64 // the bytes allocated to it
	maxSize               int64
	first, last           int64 // the largest allocation of the first and last third after warm-up
	flat                  bool
}

// dbFlatness judges state.db's samples after warm-up (s.warm from the
// start of the traffic), cut in thirds: flat when the last third's largest
// allocation is at most soakDBRatio times the first third's plus
// soakDBSlack, and its size never exceeds soakDBMax. The file outlives
// restarts, so the run is one series.
func (s *soakRun) dbFlatness() soakDBFlat {
	s.mu.Lock()
	defer s.mu.Unlock()
	var f soakDBFlat
	if len(s.db) == 0 {
		return f
	}
	f.firstSize, f.lastSize = s.db[0].size, s.db[len(s.db)-1].size
	f.firstAlloc, f.lastAlloc = s.db[0].alloc, s.db[len(s.db)-1].alloc
	var post []int64
	for _, x := range s.db {
		f.maxSize = max(f.maxSize, x.size)
		if x.at.Sub(s.begin) >= s.warm {
			post = append(post, x.alloc)
		}
	}
	f.n = len(post)
	if len(post) < 3 {
		return f
	}
	third := len(post) / 3
	f.first, f.last = slices.Max(post[:third]), slices.Max(post[len(post)-third:])
	f.flat = float64(f.last) <= soakDBRatio*float64(f.first)+soakDBSlack && f.maxSize <= soakDBMax
	return f
}

func soakMiB(n int64) float64 { return float64(n) / (1 << 20) }
