package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/protocol"
)

// taskRequest is the body of POST /api/v1/a2a/tasks: plain text, and the
// conversation it belongs to (the A2A contextId).
type taskRequest struct {
	Message   string `json:"message"`
	SessionID string `json:"session_id"`
	Actor     any    `json:"actor,omitempty"`
}

// taskView is a task as the REST face answers it: the seed's flat fields,
// the agent's last words, and the A2A 1.0 task whole.
type taskView struct {
	TaskID    string          `json:"task_id"`
	SessionID string          `json:"session_id"`
	State     string          `json:"state"`
	Message   string          `json:"message,omitempty"`
	Artifacts int             `json:"artifacts"`
	UpdatedAt time.Time       `json:"updated_at"`
	Actor     string          `json:"actor"`
	Task      json.RawMessage `json:"task"`
}

func viewOf(t a2a.Task, c protocol.Caller) taskView {
	v := taskView{TaskID: t.ID, SessionID: t.ContextID, State: string(t.Status.State), Artifacts: len(t.Artifacts),
		UpdatedAt: t.Status.Timestamp, Actor: c.ID, Task: a2a.TaskJSON(t)}
	if m := t.Status.Message; m != nil {
		var text []string
		for _, p := range m.Parts {
			if p.Text != nil {
				text = append(text, *p.Text)
			}
		}
		v.Message = strings.Join(text, "\n")
	}
	return v
}

// taskError answers an error of the task engine: 404 for a task that is
// not the caller's, 409 for one that cannot be canceled.
func (f *Face) taskError(w http.ResponseWriter, r *http.Request, c protocol.Caller, start time.Time, err error) {
	perr := f.asProtocol(err)
	status := 0
	switch perr.Code {
	case a2a.CodeTaskNotFound:
		status = http.StatusNotFound
	case a2a.CodeTaskNotCancelable:
		status = http.StatusConflict
	}
	f.fail(w, r, c, start, perr, status)
}

// submitTask is POST /api/v1/a2a/tasks: a task of plain text on the A2A
// face's engine (202, with the task as it started and its URL).
func (f *Face) submitTask(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	var req taskRequest
	if !f.readBody(w, r, c, start, &req) {
		return
	}
	if f.tasks == nil {
		f.notConfigured(w, r, c, start, "this node serves no A2A face, whose tasks these routes are")
		return
	}
	t, err := f.tasks.SubmitText(r.Context(), c, req.Message, req.SessionID)
	if err != nil {
		f.taskError(w, r, c, start, err)
		return
	}
	f.b.Audit(r.Context(), c, auditMethod(r), nil, start)
	w.Header().Set("Location", Prefix+"/a2a/tasks/"+t.ID)
	writeJSON(w, http.StatusAccepted, viewOf(t, c))
}

// getTask is GET /api/v1/a2a/tasks/{id}.
func (f *Face) getTask(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	f.taskOp(w, r, c, Tasks.GetTask)
}

// cancelTask is POST /api/v1/a2a/tasks/{id}/cancel.
func (f *Face) cancelTask(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	f.taskOp(w, r, c, Tasks.CancelTask)
}

// taskOp answers the task {id} as op of the A2A face leaves it (200), or
// op's error, with one audit line.
func (f *Face) taskOp(w http.ResponseWriter, r *http.Request, c protocol.Caller, op func(Tasks, context.Context, protocol.Caller, string) (a2a.Task, error)) {
	start := time.Now()
	if f.tasks == nil {
		f.notConfigured(w, r, c, start, "this node serves no A2A face, whose tasks these routes are")
		return
	}
	t, err := op(f.tasks, r.Context(), c, r.PathValue("id"))
	if err != nil {
		f.taskError(w, r, c, start, err)
		return
	}
	f.b.Audit(r.Context(), c, auditMethod(r), nil, start)
	writeJSON(w, http.StatusOK, viewOf(t, c))
}

// streamTask is GET /api/v1/a2a/tasks/{id}/stream: server-sent events,
// each "id: SEQ", "event: task|status|artifact" and "data: " the event in
// A2A 1.0 form; Last-Event-ID replays the events after it from the store.
// The stream ends after a final or input-required state.
func (f *Face) streamTask(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	if f.tasks == nil {
		f.notConfigured(w, r, c, start, "this node serves no A2A face, whose tasks these routes are")
		return
	}
	var after uint64
	replay := false
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			f.fail(w, r, c, start, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: Last-Event-ID %q is not an event number", protocol.Clip(v, 40)), 0)
			return
		}
		after, replay = n, true
	}
	rc := http.NewResponseController(w)
	started := false
	emit := func(ev a2a.StreamEvent) error {
		if !started {
			started = true
			f.b.Audit(r.Context(), c, auditMethod(r), nil, start)
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-store")
			h.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
		}
		var err error
		if ev.Kind == "ping" {
			_, err = fmt.Fprint(w, ": keep-alive\n\n")
		} else {
			_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Kind, ev.Data)
		}
		if err != nil {
			return err
		}
		return rc.Flush()
	}
	// The stream ends with the request or with the face (Close).
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(f.ctx, cancel)()
	err := f.tasks.StreamTask(ctx, c, r.PathValue("id"), after, replay, emit)
	if err != nil && !started {
		f.taskError(w, r, c, start, err)
	}
}

// discoverRequest is the body of POST /api/v1/a2a/discover.
type discoverRequest struct {
	URLs []string `json:"urls"`
}

// discoverResult is one URL's outcome.
type discoverResult struct {
	URL    string                  `json:"url"`
	Status string                  `json:"status"` // "ok" or "error"
	Error  string                  `json:"error,omitempty"`
	Agent  *protocol.ExternalAgent `json:"agent,omitempty"`
}

// discover is POST /api/v1/a2a/discover: each URL's card fetched and the
// agent registered (Agents); each URL answered with its agent or its
// error.
func (f *Face) discover(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	var req discoverRequest
	if !f.readBody(w, r, c, start, &req) {
		return
	}
	if f.agents == nil {
		f.notConfigured(w, r, c, start, "this node keeps no registry of external A2A agents (start it with the agent registry of issue 23)")
		return
	}
	switch {
	case len(req.URLs) == 0:
		f.fail(w, r, c, start, protocol.Errorf(protocol.CodeInvalidParams, `invalid params: urls is missing or empty; send {"urls": ["http://agent:port", …]}`), 0)
		return
	case len(req.URLs) > MaxDiscoverURLs:
		f.fail(w, r, c, start, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: %d urls; at most %d at once", len(req.URLs), MaxDiscoverURLs), 0)
		return
	}
	agents, err := f.agents.DiscoverAgents(r.Context(), c, req.URLs)
	if err != nil {
		f.writeError(w, f.asProtocol(err), 0) // DiscoverAgents audited it
		return
	}
	out := make([]discoverResult, 0, len(req.URLs))
	ok := 0
	for i, u := range req.URLs {
		res := discoverResult{URL: u, Status: "error", Error: "the registry gave no answer for this URL"}
		if i < len(agents) {
			a := agents[i]
			if a.LastError != "" || !a.Healthy {
				res.Error = cmpOr(a.LastError, "the agent is not healthy")
			} else {
				res.Status, res.Error, res.Agent = "ok", "", &a
				ok++
			}
		}
		out = append(out, res)
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out, "discovered": ok, "total": len(out)}) // DiscoverAgents audited it
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// listAgents is GET /api/v1/a2a/agents.
func (f *Face) listAgents(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	if f.agents == nil {
		f.notConfigured(w, r, c, start, "this node keeps no registry of external A2A agents (start it with the agent registry of issue 23)")
		return
	}
	as, err := f.agents.Agents(r.Context(), c)
	if err != nil {
		f.writeError(w, f.asProtocol(err), 0) // Agents audited its refusal
		return
	}
	if as == nil {
		as = []protocol.ExternalAgent{}
	}
	f.b.Audit(r.Context(), c, auditMethod(r), nil, start)
	writeJSON(w, http.StatusOK, map[string]any{"agents": as, "total": len(as)})
}

// orchestrateRequest is the body of POST /api/v1/a2a/orchestrate.
type orchestrateRequest struct {
	Request string          `json:"request"`
	Plan    json.RawMessage `json:"plan,omitempty"`
	Actor   any             `json:"actor,omitempty"`
}

// orchestrate is POST /api/v1/a2a/orchestrate: tools/call of the node's
// orchestrate skill (split, assign, run, aggregate), as the caller.
func (f *Face) orchestrate(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
	start := time.Now()
	var req orchestrateRequest
	if !f.readBody(w, r, c, start, &req) {
		return
	}
	if strings.TrimSpace(req.Request) == "" && len(req.Plan) == 0 {
		f.fail(w, r, c, start, protocol.Errorf(protocol.CodeInvalidParams, `invalid params: request and plan are missing; send {"request": "what to do"} or {"plan": {"subtasks": […]}}`), 0)
		return
	}
	args := map[string]any{"request": req.Request}
	if len(req.Plan) > 0 {
		args["plan"] = req.Plan
	}
	b, _ := json.Marshal(args)
	out, perr := f.runTool(r.Context(), c, "orchestrate", b)
	status := http.StatusOK
	if perr != nil {
		status = edge.ErrorStatus(perr)
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(edge.ErrorRetryAfter(perr)))
		}
	}
	res := map[string]any{"request": req.Request, "success": out.Success, "result": out.Result,
		"actor": out.Actor, "execution_time_ms": out.ExecutionTimeMS}
	if out.Error != nil {
		res["error"] = out.Error
	}
	writeJSON(w, status, res)
}
