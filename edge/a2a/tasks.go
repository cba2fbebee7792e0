package a2a

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpv2/mcpv2/protocol"
)

// run is a running task: how to cancel it and who listens. Its fields are
// guarded by Face.mu.
type run struct {
	owner  string
	cancel context.CancelFunc
	subs   map[chan Event]bool
	done   chan struct{} // closed when the task has reached its last state
}

// call is what a message asks of the node: one skill with its arguments.
type call struct {
	Skill string          `json:"skill"`
	Args  json.RawMessage `json:"arguments"`
}

// callMeta is the task metadata key of the call a task runs, kept while
// the task waits for input, for the message that answers it.
const callMeta = "mcpv2/call"

// withheldMeta marks the one part that stands for a message's parts the
// store did not keep (withheld).
const withheldMeta = "mcpv2/withheld"

// maxContextID caps a client's contextId, as decodeMessage caps a
// messageId: it is stored with the task and each of its events.
const maxContextID = 256

// maxProgressText caps the text of one progress report a task keeps.
const maxProgressText = 512

// maxSkillName caps the skill a data part names: a refusal quotes it, and
// the task keeps the refusal.
const maxSkillName = 256

// Authorizer is what a Backend may also offer (*node.Node does): the
// node's one authorization rule asked ahead of a call — may c run skill
// now? — with nothing run and nothing audited. The face asks it before it
// stores a message, so that the body of a task the node will refuse is
// never written; Handle still decides the call itself.
type Authorizer interface {
	Authorize(c protocol.Caller, skill string) *protocol.Error
}

// refusal is whether the node would refuse calls as c (Authorizer), and
// why; nil when it would run them, or cannot say.
func (f *Face) refusal(c protocol.Caller, calls []call) *protocol.Error {
	a, ok := f.b.(Authorizer)
	if !ok {
		return nil
	}
	for _, cl := range calls {
		if perr := a.Authorize(c, cl.Skill); perr != nil {
			return perr
		}
	}
	return nil
}

// refused says whether perr refuses a call rather than reports its failure:
// the message that asked for it is then not kept (withheld).
func refused(perr *protocol.Error) bool {
	return perr != nil && (perr.Code == protocol.CodeNotPermitted || perr.Code == protocol.CodeSkillNotFound)
}

// withheld is m as the store keeps it when the node refused what it asks:
// its IDs and role, and in place of its parts and metadata one text part
// that says what was dropped. A refused task records the refusal, not the
// caller's bytes.
func withheld(m Message, perr *protocol.Error) Message {
	if len(m.Parts) == 1 && m.Parts[0].Metadata[withheldMeta] != nil {
		return m
	}
	b, _ := json.Marshal(m.Parts)
	mb, _ := json.Marshal(m.Metadata)
	text := fmt.Sprintf("(not kept: this node refused the message, error %d; its %d parts and metadata, %d bytes, were dropped)", perr.Code, len(m.Parts), len(b)+len(mb))
	m.Parts = []Part{{Text: &text, Metadata: map[string]any{withheldMeta: len(b) + len(mb)}}}
	m.Metadata = nil
	return m
}

// withholdLast returns h with its last message withheld (a new slice:
// another snapshot of the task may share h).
func withholdLast(h []Message, perr *protocol.Error) []Message {
	if len(h) == 0 {
		return h
	}
	out := slices.Clone(h)
	out[len(out)-1] = withheld(out[len(out)-1], perr)
	return out
}

// storedEvent is an event as the store keeps it: a task event names how
// many of the task's messages and artifacts it held, and an artifact event
// which artifact it brought, rather than copying them; the store holds
// each message and artifact once, in the task. Events stored before
// carry no Ref and are whole.
type storedEvent struct {
	Task     *Task          `json:"task,omitempty"`
	Status   *StatusEvent   `json:"status,omitempty"`
	Artifact *ArtifactEvent `json:"artifact,omitempty"`
	Ref      *eventRef      `json:"ref,omitempty"`
}

// eventRef is what a stored event takes from its task.
type eventRef struct {
	// History and Artifacts: a task event's first messages and artifacts.
	History   int `json:"history,omitempty"`
	Artifacts int `json:"artifacts,omitempty"`
	// Artifact: an artifact event's artifact, numbered from 1.
	Artifact int `json:"artifact,omitempty"`
}

// storeForm is ev as the store keeps it, t the task as it is saved with it.
func storeForm(ev Event, t *Task) storedEvent {
	switch {
	case ev.Task != nil:
		head := Task{ID: ev.Task.ID, ContextID: ev.Task.ContextID, Status: ev.Task.Status, Metadata: ev.Task.Metadata}
		return storedEvent{Task: &head, Ref: &eventRef{History: len(ev.Task.History), Artifacts: len(ev.Task.Artifacts)}}
	case ev.Artifact != nil:
		for i := len(t.Artifacts) - 1; i >= 0; i-- {
			if t.Artifacts[i].ArtifactID == ev.Artifact.Artifact.ArtifactID {
				a := *ev.Artifact
				a.Artifact = Artifact{ArtifactID: a.Artifact.ArtifactID}
				return storedEvent{Artifact: &a, Ref: &eventRef{Artifact: i + 1}}
			}
		}
	}
	return storedEvent{Task: ev.Task, Status: ev.Status, Artifact: ev.Artifact}
}

// eventFrom reads a stored event, taking what it names from t, the task as
// it is now (read after the event: a task only grows).
func eventFrom(raw json.RawMessage, t Task) (Event, bool) {
	var se storedEvent
	if json.Unmarshal(raw, &se) != nil {
		return Event{}, false
	}
	ev := Event{Task: se.Task, Status: se.Status, Artifact: se.Artifact}
	if r := se.Ref; r != nil {
		switch {
		case ev.Task != nil:
			ev.Task.History = t.History[:min(r.History, len(t.History))]
			ev.Task.Artifacts = t.Artifacts[:min(r.Artifacts, len(t.Artifacts))]
		case ev.Artifact != nil && r.Artifact >= 1 && r.Artifact <= len(t.Artifacts):
			ev.Artifact.Artifact = t.Artifacts[r.Artifact-1]
		}
	}
	return ev, ev.Task != nil || ev.Status != nil || ev.Artifact != nil
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// callsOf reads what a message asks: a data part {"skill", "arguments"}
// runs that skill; else file parts are stored (upload_file); else the text
// parts go to ask. A message that answers an input-required task may carry
// only {"arguments"}, merged into the task's call.
func callsOf(m Message, prev *call) ([]call, *rpcError) {
	for _, p := range m.Parts {
		d, ok := p.Data.(map[string]any)
		if !ok {
			continue
		}
		skill, _ := d["skill"].(string)
		args, hasArgs := d["arguments"]
		if skill == "" && prev != nil && hasArgs {
			skill = prev.Skill
			merged := map[string]any{}
			_ = json.Unmarshal(prev.Args, &merged)
			if am, ok := args.(map[string]any); ok {
				for k, v := range am {
					merged[k] = v
				}
			}
			args = merged
		}
		if skill == "" {
			return nil, rpcErrf(protocol.CodeInvalidParams, `invalid params: a data part must be {"skill": NAME, "arguments": {…}}`)
		}
		if len(skill) > maxSkillName {
			return nil, rpcErrf(protocol.CodeInvalidParams, "invalid params: a skill name is at most %d bytes", maxSkillName)
		}
		if args == nil {
			args = map[string]any{}
		}
		if _, ok := args.(map[string]any); !ok {
			return nil, rpcErrf(protocol.CodeInvalidParams, "invalid params: the arguments of %q must be an object", protocol.Clip(skill, 64))
		}
		b, _ := json.Marshal(args)
		return []call{{Skill: skill, Args: b}}, nil
	}
	var calls []call
	var text []string
	for _, p := range m.Parts {
		switch {
		case p.File != nil && p.File.URI != "":
			return nil, rpcErrf(codeContentType, "content type not supported: a file by URI (%s); send the file's bytes", protocol.Clip(p.File.URI, 100))
		case p.File != nil:
			name := p.File.Name
			if name == "" {
				name = "upload-" + newID()[:8]
			}
			b, _ := json.Marshal(map[string]string{"filename": name, "content": base64.StdEncoding.EncodeToString(p.File.Bytes), "encoding": "base64"})
			calls = append(calls, call{Skill: "upload_file", Args: b})
		case p.Text != nil:
			text = append(text, *p.Text)
		}
	}
	if len(calls) > 0 {
		return calls, nil
	}
	if q := strings.TrimSpace(strings.Join(text, "\n")); q != "" {
		b, _ := json.Marshal(map[string]string{"query": q})
		return []call{{Skill: "ask", Args: b}}, nil
	}
	return nil, rpcErrf(protocol.CodeInvalidParams, "invalid params: the message has no text, data or file to act on")
}

// send serves SendMessage and SendStreamingMessage (message/send,
// message/stream): a new task, or the next turn of an input-required one.
func (f *Face) send(q *req, params json.RawMessage, stream bool) {
	var p struct {
		Tenant        string          `json:"tenant"`
		Message       json.RawMessage `json:"message"`
		Configuration struct {
			ReturnImmediately bool  `json:"returnImmediately"`
			Blocking          *bool `json:"blocking"`
			HistoryLength     *int  `json:"historyLength"`
			// the webhook to notify of the task's events (push.go)
			PushV1  json.RawMessage `json:"taskPushNotificationConfig"`
			PushV03 json.RawMessage `json:"pushNotificationConfig"`
		} `json:"configuration"`
		Metadata map[string]any `json:"metadata"`
	}
	if e := decodeParams(params, &p); e != nil {
		q.fail(e)
		return
	}
	if len(p.Message) == 0 {
		q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: message is missing"))
		return
	}
	m, err := decodeMessage(p.Message)
	if err != nil {
		q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: %v", err))
		return
	}
	if m.Role != "user" {
		q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: a client sends messages with role user"))
		return
	}
	if len(m.ContextID) > maxContextID {
		q.fail(rpcErrf(protocol.CodeInvalidParams, "invalid params: message.contextId is longer than %d bytes", maxContextID))
		return
	}
	var t Task
	var prev *call
	fresh := m.TaskID == "" // a new task, not the next turn of one
	if !fresh {
		var e *rpcError
		if t, _, e = q.load(m.TaskID); e != nil {
			q.fail(e)
			return
		}
		if t.Status.State != StateInputRequired {
			q.fail(rpcErrf(codeUnsupportedOp, "unsupported operation: task %q is %s; only an input-required task takes another message", t.ID, t.Status.State))
			return
		}
		if raw, ok := t.Metadata[callMeta]; ok {
			b, _ := json.Marshal(raw)
			var c call
			if json.Unmarshal(b, &c) == nil {
				prev = &c
			}
		}
	} else {
		t = Task{ID: newID(), ContextID: m.ContextID}
		if t.ContextID == "" {
			t.ContextID = newID()
		}
	}
	calls, e := f.callsOf(m, prev)
	if e != nil {
		q.fail(e)
		return
	}
	m.TaskID, m.ContextID = t.ID, t.ContextID
	if perr := f.refusal(q.c, calls); perr != nil {
		m = withheld(m, perr) // the node will refuse it: its body is never stored
	}
	t.History = append(t.History, m)
	delete(t.Metadata, callMeta) // the call runs now; it is kept again if it waits for input
	t.Status = Status{State: StateSubmitted, Timestamp: time.Now().UTC()}
	// A webhook given with the message is set before the task runs, so
	// that it hears every event, the first too.
	pc, e := q.sendPush(p.Configuration.PushV1, p.Configuration.PushV03, t.ID)
	if e != nil {
		q.fail(e)
		return
	}
	if pc != nil {
		if e := f.setPush(q, pc); e != nil {
			q.fail(e)
			return
		}
	}
	ch, first, rerr := f.start(q.ctx, t, q.owner, q.c, calls)
	if rerr != nil {
		if pc != nil && fresh { // the task was not made: nor is its webhook kept
			_, _ = f.push.store.DeletePushConfig(t.ID, pc.ID)
		}
		q.fail(rerr)
		return
	}
	defer f.unwatch(t.ID, ch)
	if stream {
		q.audit(nil)
		s := q.startStream()
		if s.send(first) != nil {
			return
		}
		_ = follow(q.ctx, ch, first.Seq, s.send, s.ping)
		return
	}
	if !p.Configuration.ReturnImmediately && (p.Configuration.Blocking == nil || *p.Configuration.Blocking) {
		// Blocking (the default): wait for a terminal or interrupted state.
	wait:
		for {
			select {
			case ev, ok := <-ch:
				if !ok || ev.ends() {
					break wait
				}
			case <-q.ctx.Done():
				return
			}
		}
	}
	t, _, e = q.load(t.ID)
	if e != nil {
		q.fail(e)
		return
	}
	hl := -1
	if p.Configuration.HistoryLength != nil {
		hl = max(*p.Configuration.HistoryLength, 0)
	}
	if q.v == "1.0" {
		q.reply(map[string]any{"task": t.v1(hl, true)})
		return
	}
	q.reply(t.v03(hl))
}

// storeRefusal is the A2A error of a refusal by the task store that the
// caller can act on (a *protocol.Error: a cap, or the store's quota error,
// whose numbers make it errQuota), its message followed by hint; nil for
// any other error.
func storeRefusal(err error, hint string) *rpcError {
	var perr *protocol.Error
	if !errors.As(err, &perr) {
		return nil
	}
	kind := errPlain
	if d, ok := perr.Data.(map[string]any); ok && d["quota"] != nil { // store.QuotaError's data
		kind = errQuota
	}
	return &rpcError{Code: perr.Code, Data: perr.Data, kind: kind, Message: perr.Message + hint}
}

// start saves the task in its submitted state and starts running calls,
// with a subscription that sees every event after that first one.
func (f *Face) start(reqCtx context.Context, t Task, owner string, c protocol.Caller, calls []call) (chan Event, Event, *rpcError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, Event{}, rpcErrf(protocol.CodeInternal, "internal error: the agent is stopping")
	}
	if len(f.runs) >= f.maxRunning {
		return nil, Event{}, busyErrf("busy: this agent runs %d tasks at once, its most; retry later", f.maxRunning)
	}
	mine := 0
	for _, r := range f.runs {
		if r.owner == owner {
			mine++
		}
	}
	if mine >= maxRunningPerCaller {
		return nil, Event{}, busyErrf("busy: you run %d tasks here at once, the most one caller may; wait for one to end, or cancel one", maxRunningPerCaller)
	}
	snap := t
	first, err := f.save(&snap, owner, Event{Task: &snap})
	if err != nil {
		return nil, Event{}, err
	}
	// The run outlives the request, but stays in its trace: its calls are
	// children of the edge's span of the request that started it.
	ctx, cancel := context.WithCancel(trace.ContextWithSpanContext(f.ctx, trace.SpanContextFromContext(reqCtx)))
	r := &run{owner: owner, cancel: cancel, subs: map[chan Event]bool{}, done: make(chan struct{})}
	ch := make(chan Event, subBuffer)
	r.subs[ch] = true
	f.runs[t.ID] = r
	f.wg.Add(1)
	go f.exec(ctx, r, t, owner, c, calls)
	return ch, first, nil
}

// save stores t (in its current state) with the event ev and returns ev
// with its sequence number. It does not publish.
func (f *Face) save(t *Task, owner string, ev Event) (Event, *rpcError) {
	tb, err := json.Marshal(t)
	if err != nil {
		return ev, rpcErrf(protocol.CodeInternal, "internal error")
	}
	eb, err := json.Marshal(storeForm(ev, t))
	if err != nil {
		return ev, rpcErrf(protocol.CodeInternal, "internal error")
	}
	seq, err := f.b.SaveTask(protocol.StoredTask{ID: t.ID, ContextID: t.ContextID, Owner: owner, State: string(t.Status.State),
		Final: t.Status.State.Terminal(), Task: tb, Trusted: owner == f.ownerPrefix+protocol.OwnerSecret}, eb)
	if e := storeRefusal(err, "; a task keeps its messages and results until it expires, and one caller's finished tasks are dropped, oldest first, to make room for its new ones, but not its unfinished ones: cancel one, or send less"); e != nil {
		f.log.Debug("a2a: save task", "id", t.ID, "err", err)
		return ev, e
	}
	if err != nil {
		f.log.Error("a2a: save task", "id", t.ID, "err", err)
		return ev, rpcErrf(protocol.CodeInternal, "internal error: the task could not be saved")
	}
	if ev.Task != nil || (ev.Status != nil && !ev.progress) { // a new task, or a change of state
		f.metrics.entered(t.Status.State)
	}
	ev.Seq = seq
	if f.push != nil {
		f.push.notify(t, ev) // queued: a webhook never holds up the task
	}
	return ev, nil
}

// emit saves and publishes one event of a running task; an event that
// could not be saved is not published.
func (f *Face) emit(r *run, t *Task, owner string, ev Event) *rpcError {
	ev, err := f.save(t, owner, ev)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range r.subs {
		select {
		case ch <- ev:
		default: // behind: its stream ends; the client resubscribes
			delete(r.subs, ch)
			close(ch)
		}
	}
	return nil
}

// watch subscribes to the running task id; ch is nil when it does not run.
func (f *Face) watch(id string) (chan Event, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return nil, func() {}
	}
	ch := make(chan Event, subBuffer)
	r.subs[ch] = true
	return ch, func() { f.unwatch(id, ch) }
}

func (f *Face) unwatch(id string, ch chan Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.runs[id]; ok && r.subs[ch] {
		delete(r.subs, ch)
		close(ch)
	}
}

// exec runs a task's calls through the node's dispatch as c, and records
// its states: working, then completed with an artifact per call, or
// input-required when a skill lacks arguments, rejected when c may not run
// it, failed when it fails, canceled when canceled.
func (f *Face) exec(ctx context.Context, r *run, t Task, owner string, c protocol.Caller, calls []call) {
	defer f.wg.Done()
	status := func(st State, text string, data any) Event {
		s := Status{State: st, Timestamp: time.Now().UTC()}
		if text != "" || data != nil {
			msg := Message{MessageID: newID(), ContextID: t.ContextID, TaskID: t.ID, Role: "agent"}
			if text != "" {
				msg.Parts = append(msg.Parts, Part{Text: &text})
			}
			if data != nil {
				msg.Parts = append(msg.Parts, Part{Data: data})
			}
			s.Message = &msg
		}
		t.Status = s
		return Event{Status: &StatusEvent{TaskID: t.ID, ContextID: t.ContextID, Status: s}}
	}
	finish := func(ev Event) {
		_ = f.emit(r, &t, owner, ev) // a save that ends a task is not refused for its size
		f.mu.Lock()
		delete(f.runs, t.ID)
		for ch := range r.subs {
			close(ch)
		}
		r.subs = nil
		close(r.done)
		f.mu.Unlock()
	}
	_ = f.emit(r, &t, owner, status(StateWorking, "", nil))
	// A skill that reports progress (orchestrate: each subtask's state)
	// makes a working status with the report, saved and published as
	// every event of the task. mu keeps the reports apart from each other
	// and from the task's own events; late is set once the call returned,
	// and a report after it is dropped.
	var mu sync.Mutex
	late := false
	report := func(text string, data any) {
		mu.Lock()
		defer mu.Unlock()
		if late || ctx.Err() != nil {
			return
		}
		ev := status(StateWorking, protocol.Clip(text, maxProgressText), data)
		ev.progress = true
		_ = f.emit(r, &t, owner, ev)
	}
	for i, cl := range calls {
		res, perr := f.call(protocol.WithProgress(ctx, report), c, cl)
		mu.Lock()
		late = i == len(calls)-1
		mu.Unlock()
		switch {
		case ctx.Err() != nil:
			finish(status(StateCanceled, "canceled", nil))
			return
		case perr != nil && perr.Code == protocol.CodeInvalidParams && missingArgs(perr.Message):
			t.Metadata = maps.Clone(t.Metadata) // the first event's snapshot shares the map
			if t.Metadata == nil {
				t.Metadata = map[string]any{}
			}
			t.Metadata[callMeta] = cl
			finish(status(StateInputRequired, fmt.Sprintf("%s needs more: %s. Send a message to this task with a data part {\"arguments\": {…}}.", cl.Skill, perr.Message),
				map[string]any{"error": perr}))
			return
		case perr != nil && perr.Code == protocol.CodeNotPermitted:
			t.History = withholdLast(t.History, perr)
			finish(status(StateRejected, perr.Message, map[string]any{"error": perr}))
			return
		case perr != nil:
			if refused(perr) {
				t.History = withholdLast(t.History, perr)
			}
			finish(status(StateFailed, fmt.Sprintf("%s failed: error %d: %s", cl.Skill, perr.Code, perr.Message), map[string]any{"error": perr}))
			return
		}
		a := Artifact{ArtifactID: fmt.Sprintf("%s-%d", t.ID[:8], i+1), Name: cl.Skill, Parts: resultParts(res)}
		t.Artifacts = append(t.Artifacts, a)
		if e := f.emit(r, &t, owner, Event{Artifact: &ArtifactEvent{TaskID: t.ID, ContextID: t.ContextID, Artifact: a}}); e != nil {
			t.Artifacts = t.Artifacts[:len(t.Artifacts)-1]
			finish(status(StateFailed, fmt.Sprintf("%s ran, but its result could not be kept: error %d: %s", cl.Skill, e.Code, e.Message), nil))
			return
		}
	}
	finish(status(StateCompleted, "", nil))
}

// missingArgs says whether a -32602 message is about arguments that are
// missing (input the caller can still give) rather than wrong.
func missingArgs(msg string) bool {
	return strings.Contains(msg, "missing properties") || strings.Contains(msg, "required")
}

// resultParts are an artifact's parts for a skill's result: the result as
// data and, when it carries an answer text (ask's response), that text.
func resultParts(res json.RawMessage) []Part {
	var v any
	_ = json.Unmarshal(res, &v)
	parts := []Part{{Data: v}}
	if m, ok := v.(map[string]any); ok {
		for _, k := range []string{"response", "text", "result", "answer"} {
			if s, ok := m[k].(string); ok && s != "" {
				parts = append([]Part{{Text: &s}}, parts...)
				break
			}
		}
	}
	return parts
}

// call runs one skill as c through the node's dispatch. It is not counted
// as a call in the node's metrics: the A2A request is.
func (f *Face) call(ctx context.Context, c protocol.Caller, cl call) (json.RawMessage, *protocol.Error) {
	return protocol.OneResult(f.b.Handle(protocol.Uncounted(ctx), c, protocol.CallMessage(cl.Skill, cl.Args)))
}

// cancelRun cancels a running task and waits (bounded by ctx) until it
// has recorded its canceled state. A task that is not running (waiting for
// input) is canceled here.
func (f *Face) cancelRun(ctx context.Context, t Task, owner string) *rpcError {
	f.mu.Lock()
	r, ok := f.runs[t.ID]
	f.mu.Unlock()
	if !ok {
		t.Status = Status{State: StateCanceled, Timestamp: time.Now().UTC()}
		_, err := f.save(&t, owner, Event{Status: &StatusEvent{TaskID: t.ID, ContextID: t.ContextID, Status: t.Status}})
		if err != nil {
			return err
		}
		return nil
	}
	r.cancel()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return rpcErrf(protocol.CodeInternal, "internal error: the task did not stop in time")
	}
}

// failInterrupted marks failed the tasks that were submitted or working
// when the node last stopped: nothing runs them any more.
func (f *Face) failInterrupted() error {
	list, err := f.b.ListTasks("", protocol.TaskQuery{Unfinished: true})
	if err != nil {
		return fmt.Errorf("a2a: new: %w", err)
	}
	for _, st := range list {
		if st.State != string(StateSubmitted) && st.State != string(StateWorking) {
			continue
		}
		var t Task
		if json.Unmarshal(st.Task, &t) != nil {
			continue
		}
		text := "the agent stopped while the task ran; send it again"
		t.Status = Status{State: StateFailed, Timestamp: time.Now().UTC(), Message: &Message{MessageID: newID(), TaskID: t.ID, ContextID: t.ContextID, Role: "agent", Parts: []Part{{Text: &text}}}}
		if _, e := f.save(&t, st.Owner, Event{Status: &StatusEvent{TaskID: t.ID, ContextID: t.ContextID, Status: t.Status}}); e != nil {
			return errors.New("a2a: new: " + e.Message)
		}
	}
	return nil
}
