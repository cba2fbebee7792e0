package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/mcpv2/mcpv2/protocol"
)

// MaxRequestBytes caps the request text of Run and RunPlan.
const MaxRequestBytes = 16 << 10

// Defaults and bounds of the options.
const (
	// DefaultConcurrency is how many subtasks run at once unless
	// WithConcurrency says otherwise; MaxConcurrency bounds it.
	DefaultConcurrency = 4
	MaxConcurrency     = 64
	// DefaultSubtaskTimeout bounds one attempt (and one subtask's finds)
	// unless WithSubtaskTimeout says otherwise; MaxSubtaskTimeout bounds it.
	DefaultSubtaskTimeout = 30 * time.Second
	MaxSubtaskTimeout     = time.Hour
	// DefaultMaxAttempts is how many candidates a subtask tries unless
	// WithMaxAttempts says otherwise; MaxMaxAttempts bounds it.
	DefaultMaxAttempts = 3
	MaxMaxAttempts     = 16
	// DefaultCandidates is the limit of each find unless WithCandidates
	// says otherwise; MaxCandidates bounds it.
	DefaultCandidates = 5
	MaxCandidates     = 64
	// maxResultBytes caps one subtask's result kept in a Result.
	maxResultBytes = 1 << 20
	// maxErrorLen caps an error text kept in a SubtaskResult or an Event.
	maxErrorLen = 1024
	// maxAnswerLen caps a summarizer's answer.
	maxAnswerLen = 64 << 10
)

// ErrInvalidRequest is wrapped when a request is empty, longer than
// MaxRequestBytes or not UTF-8.
var ErrInvalidRequest = errors.New("orchestrate: invalid request")

// Finder finds agents offering a skill or tag, best first (node.Node.Find
// satisfies it). It must honour ctx and be safe for concurrent use.
type Finder interface {
	Find(ctx context.Context, skillOrTag string, limit int) ([]protocol.FindResult, error)
}

// Caller calls a skill on an agent (the node's client, adapted). It must
// honour ctx, be safe for concurrent use, and return a refusal by the agent
// as its *protocol.Error.
type Caller interface {
	CallSkill(ctx context.Context, agent protocol.Address, skill string, args json.RawMessage) (json.RawMessage, error)
}

// Planner makes a plan of a request. Implementations are safe for
// concurrent use.
type Planner interface {
	Plan(ctx context.Context, request string) (Plan, error)
}

// Summarizer writes the answer of a run from its parts. Implementations
// are safe for concurrent use.
type Summarizer interface {
	Summarize(ctx context.Context, request string, parts []SubtaskResult) (string, error)
}

// State is where a subtask is.
type State string

// States of a subtask. A SubtaskResult ends in StateDone, StateFailed or
// StateSkipped.
const (
	// StatePending: waiting for its dependencies or a free slot.
	StatePending State = "pending"
	// StateAssigning: rendering its arguments and finding candidates.
	StateAssigning State = "assigning"
	// StateRunning: an attempt is calling Event.Agent.
	StateRunning State = "running"
	// StateRetrying: the attempt on Event.Agent failed (Event.Error) and the
	// next candidate will be tried.
	StateRetrying State = "retrying"
	// StateDone: an agent answered.
	StateDone State = "done"
	// StateFailed: no agent answered, or the run was cancelled.
	StateFailed State = "failed"
	// StateSkipped: a dependency failed, so it never ran.
	StateSkipped State = "skipped"
)

// Event is one state change of one subtask, as given to Run's progress
// callback.
type Event struct {
	// Seq counts the events of a run from 1.
	Seq int `json:"seq"`
	// Time is when the change happened.
	Time time.Time `json:"time"`
	// Subtask is the subtask's id.
	Subtask string `json:"subtask"`
	// State is the new state.
	State State `json:"state"`
	// Agent is the PeerID of the agent called (running, retrying, done, and
	// failed after an attempt).
	Agent string `json:"agent,omitempty"`
	// Attempt counts the attempts of the subtask from 1.
	Attempt int `json:"attempt,omitempty"`
	// Error says what failed (retrying, failed, skipped).
	Error string `json:"error,omitempty"`
}

// SubtaskResult is what happened to one subtask.
type SubtaskResult struct {
	// ID, Skill and Text are the subtask's.
	ID    string `json:"id"`
	Skill string `json:"skill"`
	Text  string `json:"text"`
	// Agent is the PeerID of the agent that answered, or of the last one
	// tried.
	Agent string `json:"agent,omitempty"`
	// Status is StateDone, StateFailed or StateSkipped.
	Status State `json:"status"`
	// Attempts counts the calls made.
	Attempts int `json:"attempts"`
	// Tried lists the PeerIDs called, in order.
	Tried []string `json:"tried,omitempty"`
	// StartedMS is when the subtask started, in milliseconds from the start
	// of the run; DurationMS is how long it took. Both are 0 for a subtask
	// that never started.
	StartedMS  float64 `json:"started_ms"`
	DurationMS float64 `json:"duration_ms"`
	// Result is the agent's JSON result when Status is done.
	Result json.RawMessage `json:"result,omitempty"`
	// Error says why the subtask failed or was skipped.
	Error string `json:"error,omitempty"`
	// Code is the error code of a failure that carried one (a
	// *protocol.Error: -32009 not permitted, -32005 rate limited, or an
	// agent's refusal); 0 otherwise.
	Code int `json:"code,omitempty"`
}

// Run statuses.
const (
	// StatusCompleted: every subtask is done.
	StatusCompleted = "completed"
	// StatusPartial: some subtasks are done, some are not.
	StatusPartial = "partial"
	// StatusFailed: no subtask is done.
	StatusFailed = "failed"
)

// Result is the outcome of a run.
type Result struct {
	// Request is the request as given.
	Request string `json:"request"`
	// Plan is the plan that ran.
	Plan Plan `json:"plan"`
	// Answer is the summarizer's answer, or the numbered list of the parts.
	Answer string `json:"answer"`
	// Subtasks are the parts, in plan order.
	Subtasks []SubtaskResult `json:"subtasks"`
	// DurationMS is how long the run took, in milliseconds.
	DurationMS float64 `json:"duration_ms"`
	// Status is "completed", "partial" or "failed".
	Status string `json:"status"`
}

// config is what the options set.
type config struct {
	concurrency    int
	subtaskTimeout time.Duration
	maxAttempts    int
	candidates     int
	summarizer     Summarizer
	planner        Planner
	log            *slog.Logger
	latency        func(peerID string) (time.Duration, bool)
	authorize      func(ctx context.Context, skill string) error
}

// Option configures an Orchestrator; New reports an option's error.
type Option func(*config) error

// WithConcurrency bounds how many subtasks run at once: 1 to 64, default 4.
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxConcurrency {
			return fmt.Errorf("orchestrate: concurrency %d: want 1 to %d", n, MaxConcurrency)
		}
		c.concurrency = n
		return nil
	}
}

// WithSubtaskTimeout bounds each attempt of a subtask (and the finds of a
// subtask): more than 0 and at most an hour, default 30 s.
func WithSubtaskTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 || d > MaxSubtaskTimeout {
			return fmt.Errorf("orchestrate: subtask timeout %v: want more than 0 and at most %v", d, MaxSubtaskTimeout)
		}
		c.subtaskTimeout = d
		return nil
	}
}

// WithMaxAttempts bounds how many candidates a subtask tries: 1 to 16,
// default 3.
func WithMaxAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxMaxAttempts {
			return fmt.Errorf("orchestrate: max attempts %d: want 1 to %d", n, MaxMaxAttempts)
		}
		c.maxAttempts = n
		return nil
	}
}

// WithCandidates is the limit passed to each find: 1 to 64, default 5.
func WithCandidates(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxCandidates {
			return fmt.Errorf("orchestrate: candidates %d: want 1 to %d", n, MaxCandidates)
		}
		c.candidates = n
		return nil
	}
}

// WithSummarizer makes s write the answer. With nil (the default) the
// answer is a numbered list of the parts; when s fails, the list is used and
// the failure logged.
func WithSummarizer(s Summarizer) Option {
	return func(c *config) error { c.summarizer = s; return nil }
}

// WithPlanner makes Run plan with p; nil (the default) is HeuristicPlanner.
func WithPlanner(p Planner) Option {
	return func(c *config) error {
		if p == nil {
			p = HeuristicPlanner{}
		}
		c.planner = p
		return nil
	}
}

// WithLogger logs through l; nil (the default) discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.log = l
		return nil
	}
}

// WithLatency gives the measured latency of a peer (false: not measured),
// used to order candidates of equal score; nil (the default) orders them by
// PeerID only. f is called concurrently.
func WithLatency(f func(peerID string) (time.Duration, bool)) Option {
	return func(c *config) error { c.latency = f; return nil }
}

// WithAuthorize makes each subtask ask auth, before it finds any agent,
// whether the run's caller may run the subtask's skill: an error fails the
// subtask at once (its SubtaskResult.Code is the error's code when it is a
// *protocol.Error), with no find and no call, so that a caller cannot make
// the node search the mesh for skills it may not run. nil (the default)
// asks nothing; the agents' own checks still apply. auth is called
// concurrently.
func WithAuthorize(auth func(ctx context.Context, skill string) error) Option {
	return func(c *config) error { c.authorize = auth; return nil }
}

// Orchestrator runs requests across the agents of a mesh. It holds no state
// between runs and is safe for concurrent use; each run's goroutines end
// before Run returns.
type Orchestrator struct {
	find Finder
	call Caller
	cfg  config
}

// New returns an Orchestrator that finds agents through f and calls them
// through c, with the defaults changed by opts.
func New(f Finder, c Caller, opts ...Option) (*Orchestrator, error) {
	if f == nil || c == nil {
		return nil, errors.New("orchestrate: new: a Finder and a Caller are required")
	}
	cfg := config{
		concurrency:    DefaultConcurrency,
		subtaskTimeout: DefaultSubtaskTimeout,
		maxAttempts:    DefaultMaxAttempts,
		candidates:     DefaultCandidates,
		planner:        HeuristicPlanner{},
		log:            slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Orchestrator{find: f, call: c, cfg: cfg}, nil
}

// checkRequest refuses an empty, oversized or non-UTF-8 request.
func checkRequest(request string) error {
	switch {
	case strings.TrimSpace(request) == "":
		return fmt.Errorf("%w: empty", ErrInvalidRequest)
	case len(request) > MaxRequestBytes:
		return fmt.Errorf("%w: %d bytes, at most %d allowed", ErrInvalidRequest, len(request), MaxRequestBytes)
	case !utf8.ValidString(request):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidRequest)
	}
	return nil
}

// Run plans request with the planner and runs the plan (RunPlan).
// progress, when not nil, sees every state change (see Event); it is called
// one event at a time and never after Run returns, and should return
// quickly, as the run waits for it.
//
// Run fails for an invalid request (ErrInvalidRequest), a planner failure
// and an invalid plan (ErrInvalidPlan). A run whose subtasks failed is not
// an error: Result.Status says so. When ctx ends, Run stops the subtasks,
// and returns the partial Result and ctx's error, wrapped.
func (o *Orchestrator) Run(ctx context.Context, request string, progress func(Event)) (Result, error) {
	if err := checkRequest(request); err != nil {
		return Result{}, err
	}
	p, err := o.cfg.planner.Plan(ctx, request)
	if err != nil {
		if ctx.Err() != nil {
			return Result{Request: request, Status: StatusFailed}, fmt.Errorf("orchestrate: run: %w", ctx.Err())
		}
		return Result{Request: request}, fmt.Errorf("orchestrate: plan: %w", err)
	}
	return o.RunPlan(ctx, request, p, progress)
}

// RunPlan runs plan p for request: it assigns, dispatches and aggregates as
// the package documentation says. An empty p.Source becomes "given". Its
// errors and progress are those of Run.
func (o *Orchestrator) RunPlan(ctx context.Context, request string, p Plan, progress func(Event)) (Result, error) {
	if err := checkRequest(request); err != nil {
		return Result{}, err
	}
	if p.Source == "" {
		p.Source = SourceGiven
	}
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	r := &run{
		o:        o,
		plan:     p,
		start:    time.Now(),
		progress: progress,
		index:    make(map[string]int, len(p.Subtasks)),
		results:  make([]SubtaskResult, len(p.Subtasks)),
		finds:    map[string]*findCall{},
	}
	for i, st := range p.Subtasks {
		r.index[st.ID] = i
		r.results[i] = SubtaskResult{ID: st.ID, Skill: st.Skill, Text: st.Text, Status: StatePending}
	}
	r.execute(ctx)

	res := Result{Request: request, Plan: p, Subtasks: r.results, Status: status(r.results)}
	if err := ctx.Err(); err != nil {
		res.Answer = listAnswer(res.Subtasks)
		res.DurationMS = ms(time.Since(r.start))
		return res, fmt.Errorf("orchestrate: run: %w", err)
	}
	res.Answer = o.answer(ctx, request, res.Subtasks)
	res.DurationMS = ms(time.Since(r.start))
	return res, nil
}

// answer asks the summarizer, falling back to the list.
func (o *Orchestrator) answer(ctx context.Context, request string, parts []SubtaskResult) string {
	if o.cfg.summarizer == nil {
		return listAnswer(parts)
	}
	sctx, cancel := context.WithTimeout(ctx, o.cfg.subtaskTimeout)
	defer cancel()
	a, err := o.cfg.summarizer.Summarize(sctx, request, parts)
	if err == nil && strings.TrimSpace(a) != "" {
		return truncate(strings.TrimSpace(a), maxAnswerLen)
	}
	if err == nil {
		err = errors.New("empty answer")
	}
	o.cfg.log.Warn("orchestrate: summarizer failed; answering with the list of parts", "err", err)
	return listAnswer(parts)
}

// status is the run status of results.
func status(results []SubtaskResult) string {
	done := 0
	for _, r := range results {
		if r.Status == StateDone {
			done++
		}
	}
	switch done {
	case len(results):
		return StatusCompleted
	case 0:
		return StatusFailed
	}
	return StatusPartial
}

// ms converts d to fractional milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// run is the state of one RunPlan.
type run struct {
	o        *Orchestrator
	plan     Plan
	start    time.Time
	index    map[string]int
	progress func(Event)

	// results[i] is written by subtask i's worker while it runs, and by the
	// coordinator before it starts and after it ended (the done channel
	// orders the two).
	results []SubtaskResult

	// emitMu serializes progress calls and guards seq.
	emitMu sync.Mutex
	seq    int

	// findMu guards finds, the finds of this run by key; findWG counts
	// their goroutines.
	findMu sync.Mutex
	finds  map[string]*findCall
	findWG sync.WaitGroup
}

// findCall is one find of a run, shared by the subtasks that need it.
type findCall struct {
	done  chan struct{}
	found []protocol.FindResult
	err   error
}

// emit delivers one event.
func (r *run) emit(e Event) {
	if r.progress == nil {
		return
	}
	e.Error = truncate(e.Error, maxErrorLen)
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	r.seq++
	e.Seq = r.seq
	e.Time = time.Now()
	r.progress(e)
}

// execute runs the DAG: a subtask starts when its dependencies are done, at
// most concurrency at a time; a failure skips the dependents. It returns
// when every subtask has ended.
func (r *run) execute(ctx context.Context) {
	sts := r.plan.Subtasks
	n := len(sts)
	waiting := make([]int, n)
	dependents := make([][]int, n)
	for i, st := range sts {
		waiting[i] = len(st.DependsOn)
		for _, d := range st.DependsOn {
			j := r.index[d]
			dependents[j] = append(dependents[j], i)
		}
		r.emit(Event{Subtask: st.ID, State: StatePending})
	}

	// done is buffered for every subtask, so a worker never blocks on it
	// while the coordinator waits in g.Go for a free slot.
	done := make(chan int, n)
	var g errgroup.Group
	g.SetLimit(r.o.cfg.concurrency)
	launch := func(i int) {
		g.Go(func() error {
			r.runSubtask(ctx, i)
			done <- i
			return nil
		})
	}
	for i := range sts {
		if waiting[i] == 0 {
			launch(i)
		}
	}
	ended := make([]bool, n)
	for left := n; left > 0; {
		i := <-done
		ended[i] = true
		left--
		if r.results[i].Status == StateDone {
			for _, d := range dependents[i] {
				if waiting[d]--; waiting[d] == 0 && !ended[d] {
					launch(d)
				}
			}
			continue
		}
		// Skip everything downstream of i that has not ended yet.
		queue := []int{i}
		for len(queue) > 0 {
			f := queue[0]
			queue = queue[1:]
			for _, d := range dependents[f] {
				if ended[d] {
					continue
				}
				ended[d] = true
				left--
				msg := fmt.Sprintf("dependency %q %s", sts[f].ID, r.results[f].Status)
				r.results[d].Status = StateSkipped
				r.results[d].Error = msg
				r.emit(Event{Subtask: sts[d].ID, State: StateSkipped, Error: msg})
				queue = append(queue, d)
			}
		}
	}
	_ = g.Wait() // the workers always return nil
	r.findWG.Wait()
}

// runSubtask runs subtask i to its end: done or failed.
func (r *run) runSubtask(ctx context.Context, i int) {
	st := r.plan.Subtasks[i]
	res := &r.results[i]
	began := time.Now()
	res.StartedMS = ms(began.Sub(r.start))
	defer func() { res.DurationMS = ms(time.Since(began)) }()
	log := r.o.cfg.log.With("subtask", st.ID, "skill", st.Skill)

	fail := func(err error) {
		res.Status = StateFailed
		res.Error = truncate(err.Error(), maxErrorLen)
		if pe := (*protocol.Error)(nil); errors.As(err, &pe) {
			res.Code = pe.Code
		}
		r.emit(Event{Subtask: st.ID, State: StateFailed, Agent: res.Agent, Attempt: res.Attempts, Error: res.Error})
		log.Debug("orchestrate: subtask failed", "err", err)
	}
	r.emit(Event{Subtask: st.ID, State: StateAssigning})
	if err := ctx.Err(); err != nil {
		fail(err)
		return
	}
	if auth := r.o.cfg.authorize; auth != nil {
		if err := auth(ctx, st.Skill); err != nil {
			fail(fmt.Errorf("refused before any agent was sought: %w", err))
			return
		}
	}
	data := make(map[string]any, len(st.DependsOn))
	for _, d := range st.DependsOn {
		data[d] = resultData(&r.results[r.index[d]])
	}
	args, err := renderArgs(st.Arguments, data)
	if err != nil {
		fail(fmt.Errorf("arguments: %w", err))
		return
	}
	cands, err := r.candidates(ctx, st)
	if err != nil {
		fail(err)
		return
	}
	cands = cands[:min(len(cands), r.o.cfg.maxAttempts)]
	var last error
	for n, c := range cands {
		id := c.card.PeerID
		res.Attempts = n + 1
		res.Agent = id
		res.Tried = append(res.Tried, id)
		r.emit(Event{Subtask: st.ID, State: StateRunning, Agent: id, Attempt: n + 1})
		out, err := r.attempt(ctx, c, st.Skill, args)
		if err == nil {
			res.Status = StateDone
			res.Result = out
			r.emit(Event{Subtask: st.ID, State: StateDone, Agent: id, Attempt: n + 1})
			return
		}
		last = fmt.Errorf("agent %s: %w", shortID(id), err)
		log.Debug("orchestrate: attempt failed", "agent", id, "attempt", n+1, "err", err)
		if ctx.Err() != nil {
			fail(ctx.Err())
			return
		}
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.Code == protocol.CodeInvalidParams {
			fail(fmt.Errorf("the arguments were refused, not retried: %w", last))
			return
		}
		if errors.As(err, &pe) && pe.Code == protocol.CodeNotPermitted {
			// A refusal by policy is an answer, not a fault of the agent:
			// the next agents would most likely refuse alike, each one
			// more wait and one more line in its audit log (issue 26).
			fail(fmt.Errorf("refused by the agent's policy, not retried on others: %w", last))
			return
		}
		if n+1 < len(cands) {
			r.emit(Event{Subtask: st.ID, State: StateRetrying, Agent: id, Attempt: n + 1, Error: err.Error()})
		}
	}
	if len(cands) == 1 {
		fail(last)
		return
	}
	fail(fmt.Errorf("%d attempts failed; last: %w", len(cands), last))
}

// attempt calls one candidate under the per-attempt timeout.
func (r *run) attempt(ctx context.Context, c candidate, skill string, args json.RawMessage) (json.RawMessage, error) {
	actx, cancel := context.WithTimeout(ctx, r.o.cfg.subtaskTimeout)
	defer cancel()
	out, err := r.o.call.CallSkill(actx, c.addr, skill, args)
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return nil, fmt.Errorf("timed out after %v: %w", r.o.cfg.subtaskTimeout, err)
		}
		return nil, err
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if len(out) > maxResultBytes {
		return nil, fmt.Errorf("result of %d bytes, at most %d kept", len(out), maxResultBytes)
	}
	if !json.Valid(out) {
		return nil, errors.New("the result is not valid JSON")
	}
	return out, nil
}

// candidates finds and ranks the agents for st: a find by skill and by each
// tag (shared with the other subtasks of the run), merged and ranked.
func (r *run) candidates(ctx context.Context, st Subtask) ([]candidate, error) {
	keys := []string{st.Skill}
	seen := map[string]bool{strings.ToLower(st.Skill): true}
	for _, t := range st.Tags {
		if lt := strings.ToLower(strings.TrimSpace(t)); !seen[lt] {
			seen[lt] = true
			keys = append(keys, strings.TrimSpace(t))
		}
	}
	calls := make([]*findCall, len(keys))
	for k, key := range keys {
		calls[k] = r.findShared(ctx, key)
	}
	var (
		found []protocol.FindResult
		errs  []error
	)
	for k, fc := range calls {
		select {
		case <-fc.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if fc.err != nil {
			errs = append(errs, fmt.Errorf("find %q: %w", keys[k], fc.err))
			continue
		}
		found = append(found, fc.found...)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cands := rank(found, st, r.o.cfg.latency)
	if len(cands) == 0 {
		err := fmt.Errorf("no agent found that offers skill %q", st.Skill)
		if len(errs) > 0 {
			err = fmt.Errorf("%w (%w)", err, errors.Join(errs...))
		}
		return nil, err
	}
	return cands, nil
}

// findShared starts the find of key, or joins the one already started in
// this run. The find runs on its own goroutine under the per-subtask
// timeout; the goroutine ends when the find does, which ctx bounds.
func (r *run) findShared(ctx context.Context, key string) *findCall {
	lk := strings.ToLower(key)
	r.findMu.Lock()
	defer r.findMu.Unlock()
	if fc, ok := r.finds[lk]; ok {
		return fc
	}
	fc := &findCall{done: make(chan struct{})}
	r.finds[lk] = fc
	r.findWG.Add(1)
	go func() {
		defer r.findWG.Done()
		defer close(fc.done)
		fctx, cancel := context.WithTimeout(ctx, r.o.cfg.subtaskTimeout)
		defer cancel()
		fc.found, fc.err = r.o.find.Find(fctx, key, r.o.cfg.candidates)
	}()
	return fc
}

// shortID abbreviates a PeerID as 12D3…abcd.
func shortID(id string) string {
	if len(id) <= 12 {
		return id
	}
	return id[:4] + "…" + id[len(id)-4:]
}

// maxShortResult caps a result as the list answer shows it.
const maxShortResult = 200

// listAnswer is the answer without a summarizer: one numbered line per
// part, "1. <text> → <result> (agent 12D3…abcd)", or the reason it failed
// or was skipped.
func listAnswer(parts []SubtaskResult) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		text := oneLine(p.Text, maxShortResult)
		if text == "" {
			text = p.Skill
		}
		fmt.Fprintf(&b, "%d. %s → ", i+1, text)
		switch p.Status {
		case StateDone:
			d := resultData(&p)
			fmt.Fprintf(&b, "%s (agent %s)", oneLine(d["text"].(string), maxShortResult), shortID(p.Agent))
		case StateSkipped:
			fmt.Fprintf(&b, "skipped: %s", oneLine(p.Error, maxShortResult))
		case StateFailed:
			fmt.Fprintf(&b, "failed: %s", oneLine(p.Error, maxShortResult))
		default:
			fmt.Fprintf(&b, "%s", p.Status)
		}
	}
	return b.String()
}

// oneLine collapses the white space of s into single spaces and cuts it to
// n bytes.
func oneLine(s string, n int) string {
	return truncate(strings.Join(strings.Fields(s), " "), n)
}
