package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestDAG runs a → b (b takes a's result through templates) and c
// independent. Barriers make a and c wait for each other, so the run can
// only finish when they overlap; b must start after a ended.
func TestDAG(t *testing.T) {
	m := newMesh()
	aStarted, cStarted := make(chan struct{}), make(chan struct{})
	m.add("alpha", []string{"alpha"}, nil, func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		close(aStarted)
		if err := wait(ctx, cStarted); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"result":"A-out","n":12345678901234567890}`), nil
	})
	m.add("gamma", []string{"gamma"}, nil, func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		close(cStarted)
		if err := wait(ctx, aStarted); err != nil {
			return nil, err
		}
		return json.RawMessage(`"C-out"`), nil
	})
	m.add("beta", []string{"beta"}, nil, answer(map[string]any{"response": "B-out"}))

	p := Plan{Subtasks: []Subtask{
		{ID: "a", Text: "first", Skill: "alpha", Arguments: json.RawMessage(`{"n":1}`)},
		{ID: "b", Text: "second", Skill: "beta", DependsOn: []string{"a"}, Arguments: json.RawMessage(
			`{"x":"got {{.a.text}} from {{.a.skill}}","n":"{{.a.result.n}}","v":"{{json .a.result}}","list":["{{.a.raw}}", 3]}`)},
		{ID: "c", Text: "third", Skill: "gamma"},
	}}
	var evs events
	o := mustNew(t, m, WithConcurrency(2))
	res, err := o.RunPlan(ctxT(t), "do a then b, and c", p, evs.add)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusCompleted {
		t.Fatalf("status %q: %+v", res.Status, res.Subtasks)
	}
	a, b, c := m.callsOf("alpha"), m.callsOf("beta"), m.callsOf("gamma")
	if len(a) != 1 || len(b) != 1 || len(c) != 1 {
		t.Fatalf("calls: a %d, b %d, c %d", len(a), len(b), len(c))
	}
	if b[0].start.Before(a[0].end) {
		t.Errorf("b started %v before a ended", a[0].end.Sub(b[0].start))
	}
	if !(a[0].start.Before(c[0].end) && c[0].start.Before(a[0].end)) {
		t.Errorf("a [%v, %v] and c [%v, %v] do not overlap", a[0].start, a[0].end, c[0].start, c[0].end)
	}
	want := `{"x":"got A-out from alpha","n":"12345678901234567890","v":{"result":"A-out","n":12345678901234567890},
		"list":["{\"result\":\"A-out\",\"n\":12345678901234567890}",3]}`
	if !sameJSON(t, b[0].args, []byte(want)) {
		t.Errorf("b's arguments:\n got %s\nwant %s", b[0].args, want)
	}
	// The big number passed through the json splice unchanged.
	if !strings.Contains(string(b[0].args), `"v":{"n":12345678901234567890,`) {
		t.Errorf("the number lost precision: %s", b[0].args)
	}
	if got := string(res.Subtasks[1].Result); got != `{"response":"B-out"}` {
		t.Errorf("b's result %s", got)
	}

	all := evs.list()
	checkSeq(t, all)
	// b's running event comes after a's done event.
	aDone := slices.IndexFunc(all, func(e Event) bool { return e.Subtask == "a" && e.State == StateDone })
	bRun := slices.IndexFunc(all, func(e Event) bool { return e.Subtask == "b" && e.State == StateRunning })
	if aDone < 0 || bRun < aDone {
		t.Errorf("a done at event %d, b running at %d", aDone, bRun)
	}
	for _, id := range []string{"a", "b", "c"} {
		if got, want := evs.of(id), []State{StatePending, StateAssigning, StateRunning, StateDone}; !slices.Equal(got, want) {
			t.Errorf("%s went through %v, want %v", id, got, want)
		}
	}
	for _, st := range res.Subtasks {
		if st.Attempts != 1 || st.Agent == "" || st.DurationMS <= 0 {
			t.Errorf("%s: %+v", st.ID, st)
		}
	}
	if res.Subtasks[1].StartedMS < res.Subtasks[0].StartedMS+res.Subtasks[0].DurationMS {
		t.Errorf("b started at %.3f ms, before a ended at %.3f ms", res.Subtasks[1].StartedMS, res.Subtasks[0].StartedMS+res.Subtasks[0].DurationMS)
	}
	for _, line := range []string{"1. first → A-out (agent 12D3…", "2. second → B-out (agent", "3. third → C-out (agent"} {
		if !strings.Contains(res.Answer, line) {
			t.Errorf("answer lacks %q:\n%s", line, res.Answer)
		}
	}
}

// TestFailover: the first candidate errors, the second answers.
func TestFailover(t *testing.T) {
	m := newMesh()
	// bad ranks first: its tag matches the subtask's tag.
	bad := m.add("bad", []string{"echo"}, []string{"fast"}, failWith(errors.New("disk on fire")))
	good := m.add("good", []string{"echo"}, nil, answer("pong"))
	var evs events
	res, err := mustNew(t, m).RunPlan(ctxT(t), "echo", Plan{Subtasks: []Subtask{
		{ID: "e", Text: "echo please", Skill: "echo", Tags: []string{"fast"}},
	}}, evs.add)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Subtasks[0]
	if st.Status != StateDone || st.Attempts != 2 || st.Agent != good || !slices.Equal(st.Tried, []string{bad, good}) {
		t.Fatalf("got %+v\nwant done after 2 attempts, tried [bad good] = [%s %s]", st, bad, good)
	}
	if res.Status != StatusCompleted {
		t.Errorf("status %q", res.Status)
	}
	want := []State{StatePending, StateAssigning, StateRunning, StateRetrying, StateRunning, StateDone}
	if got := evs.of("e"); !slices.Equal(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
	for _, ev := range evs.list() {
		if ev.State == StateRetrying && (ev.Agent != bad || ev.Attempt != 1 || !strings.Contains(ev.Error, "disk on fire")) {
			t.Errorf("retrying event %+v", ev)
		}
	}
	// The find by the tag was made too (fast), once each.
	if m.finds["echo"] != 1 || m.finds["fast"] != 1 {
		t.Errorf("finds %v", m.finds)
	}
}

// TestNoRetryOnInvalidParams: the caller's fault is not tried elsewhere.
func TestNoRetryOnInvalidParams(t *testing.T) {
	m := newMesh()
	first := m.add("strict", []string{"echo"}, []string{"fast"}, failWith(protocol.Errorf(protocol.CodeInvalidParams, "want a number")))
	m.add("other", []string{"echo"}, nil, answer("pong"))
	res, err := mustNew(t, m).RunPlan(ctxT(t), "echo", Plan{Subtasks: []Subtask{
		{ID: "e", Text: "echo", Skill: "echo", Tags: []string{"fast"}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Subtasks[0]
	if st.Status != StateFailed || st.Attempts != 1 || !slices.Equal(st.Tried, []string{first}) || !strings.Contains(st.Error, "want a number") {
		t.Fatalf("got %+v", st)
	}
	if res.Status != StatusFailed || !strings.Contains(res.Answer, "1. echo → failed: the arguments were refused") {
		t.Errorf("status %q answer %q", res.Status, res.Answer)
	}
}

// TestAttemptsBoundedAndTimeout: each attempt times out on its own, at most
// WithMaxAttempts candidates are tried.
func TestAttemptsBoundedAndTimeout(t *testing.T) {
	m := newMesh()
	hang := func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	for _, n := range []string{"h1", "h2", "h3", "h4"} {
		m.add(n, []string{"slow"}, nil, hang)
	}
	o := mustNew(t, m, WithSubtaskTimeout(30*time.Millisecond), WithMaxAttempts(3))
	start := time.Now()
	res, err := o.RunPlan(ctxT(t), "slow", Plan{Subtasks: []Subtask{{ID: "s", Skill: "slow"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Subtasks[0]
	if st.Status != StateFailed || st.Attempts != 3 || len(st.Tried) != 3 || len(m.callsOf("slow")) != 3 {
		t.Fatalf("got %+v, %d calls", st, len(m.callsOf("slow")))
	}
	if !strings.Contains(st.Error, "3 attempts failed") || !strings.Contains(st.Error, "timed out after 30ms") {
		t.Errorf("error %q", st.Error)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestSkippedAndFiltered: a subtask nobody offers fails (an agent found by
// the tag that does not offer the skill is never called), its dependents are
// skipped, the rest runs.
func TestSkippedAndFiltered(t *testing.T) {
	m := newMesh()
	m.add("ok", []string{"echo"}, nil, answer("pong"))
	// Tagged "rare" but offers "other", not "rare-skill".
	decoy := m.add("decoy", []string{"other"}, []string{"rare"}, answer("wrong"))
	var evs events
	res, err := mustNew(t, m).RunPlan(ctxT(t), "mixed", Plan{Subtasks: []Subtask{
		{ID: "x", Text: "the rare part", Skill: "rare-skill", Tags: []string{"rare"}},
		{ID: "y", Skill: "echo", DependsOn: []string{"x"}},
		{ID: "z", Skill: "echo", DependsOn: []string{"y"}},
		{ID: "w", Skill: "echo"},
	}}, evs.add)
	if err != nil {
		t.Fatal(err)
	}
	want := []State{StateFailed, StateSkipped, StateSkipped, StateDone}
	for i, st := range res.Subtasks {
		if st.Status != want[i] {
			t.Errorf("%s: %s, want %s (%s)", st.ID, st.Status, want[i], st.Error)
		}
	}
	if !strings.Contains(res.Subtasks[0].Error, `no agent found that offers skill "rare-skill"`) {
		t.Errorf("x: %q", res.Subtasks[0].Error)
	}
	if res.Subtasks[1].Error != `dependency "x" failed` || res.Subtasks[2].Error != `dependency "y" skipped` {
		t.Errorf("y: %q, z: %q", res.Subtasks[1].Error, res.Subtasks[2].Error)
	}
	m.mu.Lock()
	for _, c := range m.calls {
		if c.agent == decoy {
			t.Errorf("the decoy was called: %+v", c)
		}
	}
	m.mu.Unlock()
	if res.Status != StatusPartial {
		t.Errorf("status %q", res.Status)
	}
	if got := evs.of("z"); !slices.Equal(got, []State{StatePending, StateSkipped}) {
		t.Errorf("z went through %v", got)
	}
	checkSeq(t, evs.list())
	if !strings.Contains(res.Answer, "3. echo → skipped: dependency \"y\" skipped") {
		t.Errorf("answer:\n%s", res.Answer)
	}
}

// TestFindError: a failing find is reported in the subtask's error.
func TestFindError(t *testing.T) {
	m := newMesh()
	m.findErr = protocol.ErrNoDiscovery
	res, err := mustNew(t, m).RunPlan(ctxT(t), "x", Plan{Subtasks: []Subtask{{ID: "a", Skill: "echo"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := res.Subtasks[0].Error; res.Status != StatusFailed || !strings.Contains(e, protocol.ErrNoDiscovery.Error()) {
		t.Errorf("status %q error %q", res.Status, e)
	}
}

// TestConcurrencyBound: with WithConcurrency(2), a third call never starts
// while two run.
func TestConcurrencyBound(t *testing.T) {
	m := newMesh()
	var active, peak atomic.Int32
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	m.add("w", []string{"work"}, nil, func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		n := active.Add(1)
		defer active.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.RawMessage(`1`), nil
	})
	var sts []Subtask
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		sts = append(sts, Subtask{ID: id, Skill: "work"})
	}
	o := mustNew(t, m, WithConcurrency(2))
	type out struct {
		res Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := o.RunPlan(ctxT(t), "work", Plan{Subtasks: sts}, nil)
		done <- out{r, err}
	}()
	<-started
	<-started
	select {
	case <-started:
		t.Error("a third call started while two were running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	r := <-done
	if r.err != nil || r.res.Status != StatusCompleted {
		t.Fatalf("%v %q", r.err, r.res.Status)
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want 2", p)
	}
}

// TestCancel: cancelling mid-run returns promptly with the partial result,
// leaves no goroutine, and no progress call comes after Run returned.
func TestCancel(t *testing.T) {
	m := newMesh()
	started := make(chan struct{}, 4)
	m.add("quick", []string{"quick"}, nil, answer("fast"))
	m.add("hang", []string{"hang"}, nil, func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var returned atomic.Bool
	var late atomic.Int32
	var evs events
	progress := func(e Event) {
		if returned.Load() {
			late.Add(1)
		}
		evs.add(e)
	}
	go func() {
		<-started
		<-started
		cancel()
	}()
	o := mustNew(t, m, WithSubtaskTimeout(time.Minute))
	begin := time.Now()
	res, err := o.RunPlan(ctx, "hang twice", Plan{Subtasks: []Subtask{
		{ID: "q", Skill: "quick"},
		{ID: "h1", Skill: "hang", DependsOn: []string{"q"}},
		{ID: "h2", Skill: "hang"},
		{ID: "after", Skill: "quick", DependsOn: []string{"h1"}},
	}}, progress)
	returned.Store(true)
	took := time.Since(begin)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if took > 2*time.Second {
		t.Errorf("Run took %v after the cancel", took)
	}
	want := map[string]State{"q": StateDone, "h1": StateFailed, "h2": StateFailed, "after": StateSkipped}
	for _, st := range res.Subtasks {
		if st.Status != want[st.ID] {
			t.Errorf("%s: %s, want %s (%s)", st.ID, st.Status, want[st.ID], st.Error)
		}
	}
	if res.Status != StatusPartial || res.Request != "hang twice" || len(res.Plan.Subtasks) != 4 {
		t.Errorf("result %+v", res)
	}
	if res.Subtasks[1].Attempts != 1 {
		t.Errorf("h1 was retried after the cancel: %+v", res.Subtasks[1])
	}
	checkSeq(t, evs.list())
	// Once no goroutine of Run is left (goleak waits for them to end), no
	// progress call can still come: count the late ones then.
	goleak.VerifyNone(t)
	if n := late.Load(); n != 0 {
		t.Errorf("%d progress calls after Run returned", n)
	}
}

// TestCancelledBeforeStart: a context already done fails every subtask
// without calling anyone.
func TestCancelledBeforeStart(t *testing.T) {
	m := newMesh()
	m.add("a", []string{"echo"}, nil, answer("x"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := mustNew(t, m).Run(ctx, "what is 2 plus 2", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if len(m.callsOf("echo")) != 0 || len(res.Subtasks) != 1 || res.Subtasks[0].Status != StateFailed {
		t.Errorf("result %+v", res)
	}
}

// TestRunHeuristic runs the acceptance sentence end to end over the fakes,
// with a summarizer.
func TestRunHeuristic(t *testing.T) {
	m := newMesh()
	var mu sync.Mutex
	got := map[string]string{}
	rec := func(v any) handler {
		return func(_ context.Context, skill string, args json.RawMessage) (json.RawMessage, error) {
			mu.Lock()
			got[skill] = string(args)
			mu.Unlock()
			return json.Marshal(v)
		}
	}
	m.add("calc", []string{"calculator"}, []string{"math"}, rec(map[string]any{"result": 42}))
	m.add("wx", []string{"weather"}, []string{"weather"}, rec(map[string]any{"city": "Tokyo", "temperature": 18}))
	m.add("db", []string{"database_query"}, []string{"database"}, rec(map[string]any{"count": 7}))
	sum := summarizerFunc(func(_ context.Context, req string, parts []SubtaskResult) (string, error) {
		return "summary of " + req + " in " + string(rune('0'+len(parts))) + " parts", nil
	})
	o := mustNew(t, m, WithSummarizer(sum))
	req := "what is 7 times 6, what is the weather in Tokyo, and how many engineers are in Platform"
	res, err := o.Run(ctxT(t), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusCompleted || res.Plan.Source != SourceHeuristic || res.Answer != "summary of "+req+" in 3 parts" {
		t.Fatalf("%q %q %q", res.Status, res.Plan.Source, res.Answer)
	}
	if !sameJSON(t, []byte(got["calculator"]), []byte(`{"operation":"multiply","a":7,"b":6}`)) {
		t.Errorf("calculator got %s", got["calculator"])
	}
	if !sameJSON(t, []byte(got["weather"]), []byte(`{"city":"Tokyo"}`)) {
		t.Errorf("weather got %s", got["weather"])
	}
	// A failing summarizer leaves the list answer.
	o = mustNew(t, m, WithSummarizer(summarizerFunc(func(context.Context, string, []SubtaskResult) (string, error) {
		return "", errors.New("no")
	})))
	res, err = o.Run(ctxT(t), req, nil)
	if err != nil || !strings.HasPrefix(res.Answer, "1. what is 7 times 6 → 42 (agent ") {
		t.Errorf("%v %q", err, res.Answer)
	}
}

type summarizerFunc func(context.Context, string, []SubtaskResult) (string, error)

func (f summarizerFunc) Summarize(ctx context.Context, r string, p []SubtaskResult) (string, error) {
	return f(ctx, r, p)
}

// TestRunRefuses: bad requests, bad plans and bad options.
func TestRunRefuses(t *testing.T) {
	m := newMesh()
	o := mustNew(t, m)
	for _, req := range []string{"", "   ", strings.Repeat("x", MaxRequestBytes+1), "\xff"} {
		if _, err := o.Run(ctxT(t), req, nil); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("request %.20q: %v", req, err)
		}
	}
	if _, err := o.RunPlan(ctxT(t), "x", Plan{}, nil); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("empty plan: %v", err)
	}
	if _, err := o.Run(ctxT(t), "?!...", nil); err == nil || !strings.Contains(err.Error(), "no clause") {
		t.Errorf("no clause: %v", err)
	}
	if _, err := New(nil, m); err == nil {
		t.Error("nil Finder accepted")
	}
	for _, opt := range []Option{WithConcurrency(0), WithConcurrency(65), WithSubtaskTimeout(0), WithSubtaskTimeout(2 * time.Hour),
		WithMaxAttempts(0), WithMaxAttempts(17), WithCandidates(0), WithCandidates(65)} {
		if _, err := New(m, m, opt); err == nil {
			t.Error("a bad option was accepted")
		}
	}
	if _, err := New(m, m, WithPlanner(nil), WithLogger(nil), WithSummarizer(nil), WithLatency(nil), nil); err != nil {
		t.Errorf("nil options: %v", err)
	}
}

// TestAuthorizeBeforeAssign: a subtask whose skill the caller may not run
// is refused by WithAuthorize before any find or call: its result carries
// the refusal's code, and the mesh sees no find for its skill or tags;
// the permitted subtask runs.
func TestAuthorizeBeforeAssign(t *testing.T) {
	m := newMesh()
	m.add("alpha", []string{"alpha", "secret"}, []string{"t"}, answer("ok"))
	var asked atomic.Int32
	o := mustNew(t, m, WithAuthorize(func(_ context.Context, skill string) error {
		asked.Add(1)
		if skill == "secret" {
			return protocol.Errorf(protocol.CodeNotPermitted, "not permitted: %q", skill)
		}
		return nil
	}))
	p := Plan{Subtasks: []Subtask{
		{ID: "a", Text: "allowed", Skill: "alpha"},
		{ID: "s", Text: "refused", Skill: "secret", Tags: []string{"hidden-tag"}},
		{ID: "d", Text: "after the refused one", Skill: "alpha", DependsOn: []string{"s"}},
	}}
	res, err := o.RunPlan(ctxT(t), "x", p, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Subtasks[1]
	if s.Status != StateFailed || s.Code != protocol.CodeNotPermitted || !strings.Contains(s.Error, "-32009") || s.Attempts != 0 {
		t.Fatalf("refused subtask: %+v", s)
	}
	if res.Subtasks[0].Status != StateDone || res.Subtasks[2].Status != StateSkipped || asked.Load() != 2 {
		t.Fatalf("subtasks %+v, authorize asked %d times", res.Subtasks, asked.Load())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.finds["secret"] != 0 || m.finds["hidden-tag"] != 0 || m.finds["alpha"] != 1 {
		t.Fatalf("finds %v: a refused subtask's skill or tag was sought", m.finds)
	}
	if len(m.calls) != 1 {
		t.Fatalf("calls %+v", m.calls)
	}
}

// TestFindRefusalCode: a find refused with a *protocol.Error (the caller's
// find budget) fails its subtask with that code, at once.
func TestFindRefusalCode(t *testing.T) {
	m := newMesh()
	m.add("alpha", []string{"alpha"}, nil, answer("ok"))
	m.findErr = protocol.Errorf(protocol.CodeRateLimited, "rate limited: find budget")
	res, err := mustNew(t, m).RunPlan(ctxT(t), "x", Plan{Subtasks: []Subtask{{ID: "a", Text: "x", Skill: "alpha"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := res.Subtasks[0]; st.Status != StateFailed || st.Code != protocol.CodeRateLimited || !strings.Contains(st.Error, "find budget") {
		t.Fatalf("subtask %+v", st)
	}
}

// TestNoRetryOnRefusal: a refusal by the agent's policy (-32009) is final,
// not tried on the other agents that offer the skill (issue 26: it was
// retried on three); the code is kept. Another failure still fails over.
func TestNoRetryOnRefusal(t *testing.T) {
	m := newMesh()
	refuse := failWith(protocol.Errorf(protocol.CodeNotPermitted, "not permitted: skill \"weather\" is not granted"))
	first := m.add("a1", []string{"weather"}, []string{"fast"}, refuse)
	m.add("a2", []string{"weather"}, nil, refuse)
	m.add("a3", []string{"weather"}, nil, refuse)
	ev := &events{}
	res, err := mustNew(t, m).RunPlan(ctxT(t), "weather", Plan{Subtasks: []Subtask{
		{ID: "w", Text: "weather in Tokyo", Skill: "weather", Tags: []string{"fast"}},
	}}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Subtasks[0]
	if st.Status != StateFailed || st.Attempts != 1 || !slices.Equal(st.Tried, []string{first}) || st.Code != protocol.CodeNotPermitted ||
		!strings.Contains(st.Error, "refused by the agent's policy, not retried on others") {
		t.Fatalf("got %+v", st)
	}
	if n := len(m.callsOf("weather")); n != 1 {
		t.Errorf("%d calls of weather, want 1", n)
	}
	if states := ev.of("w"); slices.Contains(states, StateRetrying) {
		t.Errorf("states %v: retried after a refusal", states)
	}
	if strings.Contains(res.Answer, "3 attempts failed") {
		t.Errorf("answer %q: the refusal was retried", res.Answer)
	}

	// A skill that fails (-32003) on the first agent is tried on the next.
	m = newMesh()
	m.add("b1", []string{"weather"}, []string{"fast"}, failWith(protocol.Errorf(protocol.CodeSkillExecution, "upstream down")))
	ok := m.add("b2", []string{"weather"}, nil, answer("sunny"))
	res, err = mustNew(t, m).RunPlan(ctxT(t), "weather", Plan{Subtasks: []Subtask{
		{ID: "w", Text: "weather in Tokyo", Skill: "weather", Tags: []string{"fast"}},
	}}, nil)
	if err != nil || res.Subtasks[0].Status != StateDone || res.Subtasks[0].Agent != ok || res.Subtasks[0].Attempts != 2 {
		t.Fatalf("failover after -32003: %v %+v", err, res.Subtasks)
	}
}
