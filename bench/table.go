package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
)

// line is one line of the table: a row of the issue at one payload.
type line struct {
	row      int
	payload  string
	baseline string // what the mcpv2 side is measured against
	// a and b are the mcpv2 and baseline cells: median and p99 (p99 empty
	// where a row has none).
	aMed, aP99, bMed, bP99 string
	// ratio is mcpv2 over baseline (NaN: none); ratioText overrides its
	// formatting.
	ratio     float64
	ratioText string
	target    string
	// verdict is "meets", "MISS", "—" (not judged) or "FAILED: …".
	verdict string
}

// judge sets l's verdict from ok, or "—" when the line is not judged.
func (l *line) judge(judged, ok bool) {
	switch {
	case !judged:
		l.verdict = "—"
	case ok:
		l.verdict = "meets"
	default:
		l.verdict = "MISS"
	}
}

// failedLine is the line of a row whose measurement failed.
func failedLine(row int, err error) line {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	msg = strings.ReplaceAll(msg, "|", "/")
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return line{row: row, ratio: math.NaN(), verdict: "FAILED: " + msg}
}

// writeTable prints the lines as a markdown table. In a quick run the
// verdicts say only whether the row worked.
func writeTable(w io.Writer, lines []line, quick bool) {
	fmt.Fprintln(w, "| row | payload | mcpv2 median | mcpv2 p99 | baseline | baseline median | baseline p99 | ratio | target | result |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, l := range lines {
		ratio := l.ratioText
		if ratio == "" {
			ratio = fmtRatio(l.ratio)
		}
		verdict := l.verdict
		if quick && !strings.HasPrefix(verdict, "FAILED") {
			verdict = "works"
		}
		fmt.Fprintf(w, "| %d %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			l.row, rowNames[l.row], dash(l.payload), dash(l.aMed), dash(l.aP99), dash(l.baseline), dash(l.bMed), dash(l.bP99), ratio, dash(l.target), verdict)
	}
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// header is the run's preamble: the machine, the toolchain, the command.
func header(c config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# mcpv2 bench (issue 10)\n\n")
	fmt.Fprintf(&b, "- command: `go run ./bench%s`\n", argText(c.args))
	fmt.Fprintf(&b, "- date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "- NumCPU %d, GOMAXPROCS %d, %s %s/%s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "- CPU: %s\n", cpuModel())
	fmt.Fprintf(&b, "- load average at start: %s\n", loadAvg())
	if env := strippedRuntimeEnv(); len(env) > 0 {
		fmt.Fprintf(&b, "- the bench's environment sets %s: its own process runs with it; the children (nodes and baselines) do not get it, each runs its own defaults\n", strings.Join(env, " "))
	}
	quick := ""
	if c.quick {
		quick = "; --quick: tiny counts, targets not judged"
	}
	fmt.Fprintf(&b, "- rounds per pair: %d, sides alternated A,B,B,A,…%s\n", c.rounds, quick)
	return b.String()
}

func argText(args []string) string {
	if len(args) == 0 {
		return ""
	}
	q := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " '\"|()*?[]$\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return " " + strings.Join(q, " ")
}

// notes explains how the table was measured, under it; bins names the
// binaries the run built or was given, with their sizes (env.binSizes).
func notes(p plan, lines []line, bins string) string {
	rows := map[int]bool{}
	for _, l := range lines {
		rows[l.row] = true
	}
	var b strings.Builder
	b.WriteString("Notes:\n\n")
	b.WriteString("- ratio = mcpv2 / baseline, of medians. Latency and CPU: lower is better; throughput: higher is better. Only the issue's own lines (1 KiB unless the row says otherwise) are judged; the other payloads are for information.\n")
	b.WriteString("- latency rows: every call timed; median and p99 over all rounds of a side. Throughput rows: calls/s per round, median over rounds. Each side warms up before each round.\n")
	b.WriteString("- mcpv2 side: the real binary, `mcpv2 node --no-mdns --no-nat --listen /ip4/127.0.0.1/tcp/0 --listen /ip4/127.0.0.1/udp/0/quic-v1 --rate-limit 0 --port 0 --public-ip 127.0.0.1 --max-inflight 64` (plus `--max-file 1GiB --max-partial 0 --max-store 0` for the send row); no --secret: `ping` is open to every caller (SPEC §6), and a policy.json grants the bench's client PeerIDs every skill (for send and delete_file). With its edge this node runs the large memory profile (GOGC 400), as every node with `--port` does by default. The mesh client is a `node.Dialer`'s, whose host listens nowhere, as the CLI's.\n")
	fmt.Fprintf(&b, "- baselines are this program in a child role, on bare `libp2p.New` hosts with the same transports (TCP, QUIC-v1), security (Noise, TLS) and muxer (yamux) as `transport.NewHost`; the echo gets the same request bytes the mesh client sends, as one frame (`transport.WriteFrame`) on a reused stream (%d streams at %d in flight). The memory rows' baselines are the same host in a lean binary of its own instead (`go build ./bench/bare`: go-libp2p, kad-dht, go-multiaddr and the standard library, no package of mcpv2), since this program's pages (it carries mcpv2 and the MCP go-sdk) would count in its RSS.\n", inFlight, inFlight)
	if rows[3] || rows[4] || rows[5] {
		fmt.Fprintf(&b, "- rows 3–5 run %d calls in flight, the issue's figure: the mesh client opens at most %d streams to a peer (node/pool.go maxStreamsPerPeer), and calls beyond them wait for a stream, so the echo gets as many streams.\n", inFlight, inFlight)
	}
	if rows[4] || rows[5] {
		b.WriteString("- CPU per call: the server child's utime+stime (/proc/<pid>/stat, 10 ms ticks) over the measured window of the throughput rounds, divided by the calls; median over rounds. Row 5 is the 1 KiB figure minus the 16 B one; it meets when mcpv2's payload cost is at most twice the echo's, or within 10 µs of it.\n")
	}
	if rows[6] {
		b.WriteString("- cold: each call on a fresh client host (new key), timed from before the dial to the answer; the host's construction is not timed.\n")
	}
	if rows[7] || rows[8] || rows[9] {
		b.WriteString("- edge rows: 50 client goroutines, keep-alive, one session from GET /mcpv2/session, edge `--rate-limit 0 --max-inflight 64`. MCP side: go-sdk v1.8.0 `NewStreamableHTTPHandler` with Stateless and JSONResponse, one `ping` tool returning its payload as text; the client POSTs `tools/call` with `Accept: application/json, text/event-stream` and `MCP-Protocol-Version: 2025-11-25`, and every answer is checked to be a result. Row 9 counts slots/s (10 per request) against the MCP side's calls/s (MCP has no batches).\n")
	}
	if rows[10] {
		fmt.Fprintf(&b, "- send: a %s file of random bytes, in the page cache; mcpv2: `mcpv2 send FILE /ip4/127.0.0.1/tcp/…/p2p/… --quiet --no-nat` as a process, timed from start to exit, the node writing into its file store; the baselines are child processes too (a fresh bare host, one stream, 256 KiB writes, close, wait for the receiver's ack after its fsync; raw TCP the same over a plain socket; the two hashing copies are the libp2p copy with both ends also hashing every byte inline, as a blob transfer must: one by SHA-256 (blob 1.0.0/1.1.0's hash), one by BLAKE3 (1.2.0's, which `mcpv2 send` uses and the row requires: a send that prints no matching blake3 fails it). MB = 10^6 bytes.\n", sizeText(p.sendSize))
	}
	if rows[11] || rows[14] || rows[15] {
		fmt.Fprintf(&b, "- memory (rows 11, 14, 15): VmRSS of /proc/<pid>/status, shown as VmRSS (anon RssAnon, file RssFile) in MiB: anonymous memory is the heap, stacks and runtime; file-backed pages are the binary's (%s), shared by every process of one binary and the first the kernel drops. The mcpv2 node runs with the GC settings `mcpv2 node` picks when GOGC and GOMEMLIMIT are unset (cmd/mcpv2/gc.go: without an edge, the small profile, GOGC 100), the bare host with Go's defaults: no child gets the bench's GOGC, GOMEMLIMIT or GODEBUG (the header says when the bench had them).\n", bins)
	}
	if rows[11] || rows[14] {
		fmt.Fprintf(&b, "- idle RSS (row 11): VmRSS after %s idle, a fresh mcpv2 node and a fresh bare host started side by side (the order alternating), median over rounds; mcpv2 node with the flags above but no edge (the dashboard on, as by default); baseline: `bare echo`, a bare host with kad-dht in server mode (mcpv2's /mcpv2 prefix), no bootstrap peers, with the echo handler of row 14 registered.\n", p.idle)
	}
	if rows[14] {
		fmt.Fprintf(&b, "- RSS after warm calls (row 14): the same two processes of row 11, right after row 11's reading: %d calls of 1 KiB pings over TCP from a fresh mesh client (%d in flight) to the node, and %d echoes of the same request bytes on %d streams of a fresh bare client host to the bare host, the two in alternating order; VmRSS read right after the last call, the client still connected; growth = that minus the idle reading, median over rounds; judged on VmRSS.\n", p.loadCalls, inFlight, p.loadCalls, inFlight)
	}
	if rows[15] {
		fmt.Fprintf(&b, "- DHT mesh (row 15): %d processes on loopback, half `mcpv2 node` (the flags above plus `--dht-mode server` and `--bootstrap` to the two first processes) and half `bare mesh` (a bare host with an mcpv2 node's connection manager, 100/400 connections with a 1 m grace, and its raised system connection limits; kad-dht server with mcpv2's prefix /mcpv2 and a validator that stores mcpv2's card records unchecked, joined through the same two); one mesh: no mcpv2 node filters peers by protocol (kad-dht's routing-table and query filters are off, the connection gater judges addresses only), so each kind's routing table holds both. Started %d at a time; then each process's peer count is read every %s (a node's over its control socket, as `mcpv2 status`; a bare host's, with its routing table size, from a line it prints) until, at least %s after the last start, the total moved by at most %.0f%% over %s and every process has a peer (at most %s); then the median VmRSS of each kind, one reading per process (rounds do not apply). The info line gives the median PSS (each shared page divided among the processes that map it: what a node costs the machine) and, read after the memory, the median connected peers of each kind and the bare hosts' routing tables, split by the kind of peer (`mcpv2 peers`'s list for a node); the row fails unless each kind is connected to the other and the bare hosts' routing tables hold nodes.\n",
			p.mesh, meshStartPar, p.meshPoll, p.meshMin, meshSettled*100, p.meshStable, p.meshMax)
	}
	if rows[12] {
		fmt.Fprintf(&b, "- heap: `node.New` server (RateLimit -1) and a `node.Dialer`'s client in this one process, %d warm 1 KiB ping calls with 4 in flight; HeapInuse after runtime.GC() at 10%% and 100%% of the calls; allocations = MemStats.Mallocs between the two, over the calls between them (client and server together). Growth meets at ≤ 1 MiB.\n", p.heapCalls)
	}
	if rows[13] {
		b.WriteString("- metrics: three `mcpv2 node`s with the bench's node flags (mesh on, no edge), started together: no --metrics (go-libp2p's metrics, which are process-wide, on a fresh registry that nothing reads, as before --metrics existed), `--metrics 127.0.0.1:0` (the node's counters and histograms, go-libp2p's swarm, identify, hole punching, relay, AutoNAT and event bus metrics) and the same with `--metrics-rcmgr` (the resource manager's too); a fresh mesh client each, 1 KiB pings; latency at 1 in flight with the three taking turns call by call (the first of a turn rotating), calls/s and the node's CPU per call at " + fmt.Sprint(inFlight) + " in flight with the three alternated round by round, then VmRSS; a scrape of each /metrics must show the pings counted. Only \"on\" is judged (within 3% of off).\n")
	}
	return b.String()
}

// --- statistics and formatting

// quantile returns the q-quantile (0 < q ≤ 1) of xs by nearest rank; xs is
// sorted in place. NaN for none.
func quantile[T ~int64 | ~float64](xs []T, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return float64(xs[max(0, min(i, len(xs)-1))])
}

func median[T ~int64 | ~float64](xs []T) float64 { return quantile(xs, 0.5) }

func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "—"
	}
	return fmt.Sprintf("%.2f×", r)
}

// fmtDur formats nanoseconds as µs, ms or s.
func fmtDur(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "—"
	case ns < 1e6:
		return fmt.Sprintf("%.0f µs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	}
	return fmt.Sprintf("%.2f s", ns/1e9)
}

// fmtMicros formats a CPU time in µs, with a sign when signed is set.
func fmtMicros(us float64, signed bool) string {
	if signed {
		return fmt.Sprintf("%+.1f µs", us)
	}
	return fmt.Sprintf("%.1f µs", us)
}

// fmtRate formats a rate per second.
func fmtRate(r float64, unit string) string {
	if r >= 1000 {
		return fmt.Sprintf("%.2fk %s/s", r/1000, unit)
	}
	return fmt.Sprintf("%.0f %s/s", r, unit)
}

// sizeText formats a byte count in KiB, MiB or B.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// fmtMiB formats bytes as MiB with one decimal.
func fmtMiB(n float64) string { return fmt.Sprintf("%.1f MiB", n/(1<<20)) }
