package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/bench/internal/lean"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/transport"
)

// TestMain runs a role when the test binary is started as a bench child
// (the roles re-execute os.Executable, which here is the test binary).
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestRowsWork runs the quick path of a few rows for real: the echo,
// net/http and MCP children of this program, a mesh call to an in-process
// node (the binary's build is left to `go run ./bench --quick` in CI), and
// the heap row.
func TestRowsWork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	e, err := newEnv(config{rounds: 1, quick: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := plan{rounds: 1, latMin: 16, warm: time.Millisecond}

	// The mesh side: an in-process node, 16 warm calls of 1 KiB.
	srv, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, RateLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr, err := nodeTCPAddr(srv)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := newMeshClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	var mesh, echo []time.Duration
	err = alternate(ctx, 1,
		func(int) error {
			mesh, err = latencyRound(ctx, p, meshCall(mc.Client, addr, judgedPayload))
			return err
		},
		func(int) error {
			echo, err = echoLatency(ctx, e, p)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	for name, lat := range map[string][]time.Duration{"mesh": mesh, "echo": echo} {
		if len(lat) < p.latMin || slices.Min(lat) <= 0 {
			t.Errorf("%s: %d latencies, min %v; want at least %d, all positive", name, len(lat), slices.Min(lat), p.latMin)
		}
	}
	// A wrong answer is caught, not timed.
	check := pingCheck(4)
	for _, res := range []string{`{"pong":true,"payload":"xxx"}`, `{"pong":false,"payload":"xxxx"}`, `{"pong":true}`} {
		if err := check([]byte(res)); err == nil {
			t.Errorf("the ping check passed %s for a 4-byte payload", res)
		}
	}
	if err := check([]byte(`{"pong":true,"peer_id":"x","payload":"xxxx"}`)); err != nil {
		t.Error(err)
	}

	// The HTTP baselines answer what the edge rows send, and the MCP
	// answer is checked to be a result.
	for _, mk := range []func(context.Context, *env) (*httpSide, error){httpEchoSide, mcpSide} {
		s, err := mk(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		n, _, err := throughputRound(ctx, 4, 0, 2, s.call)
		s.Close()
		if err != nil || n != 8 {
			t.Fatalf("%s: %d calls, %v; want 8 calls", s.url, n, err)
		}
	}
	x := strings.Repeat("x", judgedPayload)
	for _, a := range []string{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + x + `"}],"isError":true}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + x[1:] + `"}]}}`,
	} {
		if err := checkMCPAnswer(200, []byte(a)); err == nil {
			t.Errorf("the MCP check passed %.80s…", a)
		}
	}
	if err := checkMCPAnswer(200, []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`+x+`"}]}}`)); err != nil {
		t.Error(err)
	}

	// The heap row, short.
	h, err := measureHeap(ctx, filepath.Join(e.dir, "heap"), 100)
	if err != nil {
		t.Fatal(err)
	}
	if h.at10 == 0 || h.at100 == 0 || h.allocs <= 0 || h.calls != 100 {
		t.Errorf("heap row: %+v; want both heap readings and allocations per call", h)
	}
}

// echoLatency times p.latMin echoes of the 1 KiB ping request on the echo
// child.
func echoLatency(ctx context.Context, e *env, p plan) ([]time.Duration, error) {
	r, err := e.role(ctx, "echo")
	if err != nil {
		return nil, err
	}
	h, err := bareHost(false)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	a, err := r.info.addrOf("/tcp/")
	if err != nil {
		return nil, err
	}
	pid, err := dialAddr(ctx, h, a)
	if err != nil {
		return nil, err
	}
	ss, err := openEchoStreams(ctx, h, pid, 1)
	if err != nil {
		return nil, err
	}
	defer closeEchoStreams(ss)
	msg, err := pingRequest(judgedPayload)
	if err != nil {
		return nil, err
	}
	return latencyRound(ctx, p, echoCall(ss, msg))
}

// TestBareIsLean holds the memory rows' baseline binary to what its RSS
// must measure: go-libp2p, kad-dht, go-multiaddr and the standard library,
// and of mcpv2's packages only the lean leaf it shares with the bench
// (bench/internal/lean), which itself imports none of mcpv2's.
func TestBareIsLean(t *testing.T) {
	const bare, leanPkg = "github.com/mcpv2/mcpv2/bench/bare", "github.com/mcpv2/mcpv2/bench/internal/lean"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "./bare", "./internal/lean").Output()
	if err != nil {
		t.Fatalf("go list ./bare ./internal/lean: %v", err)
	}
	allowed := []string{"github.com/libp2p/go-libp2p/", "github.com/libp2p/go-libp2p-kad-dht", "github.com/multiformats/go-multiaddr"}
	listed := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ": ")
		listed++
		for _, imp := range strings.Fields(imports) {
			std := !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".")
			ok := std || (pkg == bare && imp == leanPkg)
			for _, a := range allowed {
				ok = ok || strings.HasPrefix(imp+"/", a)
			}
			if !ok {
				t.Errorf("%s imports %s: only go-libp2p, kad-dht, go-multiaddr and the standard library (and bench/bare the lean package)", pkg, imp)
			}
		}
	}
	if listed != 2 {
		t.Fatalf("go list ./bare ./internal/lean listed %d packages: %s", listed, out)
	}
	deps, err := exec.Command("go", "list", "-deps", "./bare").Output()
	if err != nil {
		t.Fatalf("go list -deps ./bare: %v", err)
	}
	for _, d := range strings.Fields(string(deps)) {
		if strings.HasPrefix(d, "github.com/mcpv2/mcpv2/") && d != bare && d != leanPkg {
			t.Errorf("bench/bare depends on %s", d)
		}
	}
}

// TestLeanAgrees checks the values the lean package repeats from mcpv2,
// which it may not import, against mcpv2's own.
func TestLeanAgrees(t *testing.T) {
	if lean.MaxFrame != transport.DefaultMaxMessage {
		t.Errorf("lean.MaxFrame %d, transport.DefaultMaxMessage %d", lean.MaxFrame, transport.DefaultMaxMessage)
	}
	if lean.ConnLow != transport.DefaultConnLow || lean.ConnHigh != transport.DefaultConnHigh || lean.ConnGrace != transport.DefaultConnGrace {
		t.Errorf("lean's connection manager %d/%d/%s, transport's defaults %d/%d/%s",
			lean.ConnLow, lean.ConnHigh, lean.ConnGrace, transport.DefaultConnLow, transport.DefaultConnHigh, transport.DefaultConnGrace)
	}
}

// answerWriter is a child's stdin that answers each question written to
// it with the lines answers returns, as a bare host's stdout would.
type answerWriter struct {
	later   chan string
	answers func(query string) []string
}

func (w answerWriter) Write(p []byte) (int, error) {
	for _, l := range w.answers(strings.TrimSpace(string(p))) {
		w.later <- l
	}
	return len(p), nil
}

func (answerWriter) Close() error { return nil }

// TestAskSkipsStaleAnswer asks twice; the first question gets no answer
// in time, and its answer arrives only after the second question, just
// before the second's answer: ask must return the second's.
func TestAskSkipsStaleAnswer(t *testing.T) {
	later := make(chan string, 16)
	c := &child{name: "fake", later: later, exited: make(chan struct{}), stderr: &tailBuffer{max: 64},
		stdin: answerWriter{later: later, answers: func(q string) []string {
			if q == "stat 2" {
				return []string{"STAT 1 {\"rt\":1}", "STAT 2 {\"rt\":2}"}
			}
			return nil
		}}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if v, err := c.ask(ctx, lean.AskStat, lean.NameStat); err == nil {
		t.Fatalf("the first ask, which gets no answer, returned %q", v)
	}
	v, err := c.ask(context.Background(), lean.AskStat, lean.NameStat)
	if err != nil {
		t.Fatal(err)
	}
	if v != "{\"rt\":2}" {
		t.Errorf("the second ask returned %q, want the second answer {\"rt\":2}", v)
	}
}

// TestBareRoles runs the lean baseline binary for real: the echo role
// answers the echoes of row 14 and its memory reads, and a mesh role
// joined to an in-process mcpv2 node is in the node's DHT routing table
// and has the node in its own (row 15's one mesh).
func TestBareRoles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := newEnv(config{rounds: 1, quick: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	var echo readyInfo
	c, err := e.startBare(ctx, "echo", &echo)
	if err != nil {
		t.Fatal(err)
	}
	var m memInfo
	if err := loadEcho(ctx, echo, 100, func() (err error) { m, err = procMem(c.pid()); return err }); err != nil {
		t.Fatal(err)
	}
	if m.rss <= 0 || m.anon <= 0 || m.file <= 0 || m.anon+m.file > m.rss {
		t.Errorf("the echo host's memory %+v: want VmRSS ≥ RssAnon + RssFile, all positive", m)
	}

	srv, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, RateLimit: -1,
		Mesh: &node.MeshConfig{Mode: "server", NoMDNS: true, NoNAT: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr, err := nodeTCPAddr(srv)
	if err != nil {
		t.Fatal(err)
	}
	var info readyInfo
	mc, err := e.startBare(ctx, "mesh", &info, addr.Multiaddr)
	if err != nil {
		t.Fatal(err)
	}
	a, err := info.addrOf("/tcp/")
	if err != nil {
		t.Fatal(err)
	}
	bareID, err := peer.Decode(a[strings.LastIndex(a, "/p2p/")+len("/p2p/"):])
	if err != nil {
		t.Fatal(err)
	}
	rt := srv.Discovery().DHT().RoutingTable()
	jctx, jcancel := context.WithTimeout(ctx, 30*time.Second)
	defer jcancel()
	for {
		v, err := mc.ask(jctx, lean.AskPeers, lean.NamePeers)
		if err != nil {
			t.Fatal(err)
		}
		if rt.Find(bareID) != "" && strings.Contains(v, srv.ID().String()) {
			break
		}
		select {
		case <-jctx.Done():
			t.Fatalf("no one mesh after 30s: the node's routing table has the bare host: %v; the bare host says %s", rt.Find(bareID) != "", v)
		case <-time.After(100 * time.Millisecond):
		}
	}
	v, err := mc.ask(ctx, lean.AskStat, lean.NameStat)
	if err != nil {
		t.Fatal(err)
	}
	if v != `{"rt":1,"peers":1}` {
		t.Errorf("the bare host's STAT is %s, want one peer in its routing table and one connected", v)
	}
}

// TestProcMem reads this process's memory as the memory rows read their
// children's: the parts of VmRSS add up, and PSS is at most VmRSS.
func TestProcMem(t *testing.T) {
	m, err := procPss(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.anon <= 0 || m.file <= 0 || m.pss <= 0 || m.pss > m.rss+(64<<10) {
		t.Errorf("%+v: want RssAnon, RssFile and PSS positive, PSS at most VmRSS", m)
	}
	// The kernel prints VmRSS as the sum of the three (task_mem in
	// fs/proc/task_mmu.c), from one reading of each.
	if m.rss != m.anon+m.file+m.shmem {
		t.Errorf("%+v: VmRSS is not RssAnon + RssFile + RssShmem", m)
	}
	if _, err := procMem(1 << 30); err == nil {
		t.Error("procMem of a process that does not exist succeeded")
	}
}

func TestAlternateOrder(t *testing.T) {
	var got []string
	side := func(name string) func(int) error {
		return func(int) error { got = append(got, name); return nil }
	}
	if err := alternate(context.Background(), 3, side("A"), side("B")); err != nil {
		t.Fatal(err)
	}
	if want := "ABBAAB"; strings.Join(got, "") != want {
		t.Errorf("order %s, want %s", strings.Join(got, ""), want)
	}
	got = nil
	if err := alternate(context.Background(), 2, side("A"), side("B"), side("C")); err != nil {
		t.Fatal(err)
	}
	if want := "ABCCBA"; strings.Join(got, "") != want {
		t.Errorf("order %s, want %s", strings.Join(got, ""), want)
	}
}

func TestQuantile(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i) // 100 … 1
	}
	if m, p := median(xs), quantile(xs, 0.99); m != 50 || p != 99 {
		t.Errorf("median %v, p99 %v; want 50, 99", m, p)
	}
	if !math.IsNaN(median([]float64{})) {
		t.Error("the median of nothing is not NaN")
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		rounds  int
		wantErr string
	}{
		{nil, 5, ""},
		{[]string{"--quick"}, 2, ""},
		{[]string{"--quick", "--rounds", "3"}, 3, ""},
		{[]string{"--rounds", "0"}, 0, "--rounds 0"},
		{[]string{"--rows", "("}, 0, "not a regular expression"},
		{[]string{"extra"}, 0, "unexpected argument"},
		{[]string{"--mesh", "20"}, 5, ""},
		{[]string{"--mesh", "2"}, 0, "--mesh 2"},
	} {
		c, err := parseFlags(tc.args, io.Discard)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err %v, want one containing %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case c.rounds != tc.rounds:
			t.Errorf("%v: rounds %d, want %d", tc.args, c.rounds, tc.rounds)
		}
	}
	for _, tc := range []struct {
		args []string
		mesh int
	}{{nil, 150}, {[]string{"--quick"}, 12}, {[]string{"--quick", "--mesh", "30"}, 30}} {
		c, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if p := newPlan(c); p.mesh != tc.mesh {
			t.Errorf("%v: a mesh of %d, want %d", tc.args, p.mesh, tc.mesh)
		}
	}
	c, err := parseFlags([]string{"--rows", "^(1|12) "}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var sel []int
	for r := 1; r <= 12; r++ {
		if c.selected(r) {
			sel = append(sel, r)
		}
	}
	if !slices.Equal(sel, []int{1, 12}) {
		t.Errorf("--rows '^(1|12) ' selects %v, want [1 12]", sel)
	}
}

func TestTable(t *testing.T) {
	ok := line{row: 1, payload: "1 KiB", aMed: "10 µs", bMed: "8 µs", ratio: 1.25, target: "≤ 1.3×"}
	ok.judge(true, ok.ratio <= 1.3)
	miss := line{row: 3, payload: "1 KiB", ratio: 0.5, target: "≥ 0.8×"}
	miss.judge(true, miss.ratio >= 0.8)
	lines := []line{ok, miss, failedLine(7, fmt.Errorf("edge | down\nhard"))}
	var b bytes.Buffer
	writeTable(&b, lines, false)
	out := b.String()
	for _, want := range []string{
		"| 1 warm call, TCP, 1 in flight | 1 KiB | 10 µs | — | — | 8 µs | — | 1.25× | ≤ 1.3× | meets |",
		"| 0.50× | ≥ 0.8× | MISS |",
		"FAILED: edge / down hard |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	writeTable(&b, lines, true)
	if strings.Contains(b.String(), "MISS") || !strings.Contains(b.String(), "| works |") || !strings.Contains(b.String(), "FAILED") {
		t.Errorf("a quick table judges targets or hides a failure:\n%s", b.String())
	}
}

// TestCleanEnv keeps the bench's MCPV2_* and Go runtime settings from the
// children, and says in the header which runtime settings it kept back.
func TestCleanEnv(t *testing.T) {
	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "1GiB")
	t.Setenv("GODEBUG", "madvdontneed=1")
	t.Setenv("MCPV2_RATE_LIMIT", "1")
	t.Setenv("BENCH_TEST_KEPT", "yes")
	env := cleanEnv()
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains([]string{"GOGC", "GOMEMLIMIT", "GODEBUG", "MCPV2_RATE_LIMIT"}, name) {
			t.Errorf("a child's environment has %s", kv)
		}
	}
	if !slices.Contains(env, "BENCH_TEST_KEPT=yes") {
		t.Error("a child's environment lost BENCH_TEST_KEPT=yes")
	}
	if h := header(config{rounds: 1}); !strings.Contains(h, "GOGC=50 GOMEMLIMIT=1GiB GODEBUG=madvdontneed=1") {
		t.Errorf("the header does not say which runtime settings the children did not get:\n%s", h)
	}
	os.Unsetenv("GOGC")
	os.Unsetenv("GOMEMLIMIT")
	os.Unsetenv("GODEBUG")
	if h := header(config{rounds: 1}); strings.Contains(h, "environment sets") {
		t.Errorf("the header names runtime settings that are not set:\n%s", h)
	}
}
