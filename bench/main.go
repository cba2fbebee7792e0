// Command bench measures mcpv2 side by side with the floor under it (issue
// 10): a mesh call against a raw go-libp2p stream echo, the HTTP edge
// against a bare net/http JSON echo and the MCP go-sdk's streamable HTTP
// server, `mcpv2 send` against a raw libp2p stream copy and a raw TCP copy,
// a node's memory (idle, after warm calls, in a DHT mesh) against a bare
// host with a DHT, and the heap of a long run of warm calls. Each pair runs
// in one process run, the two sides alternated (A,B,B,A,…) over several
// rounds, and the result is a markdown table of medians, p99s, the ratio of
// medians and the target it must meet.
//
//	go run ./bench                  # the full run (a few minutes)
//	go run ./bench --quick          # CI smoke run: every row works, targets not judged
//	go run ./bench --rows '^(1|3) ' # a subset, by row number and name
//
// Servers run in child processes, so that their CPU time and memory can be
// read from /proc: the mcpv2 side is the real `mcpv2` binary, the baselines
// are this program run again in a hidden role (see roles.go), but for the
// memory rows', which are a lean binary of their own (bench/bare), built
// into the run's temp dir. Clients run in this process. The run needs Linux
// (/proc), the go command and loopback only.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// roleEnv names the hidden role a child process of the bench runs (roles.go).
const roleEnv = "MCPV2_BENCH_ROLE"

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, log)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// config is what the flags ask for.
type config struct {
	rounds int
	quick  bool
	rows   *regexp.Regexp
	mcpv2  string // a built mcpv2 binary, or "" to build one
	mesh   int    // row 15's processes, 0 for the plan's
	args   []string
}

// parseFlags parses the command line; errors name the flag.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rounds := fs.Int("rounds", 5, "rounds per pair, the sides alternated A,B,B,A,… (2 with --quick unless given)")
	quick := fs.Bool("quick", false, "CI smoke run: tiny counts, every row must work, targets are not judged")
	rows := fs.String("rows", "", "run only the rows whose \"<number> <name>\" matches this regular expression (e.g. '^(1|2) ', 'edge')")
	bin := fs.String("mcpv2", "", "a built mcpv2 binary to measure (default: go build ./cmd/mcpv2 into a temp dir)")
	mesh := fs.Int("mesh", 0, "processes in row 15's DHT mesh, half mcpv2 nodes and half bare hosts (default 150, 12 with --quick)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./bench [--quick] [--rounds N] [--rows REGEX] [--mcpv2 PATH] [--mesh N]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q: bench takes flags only (see --help)", fs.Arg(0))
	}
	c := config{rounds: *rounds, quick: *quick, mcpv2: *bin, mesh: *mesh, args: args}
	if *quick && !isSet(fs, "rounds") {
		c.rounds = 2
	}
	if c.rounds < 1 {
		return config{}, fmt.Errorf("--rounds %d: give 1 or more", c.rounds)
	}
	if isSet(fs, "mesh") && (c.mesh < 4 || c.mesh > maxMesh) {
		return config{}, fmt.Errorf("--mesh %d: give 4 to %d processes", c.mesh, maxMesh)
	}
	if *rows != "" {
		re, err := regexp.Compile(*rows)
		if err != nil {
			return config{}, fmt.Errorf("--rows %q is not a regular expression: %w", *rows, err)
		}
		c.rows = re
	}
	return c, nil
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// plan holds the counts and durations of one run: the full run's or the
// quick run's.
type plan struct {
	rounds int
	quick  bool
	// latDur is how long one side calls in one round of a latency row;
	// latMin is the fewest calls it makes however long they take.
	latDur time.Duration
	latMin int
	// warm is how long a side warms up before each measured round.
	warm time.Duration
	// tputDur is one side's measured time per round of a throughput row.
	tputDur time.Duration
	// coldN is the cold connections per side per round.
	coldN int
	// sendSize is the file of the send row.
	sendSize int64
	// idle is how long the RSS rows let their processes idle.
	idle time.Duration
	// loadCalls is the warm calls (and echoes) of row 14.
	loadCalls int
	// mesh is the processes of row 15's DHT mesh (half of each kind);
	// meshMin is the least time it is left to settle after the last
	// start, meshMax the most, meshStable how long the peer counts must
	// hold still, meshPoll how often they are read.
	mesh                                   int
	meshMin, meshMax, meshStable, meshPoll time.Duration
	// heapCalls is the warm calls of the heap row.
	heapCalls int
}

func newPlan(c config) plan {
	p := plan{rounds: c.rounds, latDur: 700 * time.Millisecond, latMin: 200, warm: 150 * time.Millisecond,
		tputDur: 2 * time.Second, coldN: 30, sendSize: 256 << 20, idle: 5 * time.Second, heapCalls: 100000,
		loadCalls: 10000, mesh: 150, meshMin: 30 * time.Second, meshMax: 3 * time.Minute, meshStable: 15 * time.Second, meshPoll: 3 * time.Second}
	if c.quick {
		p = plan{rounds: c.rounds, quick: true, latDur: 20 * time.Millisecond, latMin: 16, warm: 20 * time.Millisecond,
			tputDur: 100 * time.Millisecond, coldN: 2, sendSize: 8 << 20, idle: time.Second, heapCalls: 5000,
			loadCalls: 1000, mesh: 12, meshMin: 3 * time.Second, meshMax: 30 * time.Second, meshStable: 2 * time.Second, meshPoll: 500 * time.Millisecond}
	}
	if c.mesh > 0 {
		p.mesh = c.mesh
	}
	return p
}

// maxMesh bounds --mesh.
const maxMesh = 1000

// group is a set of rows measured together, with one setup.
type group struct {
	rows []int
	run  func(ctx context.Context, e *env, p plan) ([]line, error)
}

// groups are the measurements in the order they run.
var groups = []group{
	{rows: []int{1, 2}, run: runLatency},
	{rows: []int{3, 4, 5}, run: runThroughput},
	{rows: []int{6}, run: runCold},
	{rows: []int{7}, run: runEdgeVsHTTP},
	{rows: []int{8}, run: runEdgeVsMCP},
	{rows: []int{9}, run: runEdgeBatch},
	{rows: []int{10}, run: runSend},
	{rows: []int{11, 14}, run: runMemory},
	{rows: []int{12}, run: runHeap},
	{rows: []int{13}, run: runMetricsCost},
	{rows: []int{15}, run: runMeshRSS},
}

// rowNames are the issue table's rows, by number.
var rowNames = map[int]string{
	1:  "warm call, TCP, 1 in flight",
	2:  "warm call, QUIC, 1 in flight",
	3:  fmt.Sprintf("calls/s, %d in flight, TCP", inFlight),
	4:  fmt.Sprintf("node CPU per call (%d in flight, TCP)", inFlight),
	5:  "node CPU, 1 KiB minus 16 B payload",
	6:  "cold connect + first call, TCP",
	7:  "edge POST /mcpv2 calls/s, 50 clients",
	8:  "edge calls/s vs MCP",
	9:  "edge 10-slot batch, slots/s",
	10: "mcpv2 send, whole process",
	11: "idle RSS",
	12: "heap and allocations, warm calls",
	13: "--metrics on vs off, warm calls",
	14: "RSS after warm calls",
	15: "RSS per node in a DHT mesh",
}

// selected reports whether the row matches --rows.
func (c config) selected(row int) bool {
	return c.rows == nil || c.rows.MatchString(fmt.Sprintf("%d %s", row, rowNames[row]))
}

// run is the whole bench: header, every selected group, the table. It
// returns an error when a row failed.
func run(ctx context.Context, args []string, out io.Writer, log *slog.Logger) error {
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	p := newPlan(cfg)
	start := time.Now()
	fmt.Fprint(out, header(cfg))

	e, err := newEnv(cfg, log)
	if err != nil {
		return err
	}
	defer e.Close()

	var lines []line
	var failed []string
	for _, g := range groups {
		var want []int
		for _, r := range g.rows {
			if cfg.selected(r) {
				want = append(want, r)
			}
		}
		if len(want) == 0 {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %w", context.Cause(ctx))
		}
		log.Info("measuring", "rows", want)
		gl, err := g.run(ctx, e, p)
		if err != nil {
			log.Error("rows failed", "rows", want, "err", err)
			for _, r := range want {
				lines = append(lines, failedLine(r, err))
				failed = append(failed, fmt.Sprintf("row %d (%s): %v", r, rowNames[r], err))
			}
			continue
		}
		for _, l := range gl {
			if cfg.selected(l.row) {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) == 0 {
		return fmt.Errorf("--rows %q matched no row: rows are \"<number> <name>\", e.g. \"1 %s\"", cfg.rows, rowNames[1])
	}
	// Rows measured together (11 and 14) are printed in row order.
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.row, b.row) })
	fmt.Fprintln(out)
	writeTable(out, lines, p.quick)
	fmt.Fprintln(out)
	fmt.Fprint(out, notes(p, lines, e.binSizes()))
	fmt.Fprintf(out, "\nrun time: %s\n", time.Since(start).Round(time.Second))
	if len(failed) > 0 {
		return fmt.Errorf("%d row(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}
