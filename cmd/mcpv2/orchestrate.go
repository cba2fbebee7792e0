package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/node/orchestrate"
	"github.com/mcpv2/mcpv2/protocol"
)

// maxPlanFile caps --plan.
const maxPlanFile = 1 << 20

func orchestrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "orchestrate",
		Usage: "split a request into subtasks, run each on the best agent of the mesh, and bring back one answer",
		UsageText: "mcpv2 orchestrate \"what is 7 times 6, and the weather in Tokyo\" --bootstrap ADDR [--secret S] [--json]\n" +
			"   [--plan FILE] [--concurrency N] [--attempts N] [--subtask-timeout D] [--llm openai --llm-url URL]",
		Description: "Each subtask is routed to the agents the DHT finds for its skill, ranked, and tried in turn until one answers;\n" +
			"independent subtasks run at once. Progress goes to stderr (a live view on a terminal); the per-subtask table and\n" +
			"the answer to stdout. With --json, stdout carries one JSON line per event ({\"type\":\"event\",…}) and a last\n" +
			"{\"type\":\"result\",…}. The exit status is 0 only when every subtask is done.",
		Flags: append(append([]cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print events and the result as JSON lines"},
			&cli.StringFlag{Name: "plan", Usage: "run this JSON plan (`FILE`, {\"subtasks\":[…]}) instead of splitting the request"},
			&cli.IntFlag{Name: "concurrency", Value: 4, Usage: "subtasks that run at once"},
			&cli.IntFlag{Name: "attempts", Value: 3, Usage: "agents tried per subtask before it fails"},
			&cli.IntFlag{Name: "candidates", Value: 5, Usage: "agents asked of the DHT per skill"},
			&cli.DurationFlag{Name: "subtask-timeout", Value: 30 * time.Second, Usage: "time one attempt of one subtask may take"},
		}, llmFlags...), clientFlags...),
		Action: runOrchestrate,
	}
}

func runOrchestrate(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("orchestrate: usage: %s", c.Command.UsageText)
	}
	request := c.Args().First()
	var plan *orchestrate.Plan
	if path := c.String("plan"); path != "" {
		p, err := readPlan(path)
		if err != nil {
			return fmt.Errorf("orchestrate: --plan: %w", err)
		}
		plan = &p
	}
	backend, err := llmBackend(c)
	if err != nil {
		return fmt.Errorf("orchestrate: %w", err)
	}
	s, err := openSession(c)
	if err != nil {
		return err
	}
	defer s.Close()
	if s.Discovery() == nil {
		return errors.New("orchestrate: needs --bootstrap (or MCPV2_BOOTSTRAP): the multiaddr of a peer of the mesh, to find agents")
	}
	opts := []orchestrate.Option{
		orchestrate.WithConcurrency(c.Int("concurrency")), orchestrate.WithMaxAttempts(c.Int("attempts")),
		orchestrate.WithCandidates(c.Int("candidates")), orchestrate.WithSubtaskTimeout(c.Duration("subtask-timeout")),
		orchestrate.WithLatency(func(id string) (time.Duration, bool) {
			pid, err := peer.Decode(id)
			if err != nil {
				return 0, false
			}
			d := s.Host().Peerstore().LatencyEWMA(pid)
			return d, d > 0
		}),
	}
	if backend.Name() != llm.KindLocal {
		opts = append(opts, orchestrate.WithPlanner(orchestrate.NewLLMPlanner(backend, nil)), orchestrate.WithSummarizer(orchestrate.NewLLMSummarizer(backend)))
	}
	o, err := orchestrate.New(s.Discovery(), dialerCaller{s.Dialer}, opts...)
	if err != nil {
		return fmt.Errorf("orchestrate: %w", err)
	}
	ctx, cancel := context.WithTimeout(c.Context, timeoutOr(c, orchestrateTimeout))
	defer cancel()

	view := newProgressView(c.App.Writer, c.App.ErrWriter, c.Bool("json"))
	var res orchestrate.Result
	if plan != nil {
		res, err = o.RunPlan(ctx, request, *plan, view.event)
	} else {
		res, err = o.Run(ctx, request, view.event)
	}
	view.done()
	if err != nil && len(res.Subtasks) == 0 {
		return fmt.Errorf("orchestrate: %w", err)
	}
	if err := view.result(res); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("orchestrate: %w", err)
	}
	if res.Status != orchestrate.StatusCompleted {
		failed := 0
		for _, st := range res.Subtasks {
			if st.Status != orchestrate.StateDone {
				failed++
			}
		}
		return fmt.Errorf("orchestrate: %s: %d of %d subtasks not done", res.Status, failed, len(res.Subtasks))
	}
	return nil
}

// readPlan reads and checks a --plan file.
func readPlan(path string) (orchestrate.Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return orchestrate.Plan{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPlanFile+1))
	if err != nil {
		return orchestrate.Plan{}, err
	}
	if len(data) > maxPlanFile {
		return orchestrate.Plan{}, fmt.Errorf("%s: larger than %d bytes", path, maxPlanFile)
	}
	p, err := orchestrate.ParsePlan(data)
	if err != nil {
		return orchestrate.Plan{}, fmt.Errorf("%s: %w", path, err)
	}
	p.Source = "given"
	return p, nil
}

// dialerCaller adapts a dialer to orchestrate.Caller: each call carries the
// client's mesh session when it has a --secret.
type dialerCaller struct{ d *node.Dialer }

// CallSkill runs skill on agent with the dialer's default call options.
func (dc dialerCaller) CallSkill(ctx context.Context, agent protocol.Address, skill string, args json.RawMessage) (json.RawMessage, error) {
	return dc.d.CallSkill(ctx, agent, skill, args, protocol.CallOptions{})
}

// progressView shows an orchestration's events: JSON lines on stdout, a
// live view redrawn in place on a terminal's stderr, or one line per event
// on a stderr that is not a terminal.
type progressView struct {
	out, errw io.Writer
	json      bool
	live      bool
	start     time.Time

	mu    sync.Mutex // guards the fields below; events arrive one at a time, but done may race
	order []string
	line  map[string]string
	drawn int
}

func newProgressView(out, errw io.Writer, asJSON bool) *progressView {
	return &progressView{out: out, errw: errw, json: asJSON, live: !asJSON && isTerminal(errw), start: time.Now(), line: map[string]string{}}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (v *progressView) event(e orchestrate.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.json {
		b, err := json.Marshal(struct {
			Type string `json:"type"`
			orchestrate.Event
		}{"event", e})
		if err == nil {
			fmt.Fprintf(v.out, "%s\n", printableJSON(b))
		}
		return
	}
	text := fmt.Sprintf("%-10s %-9s", oneLine(e.Subtask, 64), e.State)
	if e.Agent != "" {
		text += " " + printableLine(shortCaller(e.Agent))
	}
	if e.Attempt > 1 {
		text += fmt.Sprintf(" (attempt %d)", e.Attempt)
	}
	if e.Error != "" {
		text += ": " + oneLine(e.Error, 100)
	}
	if !v.live {
		fmt.Fprintf(v.errw, "[%6.2fs] %s\n", e.Time.Sub(v.start).Seconds(), text)
		return
	}
	if _, ok := v.line[e.Subtask]; !ok {
		v.order = append(v.order, e.Subtask)
	}
	v.line[e.Subtask] = text
	v.redraw()
}

// redraw rewrites the live view: one line per subtask, in first-seen order.
func (v *progressView) redraw() {
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.drawn)
	}
	for _, id := range v.order {
		fmt.Fprintf(&b, "\x1b[2K  %s\n", v.line[id])
	}
	v.drawn = len(v.order)
	io.WriteString(v.errw, b.String())
}

// done ends the live view (it stays on screen).
func (v *progressView) done() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.drawn = 0
}

// result prints the outcome: a JSON line, or the table and the answer.
func (v *progressView) result(r orchestrate.Result) error {
	if v.json {
		b, err := json.Marshal(struct {
			Type string `json:"type"`
			orchestrate.Result
		}{"result", r})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(v.out, "%s\n", printableJSON(b))
		return err
	}
	w := tabwriter.NewWriter(v.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SUBTASK\tSKILL\tAGENT\tSTATUS\tATTEMPTS\tSTART\tTOOK\tRESULT")
	for _, st := range r.Subtasks {
		out := string(st.Result)
		if st.Error != "" {
			out = st.Error
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%.2fs\t%.2fs\t%s\n", oneLine(st.ID, 64), oneLine(st.Skill, 64), dash(printableLine(shortCaller(st.Agent))), st.Status, st.Attempts,
			st.StartedMS/1000, st.DurationMS/1000, oneLine(out, 60))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(v.out, "\n%s\n\n%s in %.2fs (plan: %s)\n", printable(r.Answer), r.Status, r.DurationMS/1000, printableLine(r.Plan.Source))
	return err
}
