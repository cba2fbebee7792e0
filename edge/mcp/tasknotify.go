package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/protocol"
)

// Status notifications of MCP tasks: each change of a task's status (a
// progress report of its skill, orchestrate's subtasks say, is one) is
// pushed to the client, in each form's way:
//
//   - 2025-11-25: notifications/tasks/status (the Task) on the session's
//     standing stream (the GET the client keeps open), for every session
//     of the task's owner that started it or asked about it (tasks/get,
//     tasks/result; another caller's ask is refused and hears nothing).
//     The go-sdk sends no method it does not know, so the face writes the
//     event into that stream itself, between the go-sdk's events (each of
//     which it writes whole, in one Write).
//   - 2026-07-28: notifications/tasks (the DetailedTask) on a
//     subscriptions/listen stream whose notifications name taskIds; the
//     face serves such a listen itself (the go-sdk's drops the member):
//     the acknowledgement names the caller's tasks among them, a
//     notification follows each change, and the stream ends, with the
//     listen's result, when they have all ended.
//
// Notifications are best effort, as both forms say: a client polls too.

const (
	// metaSubscriptionID names, in a notification's _meta, the
	// subscriptions/listen request it belongs to.
	metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
	// maxListenTasks caps the tasks one subscriptions/listen follows.
	maxListenTasks = 32
	// codeMissingCapability is the 2026-07-28 error of a request that
	// needs a client capability the client did not declare.
	codeMissingCapability = -32003
)

// taskNotes is who is told of which task's changes: the 2025-11-25
// sessions' standing streams, and the tasks followed for them.
type taskNotes struct {
	f       *Face
	mu      sync.Mutex
	streams map[string]*standingStream // a stateful session's standing stream, by session ID
	watched map[string]*watchers       // task ID → the sessions told of it
	closed  bool
}

// watchers are the sessions told of one task's changes: all of them the
// task owner's (holder, a Caller's Holder, as the go-sdk binds a session
// to it).
type watchers struct {
	holder   string
	sessions map[string]bool
}

func newTaskNotes(f *Face) *taskNotes {
	return &taskNotes{f: f, streams: map[string]*standingStream{}, watched: map[string]*watchers{}}
}

// follow tells req's session (a 2025-11-25 one, over HTTP) of task id's
// changes from now on, until the task ends: a follower for the task,
// which runs as c, starts with the first session. The caller must have
// found id to be c's task first: follow does not look, it only keeps a
// session of another holder than the follower's out. A nil n, or a
// request of no such session, does nothing.
func (n *taskNotes) follow(req sdk.Request, c protocol.Caller, id string) {
	if n == nil || req == nil {
		return
	}
	ss, _ := req.GetSession().(*sdk.ServerSession)
	if ss == nil || ss.ID() == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	if w, ok := n.watched[id]; ok {
		if w.holder == c.Holder() {
			w.sessions[ss.ID()] = true
		}
		return
	}
	n.watched[id] = &watchers{holder: c.Holder(), sessions: map[string]bool{ss.ID(): true}}
	n.f.wg.Add(1)
	go func() {
		defer n.f.wg.Done()
		n.f.followTask(n.f.ctx, c, id, false, func(v taskView) {
			b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": v.head(false)})
			if err != nil {
				return
			}
			n.mu.Lock()
			var to []*standingStream
			for sid := range n.watched[id].sessions {
				if s := n.streams[sid]; s != nil {
					to = append(to, s)
				}
			}
			n.mu.Unlock()
			for _, s := range to {
				s.inject(b)
			}
		})
		n.mu.Lock()
		delete(n.watched, id)
		n.mu.Unlock()
	}()
}

// stream serves a GET of session id (serve: the go-sdk's handler) and
// makes it the session's standing stream once the go-sdk has begun it
// (200, server-sent events), which the go-sdk does only for the session's
// holder and one stream at a time: a GET it refuses (another caller's
// session 403, a second stream 409, an unknown session 404) never takes
// the session's notifications. When it ends, the stream it stood in for,
// if one is still open, is the standing one again.
func (n *taskNotes) stream(id string, w *statusWriter, serve func(http.ResponseWriter)) {
	if n == nil || id == "" {
		serve(w)
		return
	}
	var prev *standingStream
	s := &standingStream{w: w}
	s.begun = func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		prev = n.streams[id]
		n.streams[id] = s
	}
	defer func() {
		s.end()
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.streams[id] == s {
			if prev != nil && prev.open() {
				n.streams[id] = prev
			} else {
				delete(n.streams, id)
			}
		}
	}()
	serve(s)
}

// close stops new followers (the face's Close waits for the running ones,
// which end with the face's context).
func (n *taskNotes) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
}

// standingStream is a session's standing stream as the go-sdk writes its
// events into it; the face writes events of its own between them
// (inject): every write holds mu, and the go-sdk writes each event in one
// Write. begun runs once, without mu, when the go-sdk has begun the
// stream (200, server-sent events). Lock order: taskNotes.mu, then mu;
// nothing takes taskNotes.mu while holding mu.
type standingStream struct {
	w     *statusWriter
	begun func()
	mu    sync.Mutex
	live  bool // the go-sdk has begun it
	ended bool
}

func (s *standingStream) Header() http.Header { return s.w.Header() }

func (s *standingStream) WriteHeader(status int) {
	defer s.noteBegun()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.WriteHeader(status)
}

func (s *standingStream) Write(p []byte) (int, error) {
	defer s.noteBegun()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *standingStream) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Flush()
}

func (s *standingStream) Unwrap() http.ResponseWriter { return s.w }

// noteBegun runs begun if the go-sdk has just begun the stream: answered
// 200 with server-sent events. Only the go-sdk's goroutine calls it.
func (s *standingStream) noteBegun() {
	s.mu.Lock()
	now := !s.live && !s.ended && s.w.status == http.StatusOK && strings.HasPrefix(s.w.Header().Get("Content-Type"), "text/event-stream")
	s.live = s.live || now
	s.mu.Unlock()
	if now && s.begun != nil {
		s.begun()
	}
}

// open says the go-sdk has begun the stream and it has not ended.
func (s *standingStream) open() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live && !s.ended
}

// inject writes one JSON-RPC message as an event of the stream, if it is
// open; a write that fails is dropped (the go-sdk's next one ends it).
func (s *standingStream) inject(msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live && !s.ended {
		_ = writeEvent(s.w, msg)
	}
}

func (s *standingStream) end() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}

// writeEvent writes msg, one JSON-RPC message (JSON has no raw newline),
// to w as one server-sent event, in one Write, and flushes it: the one
// way the face writes an event of its own, on a standing stream between
// the go-sdk's events or on a subscriptions/listen stream.
func writeEvent(w http.ResponseWriter, msg []byte) error {
	const head, tail = "event: message\ndata: ", "\n\n"
	b := make([]byte, 0, len(head)+len(msg)+len(tail))
	b = append(append(append(b, head...), msg...), tail...)
	if _, err := w.Write(b); err != nil {
		return err
	}
	_ = http.NewResponseController(w).Flush()
	return nil
}

// followTask calls send with c's task id as MCP shows it (isModern: the
// 2026-07-28 form), now and at each change of its status or status
// message, until it ends (or input-required), ctx ends, or it is not
// found. It reads the store at most twice: at the first event, for when
// the task was made (that first view is the store's), and at the event
// that ends the stream, for the result. The events between (a progress
// report, a new status) are shown from the status they carry, its time
// as lastUpdatedAt; an artifact event changes no status and sends
// nothing.
func (f *Face) followTask(ctx context.Context, c protocol.Caller, id string, isModern bool, send func(taskView)) {
	last := ""
	var created time.Time
	read := false
	err := f.tasks.StreamTask(ctx, c, id, 0, false, func(ev a2a.StreamEvent) error {
		if ev.Kind == "ping" {
			return nil
		}
		var v taskView
		st, ok := eventStatus(ev)
		switch {
		case !read || ev.Final || (ev.Kind == "status" && !ok):
			tt, err := f.tasks.GetTimedTask(ctx, c, id)
			if err != nil {
				return err
			}
			created, read = tt.Created, true
			v = f.taskView(tt, isModern)
		case ok:
			updated := st.Timestamp
			if updated.Before(created) { // clocks apart: not before it was made
				updated = created
			}
			v = f.taskView(a2a.TimedTask{Task: a2a.Task{ID: id, Status: st}, Created: created, Updated: updated}, isModern)
		default: // an artifact: the status is as it was
			return nil
		}
		if key := v.status + "\x00" + v.message; key != last {
			last = key
			send(v)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		f.log.Debug("mcp: follow task", "id", protocol.Clip(id, 80), "err", err)
	}
}

// eventStatus is the status a status event carries (its Data, an A2A 1.0
// statusUpdate) in the task model's form; false for any other event, or
// one that does not decode.
func eventStatus(ev a2a.StreamEvent) (a2a.Status, bool) {
	if ev.Kind != "status" {
		return a2a.Status{}, false
	}
	var e struct {
		StatusUpdate *struct {
			Status struct {
				State     string       `json:"state"`
				Message   *a2a.Message `json:"message"`
				Timestamp time.Time    `json:"timestamp"`
			} `json:"status"`
		} `json:"statusUpdate"`
	}
	if json.Unmarshal(ev.Data, &e) != nil || e.StatusUpdate == nil {
		return a2a.Status{}, false
	}
	s := e.StatusUpdate.Status
	// TASK_STATE_INPUT_REQUIRED is input-required, as the model names it
	state := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(s.State, "TASK_STATE_"), "_", "-"))
	return a2a.Status{State: a2a.State(state), Message: s.Message, Timestamp: s.Timestamp}, true
}

// listenRequest is a 2026-07-28 subscriptions/listen request, the members
// the face reads.
type listenRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Meta          map[string]json.RawMessage `json:"_meta"`
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
	} `json:"params"`
}

// taskListen reads the body of a 2026-07-28 POST (up to the edge's cap)
// and returns it as a subscriptions/listen that asks for task
// notifications, or nil (r's body is kept for the go-sdk either way).
func (f *Face) taskListen(r *http.Request) *listenRequest {
	if f.tasks == nil || r.Method != http.MethodPost || r.Body == nil || r.Header.Get("Mcp-Method") != "subscriptions/listen" {
		return nil
	}
	b := peekBody(r, f.http.e.MaxBody())
	if b == nil {
		return nil
	}
	return parseTaskListen(b)
}

// parseTaskListen is b as a subscriptions/listen whose notifications
// name taskIds (a JSON array, possibly empty), or nil.
func parseTaskListen(b []byte) *listenRequest {
	if !bytes.Contains(b, []byte(`"taskIds"`)) {
		return nil
	}
	var l listenRequest
	var probe struct {
		Params struct {
			Notifications map[string]json.RawMessage `json:"notifications"`
		} `json:"params"`
	}
	if json.Unmarshal(b, &l) != nil || json.Unmarshal(b, &probe) != nil || l.Method != "subscriptions/listen" || len(l.ID) == 0 || l.ID[0] == 'n' {
		return nil
	}
	if ids, ok := probe.Params.Notifications["taskIds"]; !ok || !bytes.HasPrefix(bytes.TrimSpace(ids), []byte("[")) {
		return nil
	}
	return &l
}

// declaresTasks says whether the _meta of a 2026-07-28 request declares
// the tasks extension among the client's capabilities.
func declaresTasks(meta map[string]json.RawMessage) bool {
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(meta[metaClientCaps], &caps) != nil {
		return false
	}
	_, ok := caps.Extensions[TasksExtension]
	return ok
}

// serveTaskListen serves l, a subscriptions/listen for task
// notifications, as c: an SSE stream of the acknowledgement (the
// caller's tasks among those asked for, at most maxListenTasks; other
// notifications asked for with them are not honored), then a
// notifications/tasks at each change of those tasks, then the listen's
// result once they have all ended; or the client leaves, or the face
// closes. A client that did not declare the extension gets -32003.
func (f *Face) serveTaskListen(w http.ResponseWriter, r *http.Request, c protocol.Caller, l *listenRequest) {
	start := time.Now()
	subID := json.RawMessage(l.ID)
	write := func(msg map[string]any) error {
		b, err := json.Marshal(msg)
		if err != nil {
			return err
		}
		return writeEvent(w, b)
	}
	if !declaresTasks(l.Params.Meta) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": subID, "error": map[string]any{"code": codeMissingCapability,
			"message": "missing required client capability: task notifications need the " + TasksExtension + " extension among the client's capabilities",
			"data":    map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}}}})
		_, _ = w.Write(b)
		f.b.Audit(r.Context(), c, "mcp subscriptions/listen", protocol.Errorf(codeMissingCapability, "missing the tasks extension"), start)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(f.ctx, cancel)
	defer stop()
	accepted := []string{}
	seen := map[string]bool{}
	for _, id := range l.Params.Notifications.TaskIDs {
		if len(accepted) == maxListenTasks || seen[id] {
			continue
		}
		seen[id] = true
		if _, err := f.tasks.GetTimedTask(ctx, c, id); err == nil {
			accepted = append(accepted, id)
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	meta := map[string]any{metaSubscriptionID: subID}
	if write(map[string]any{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
		"params": map[string]any{"_meta": meta, "notifications": map[string]any{"taskIds": accepted}}}) != nil {
		return
	}
	f.b.Audit(ctx, c, "mcp subscriptions/listen", nil, start)
	out := make(chan taskView)
	var wg sync.WaitGroup
	for _, id := range accepted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.followTask(ctx, c, id, true, func(v taskView) {
				select {
				case out <- v:
				case <-ctx.Done():
				}
			})
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	defer func() {
		cancel()
		for range out { // let the followers end
		}
	}()
	for v := range out {
		m := v.detailed()
		m["_meta"] = meta
		if write(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks", "params": m}) != nil {
			return
		}
	}
	if ctx.Err() == nil {
		_ = write(map[string]any{"jsonrpc": "2.0", "id": subID, "result": map[string]any{"resultType": "complete", "_meta": meta}})
	}
}
