package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// The task API below is the face's task engine for another face: the REST
// face's /api/v1/a2a/tasks routes (edge/rest). It is the engine that the
// JSON-RPC methods use (the same store, owner rule, event log, limits on
// running tasks and the node's dispatch for every skill a task runs); only
// the wire form is the caller's. It writes no audit line of its own: the
// caller's face does, and the skills a task runs enter Backend.Handle.

// A2A error codes the task API returns (as *protocol.Error codes).
const (
	// CodeTaskNotFound: no task of that id is the caller's.
	CodeTaskNotFound = codeTaskNotFound
	// CodeTaskNotCancelable: the task is in a final state already.
	CodeTaskNotCancelable = codeTaskNotCancelable
)

// MaxText caps the text of a task SubmitText starts.
const MaxText = 1 << 20

// StreamEvent is one event of a task for StreamTask: Seq numbers the
// task's events from 1 (the SSE id, for Last-Event-ID); Kind is "task"
// (the task whole), "status" or "artifact"; Data is the event in A2A 1.0
// form (a StreamResponse: {"task"}, {"statusUpdate"} or
// {"artifactUpdate"}); Final says that the stream ends after it (a final
// or input-required state). A zero Seq with Kind "ping" is a keep-alive.
type StreamEvent struct {
	Seq   uint64
	Kind  string
	Data  json.RawMessage
	Final bool
}

func toProtocol(e *rpcError) *protocol.Error {
	if e == nil {
		return nil
	}
	return &protocol.Error{Code: e.Code, Message: e.Message, Data: e.Data}
}

// loadFor is req.load for a caller of the task API.
func (f *Face) loadFor(c protocol.Caller, id string) (Task, protocol.StoredTask, *protocol.Error) {
	q := &req{f: f, c: c, owner: f.owner(c)}
	t, st, e := q.load(id)
	return t, st, toProtocol(e)
}

// SubmitText starts a task for c whose message is text, one text part,
// in the conversation contextID ("" starts a new one), as message/send
// with a text part does (the text goes to the skill the face routes text
// to), and returns the task as stored when it started (submitted). The
// errors are *protocol.Error: -32602 for an empty or oversized text or
// contextID, -32603 when the face is busy or stopping.
func (f *Face) SubmitText(ctx context.Context, c protocol.Caller, text, contextID string) (Task, error) {
	if strings.TrimSpace(text) == "" {
		return Task{}, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: message is empty; send the task as text")
	}
	if len(text) > MaxText {
		return Task{}, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: message is %d bytes; at most %d", len(text), MaxText)
	}
	if len(contextID) > maxContextID {
		return Task{}, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: session_id is longer than %d bytes", maxContextID)
	}
	t := Task{ID: newID(), ContextID: contextID}
	if t.ContextID == "" {
		t.ContextID = newID()
	}
	m := Message{MessageID: newID(), ContextID: t.ContextID, TaskID: t.ID, Role: "user", Parts: []Part{{Text: &text}}}
	calls, e := f.callsOf(m, nil)
	if e != nil {
		return Task{}, toProtocol(e)
	}
	return f.submit(ctx, c, t, m, calls)
}

// submit stores task t with its first message m and starts running calls
// for c: SubmitText's and SubmitCall's common end.
func (f *Face) submit(ctx context.Context, c protocol.Caller, t Task, m Message, calls []call) (Task, error) {
	if perr := f.refusal(c, calls); perr != nil {
		m = withheld(m, perr) // the node will refuse it: its body is never stored
	}
	t.History = append(t.History, m)
	t.Status = Status{State: StateSubmitted, Timestamp: time.Now().UTC()}
	owner := f.owner(c)
	ch, _, rerr := f.start(ctx, t, owner, c, calls)
	if rerr != nil {
		return Task{}, toProtocol(rerr)
	}
	f.unwatch(t.ID, ch)
	return t, nil
}

// SubmitCall starts a task for c that runs one call of skill with args (a
// JSON object; empty is {}), as a message with the data part {"skill",
// "arguments"} does: the same dispatch, policy and audit, the same store
// and event log, so GetTask, StreamTask and CancelTask (and the A2A
// methods) see it. It returns the task as stored when it started
// (submitted). The MCP face runs a tool call as a task with it. The
// errors are *protocol.Error: -32602 for an empty or oversized skill name
// or arguments that are not an object, -32603 when the face is busy or
// stopping.
func (f *Face) SubmitCall(ctx context.Context, c protocol.Caller, skill string, args json.RawMessage) (Task, error) {
	if skill == "" || len(skill) > maxSkillName {
		return Task{}, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: a skill name is 1 to %d bytes", maxSkillName)
	}
	if len(args) > MaxText {
		return Task{}, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: the arguments are %d bytes; at most %d", len(args), MaxText)
	}
	var am map[string]any
	if t := strings.TrimSpace(string(args)); t != "" && t != "null" {
		if err := json.Unmarshal(args, &am); err != nil || am == nil {
			return Task{}, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: the arguments of %q must be a JSON object", protocol.Clip(skill, 64))
		}
	}
	if am == nil {
		am = map[string]any{}
	}
	t := Task{ID: newID(), ContextID: newID(), Metadata: map[string]any{ToolCallMeta: true}}
	m := Message{MessageID: newID(), ContextID: t.ContextID, TaskID: t.ID, Role: "user",
		Parts: []Part{{Data: map[string]any{"skill": skill, "arguments": am}}}}
	calls, e := callsOf(m, nil)
	if e != nil {
		return Task{}, toProtocol(e)
	}
	return f.submit(ctx, c, t, m, calls)
}

// ToolCallMeta is the task metadata key (value true) that marks a task
// SubmitCall started: a tool call run as a task (MCP tasks), which
// ListOwnTasks can list apart from the tasks of A2A messages.
const ToolCallMeta = "mcpv2/toolCall"

// GetTimedTask is GetTask with when the task was made and last saved (the
// store's clock).
func (f *Face) GetTimedTask(_ context.Context, c protocol.Caller, id string) (TimedTask, error) {
	t, st, perr := f.loadFor(c, id)
	if perr != nil {
		return TimedTask{}, perr
	}
	return TimedTask{Task: t, Created: st.Created, Updated: st.Updated}, nil
}

// TaskPage is one page of a caller's tasks (ListOwnTasks): each task with
// the store's times, and the cursor of the next page ("" at the end).
type TaskPage struct {
	Tasks []TimedTask
	Next  string
}

// TimedTask is a task with when it was made and last saved.
type TimedTask struct {
	Task             Task
	Created, Updated time.Time
}

// ListOwnTasks lists c's tasks, size at most (1 to 100), from the one
// after the task named by cursor ("" from the start), in the store's
// order; with toolCalls, only those SubmitCall started (ToolCallMeta). A
// caller without a credential owns none. An unknown cursor is -32602.
func (f *Face) ListOwnTasks(_ context.Context, c protocol.Caller, cursor string, size int, toolCalls bool) (TaskPage, error) {
	if size < 1 || size > 100 {
		return TaskPage{}, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: a page is 1 to 100 tasks, not %d", size)
	}
	var stored []protocol.StoredTask
	if c.Owner != "" {
		var err error
		if stored, err = f.b.ListTasks(f.owner(c), protocol.TaskQuery{}); err != nil {
			f.log.Error("a2a: list tasks", "err", err)
			return TaskPage{}, protocol.Errorf(protocol.CodeInternal, "internal error: the tasks could not be listed")
		}
	}
	var all []TimedTask
	for _, st := range stored {
		var t Task
		if json.Unmarshal(st.Task, &t) != nil {
			continue
		}
		if marked, _ := t.Metadata[ToolCallMeta].(bool); toolCalls && !marked {
			continue
		}
		all = append(all, TimedTask{Task: t, Created: st.Created, Updated: st.Updated})
	}
	page, next, ok := pageAfter(all, func(tt TimedTask) string { return tt.Task.ID }, cursor, size)
	if !ok {
		return TaskPage{}, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: cursor %q names no task of this listing", protocol.Clip(cursor, 80))
	}
	return TaskPage{Tasks: append([]TimedTask{}, page...), Next: next}, nil
}

// GetTask returns c's task id as it is now: CodeTaskNotFound when it does
// not exist or is another caller's.
func (f *Face) GetTask(_ context.Context, c protocol.Caller, id string) (Task, error) {
	t, _, perr := f.loadFor(c, id)
	if perr != nil {
		return Task{}, perr
	}
	return t, nil
}

// CancelTask cancels c's task id and returns it canceled (waiting, bounded
// by ctx, for a running task to record its state): CodeTaskNotFound as
// GetTask, CodeTaskNotCancelable when it is final already.
func (f *Face) CancelTask(ctx context.Context, c protocol.Caller, id string) (Task, error) {
	t, _, perr := f.loadFor(c, id)
	if perr != nil {
		return Task{}, perr
	}
	if t.Status.State.Terminal() {
		return Task{}, protocol.Errorf(CodeTaskNotCancelable, "task not cancelable: %q is %s already", t.ID, t.Status.State)
	}
	if e := f.cancelRun(ctx, t, f.owner(c)); e != nil {
		return Task{}, toProtocol(e)
	}
	return f.GetTask(ctx, c, id)
}

// StreamTask sends c's task id to emit as events until it reaches a final
// or input-required state, ctx ends, or emit fails (the client left).
// Without replay, the first event is the task as it is now (Kind "task",
// Seq its last event's); with replay, the events after the event after
// are read from the store, then the live ones follow (Last-Event-ID). A
// keep-alive is sent when the stream is idle. It returns CodeTaskNotFound
// as GetTask before anything is sent; later errors are emit's, or -32603
// when the stored events cannot be read. It is the loop of the JSON-RPC
// subscribe (streamEvents), with the events in the task API's form.
func (f *Face) StreamTask(ctx context.Context, c protocol.Caller, id string, after uint64, replay bool, emit func(StreamEvent) error) error {
	t, st, perr := f.loadFor(c, id)
	if perr != nil {
		return perr
	}
	load := func(id string) (Task, protocol.StoredTask, bool) {
		t, st, e := f.loadFor(c, id)
		return t, st, e == nil
	}
	send := func(ev Event) error {
		b, err := json.Marshal(ev.v1())
		if err != nil {
			return err
		}
		kind := "artifact"
		switch {
		case ev.Task != nil:
			kind = "task"
		case ev.Status != nil:
			kind = "status"
		}
		return emit(StreamEvent{Seq: ev.Seq, Kind: kind, Data: b, Final: ev.ends()})
	}
	ping := func() error { return emit(StreamEvent{Kind: "ping"}) }
	err := f.streamEvents(ctx, t, st, load, after, replay, send, ping)
	if errors.Is(err, errTaskEvents) {
		return errors.Join(protocol.Errorf(protocol.CodeInternal, "internal error: the task's events could not be read"), err)
	}
	return err
}

// errTaskEvents wraps the store's error when streamEvents cannot read the
// events to replay.
var errTaskEvents = errors.New("a2a: the task's events could not be read")

// streamEvents is the one replay-and-follow loop of a task's event
// stream, for the JSON-RPC subscribe (SSE of JSON-RPC results) and the
// task API's StreamTask (the REST face); each gives its own send and ping
// (a keep-alive). It watches task t (as read, with st, by the caller),
// then reads it again through load, so that an event published between
// the two reads is not lost (the live events the new read holds are
// skipped by their seq; the soak saw one fall between in about 400
// resubscriptions). Then it sends either the events after the event
// after, read from the store (replay: Last-Event-ID names the last event
// the client saw), or the task as it is now, and then the live events
// (follow), until an event ends the stream (a final or input-required
// state), the task is not running, ctx ends, or send or ping fails (the
// client left). It returns send's or ping's error, or errTaskEvents.
func (f *Face) streamEvents(ctx context.Context, t Task, st protocol.StoredTask, load func(id string) (Task, protocol.StoredTask, bool),
	after uint64, replay bool, send func(Event) error, ping func() error) error {
	ch, unsub := f.watch(t.ID)
	defer unsub()
	if now, nst, ok := load(t.ID); ok {
		t, st = now, nst
	}
	last := st.Seq
	if replay {
		evs, err := f.b.TaskEvents(t.ID, after, 0)
		if err != nil {
			return fmt.Errorf("%w: %w", errTaskEvents, err)
		}
		// The events name the task's messages and artifacts: read it
		// again, after them, so that it holds every one they name.
		if now, _, ok := load(t.ID); ok {
			t = now
		}
		last = after
		for _, se := range evs {
			ev, ok := eventFrom(se.Event, t)
			if !ok {
				continue
			}
			ev.Seq = se.Seq
			if err := send(ev); err != nil || ev.ends() {
				return err
			}
			last = se.Seq
		}
	} else {
		snap := t
		ev := Event{Task: &snap, Seq: st.Seq}
		if err := send(ev); err != nil || ev.ends() {
			return err
		}
	}
	if ch == nil { // not running (input-required, waiting for a message)
		return nil
	}
	return follow(ctx, ch, last, send, ping)
}

// follow sends the events of ch until one ends the stream (a terminal or
// interrupted state), the channel closes (the subscriber fell behind, or
// the face stops), ctx ends, or send or ping fails (the client left); it
// pings after keepAlive of silence. skip drops the events already sent
// (by seq).
func follow(ctx context.Context, ch <-chan Event, skip uint64, send func(Event) error, ping func() error) error {
	t := time.NewTicker(keepAlive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := ping(); err != nil {
				return err
			}
		case e, ok := <-ch:
			if !ok {
				return nil
			}
			if e.Seq <= skip {
				continue
			}
			if err := send(e); err != nil || e.ends() {
				return err
			}
		}
	}
}

// TaskJSON is t in A2A 1.0 form, with its whole history and artifacts.
func TaskJSON(t Task) json.RawMessage {
	b, _ := json.Marshal(t.v1(-1, true))
	return b
}
