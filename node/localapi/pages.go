package localapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// The data of the dashboard's pages. Each page's JSON is the answer of a
// /v1 route (the socket serves them too), and the page is rendered from
// the same value: one implementation, two forms.

// uiCaller is who the dashboard and the control socket call skills as: the
// node's owner, with the secret holder's rights, audited as "local:ui".
func uiCaller() protocol.Caller {
	return protocol.Caller{ID: "local:ui", Via: "ui", Remote: "local", Kind: protocol.CallerSecretHolder, Owner: "local:ui"}
}

// SkillsResponse is GET /v1/skills: the node's own skills.
type SkillsResponse struct {
	PeerID string                     `json:"peer_id"`
	Skills []protocol.SkillDescriptor `json:"skills"`
}

// FindResponse is GET /v1/find?q=…: the agents of the mesh that offer a
// skill or tag, or whose card matches the words, best first. Each card is
// verified: discovery checks its signed envelope against the PeerID and
// leaves out one that does not verify or cannot be fetched; Dropped
// counts those.
type FindResponse struct {
	Query   string       `json:"query"`
	Results []FoundAgent `json:"results"`
	// Dropped counts the providers whose card could not be fetched or did
	// not verify.
	Dropped int `json:"dropped"`
	// Error says why the search failed ("": it did not).
	Error string `json:"error,omitempty"`
}

// FoundAgent is one agent of a FindResponse.
type FoundAgent struct {
	protocol.FindResult
	Verified bool `json:"verified"`
}

// ActivityFilter selects the audit lines of the Activity page: Caller a
// prefix of the caller, Skill exact, Outcome "ok", "error" or "blocked",
// Verdict the guard's: "clean" (it found nothing), "flagged" (it found
// something and let the call through) or "blocked".
type ActivityFilter struct {
	Caller  string `json:"caller,omitempty"`
	Skill   string `json:"skill,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Verdict string `json:"verdict,omitempty"`
}

// ActivityResponse is GET /v1/activity: the last audit lines (newest
// first), the A2A tasks with their events, the transfers in progress and
// the partial uploads kept for a resume.
type ActivityResponse struct {
	Filter    ActivityFilter      `json:"filter"`
	Audit     []store.AuditRecord `json:"audit"`
	Skipped   int                 `json:"skipped_lines,omitempty"`
	Tasks     []TaskView          `json:"tasks"`
	Transfers TransfersResponse   `json:"transfers"`
}

// TaskView is an A2A task and its last events.
type TaskView struct {
	protocol.StoredTask
	Events []protocol.TaskEvent `json:"events"`
}

// TransfersResponse is GET /v1/transfers: the blob transfers in progress
// and the partial uploads the store keeps for a resume.
type TransfersResponse struct {
	Active   []node.Transfer     `json:"active"`
	Partials []store.PartialInfo `json:"partials"`
}

// AccessResponse is GET /v1/access: who may run what (the policy in
// force) and the API keys.
type AccessResponse struct {
	Summary string          `json:"summary"`
	Policy  node.PolicyView `json:"policy"`
	Keys    KeysResponse    `json:"keys"`
	// KeysError says why the keys could not be read ("": they could).
	KeysError string `json:"keys_error,omitempty"`
	// Sessions are the edge's stateful MCP sessions, the one used most
	// recently first (empty without an edge).
	Sessions []Session `json:"mcp_sessions"`
}

// CallRequest is the body of POST /v1/call: run Skill with Arguments on
// Peer (a PeerID; "" or this node's own PeerID: here), as the node's owner
// ("local:ui", a secret holder).
type CallRequest struct {
	Peer      string          `json:"peer,omitempty"`
	Skill     string          `json:"skill"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// CallResponse is POST /v1/call's answer: the skill's result, or the
// error the skill or the peer answered (the call itself was made).
type CallResponse struct {
	Peer   string          `json:"peer"`
	Skill  string          `json:"skill"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *protocol.Error `json:"error,omitempty"`
}

// Limits of the pages' data.
const (
	auditTail   = 200 // audit lines on the Activity page
	taskList    = 50  // A2A tasks
	taskEvents  = 20  // events per task
	findLimit   = 20  // agents per search
	callTimeout = 2 * time.Minute
	// streamWriteTimeout bounds one write of an event stream.
	streamWriteTimeout = 10 * time.Second
)

func (a *API) skills() SkillsResponse {
	list := a.n.Registry().List()
	slices.SortFunc(list, func(x, y protocol.SkillDescriptor) int { return strings.Compare(x.Name, y.Name) })
	return SkillsResponse{PeerID: a.n.ID().String(), Skills: list}
}

func (a *API) find(ctx context.Context, q string) FindResponse {
	out := FindResponse{Query: q, Results: []FoundAgent{}}
	if strings.TrimSpace(q) == "" {
		return out
	}
	d := a.n.Discovery()
	if d == nil {
		out.Error = protocol.ErrNoDiscovery.Error() + " (the node runs with --no-mesh)"
		return out
	}
	res, st, err := d.FindWithStats(network.WithAllowLimitedConn(ctx, "mcpv2 dashboard find"), q, findLimit)
	if err != nil {
		out.Error = err.Error()
	}
	out.Dropped = st.CardFailures
	for _, r := range res {
		out.Results = append(out.Results, FoundAgent{FindResult: r, Verified: true})
	}
	return out
}

// activityFilter reads an ActivityFilter from a query; the error names
// the field.
func activityFilter(r *http.Request) (ActivityFilter, error) {
	q := r.URL.Query()
	f := ActivityFilter{Caller: q.Get("caller"), Skill: q.Get("skill"), Outcome: q.Get("outcome"), Verdict: q.Get("verdict")}
	if f.Outcome != "" && !slices.Contains([]string{"ok", "error", "blocked"}, f.Outcome) {
		return f, fmt.Errorf("outcome %q: want ok, error or blocked", protocol.Clip(f.Outcome, 40))
	}
	if f.Verdict != "" && !slices.Contains([]string{"clean", "flagged", "blocked"}, f.Verdict) {
		return f, fmt.Errorf("verdict %q: want clean, flagged or blocked", protocol.Clip(f.Verdict, 40))
	}
	for k, v := range map[string]string{"caller": f.Caller, "skill": f.Skill} {
		if len(v) > 256 {
			return f, fmt.Errorf("%s: over 256 bytes", k)
		}
	}
	return f, nil
}

// match reports whether f selects rec.
func (f ActivityFilter) match(rec *store.AuditRecord) bool {
	if !(store.AuditFilter{Caller: f.Caller, Skill: f.Skill, Outcome: f.Outcome}).Match(rec) {
		return false
	}
	switch f.Verdict {
	case "clean":
		return rec.Threat == "" && rec.Outcome != "blocked"
	case "flagged":
		return rec.Threat != "" && rec.Outcome != "blocked"
	case "blocked":
		return rec.Outcome == "blocked"
	}
	return true
}

func (a *API) activity(ctx context.Context, f ActivityFilter) (ActivityResponse, error) {
	out := ActivityResponse{Filter: f, Audit: []store.AuditRecord{}, Tasks: []TaskView{}, Transfers: a.transfers()}
	recs, skipped, err := store.TailAudit(ctx, a.n.DataDir(), store.AuditFilter{Caller: f.Caller, Skill: f.Skill, Outcome: f.Outcome}, auditTail*4)
	if err != nil {
		return out, fmt.Errorf("read the audit log: %w", err)
	}
	out.Skipped = skipped
	for i := len(recs) - 1; i >= 0 && len(out.Audit) < auditTail; i-- {
		if f.match(&recs[i]) {
			out.Audit = append(out.Audit, recs[i])
		}
	}
	tasks, err := a.n.ListTasks("", protocol.TaskQuery{Limit: taskList})
	if err != nil {
		return out, fmt.Errorf("list the A2A tasks: %w", err)
	}
	for _, t := range tasks {
		after := uint64(0)
		if t.Seq > taskEvents {
			after = t.Seq - taskEvents
		}
		ev, err := a.n.TaskEvents(t.ID, after, taskEvents)
		if err != nil { // the task's listing stands without its events
			a.cfg.log.Debug("dashboard: task events", "task", t.ID, "err", err)
		}
		if ev == nil {
			ev = []protocol.TaskEvent{}
		}
		out.Tasks = append(out.Tasks, TaskView{StoredTask: t, Events: ev})
	}
	return out, nil
}

func (a *API) transfers() TransfersResponse {
	out := TransfersResponse{Active: a.n.Transfers(), Partials: a.n.PartialUploads()}
	if out.Active == nil {
		out.Active = []node.Transfer{}
	}
	if out.Partials == nil {
		out.Partials = []store.PartialInfo{}
	}
	return out
}

func (a *API) access() AccessResponse {
	out := AccessResponse{Summary: a.n.AccessSummary(), Policy: a.n.PolicyView()}
	keys, err := a.keys.List()
	if err != nil {
		out.KeysError = err.Error()
		keys = KeysResponse{Keys: []KeyInfo{}}
	}
	out.Keys = keys
	out.Sessions = []Session{}
	if a.cfg.sessions != nil {
		out.Sessions = a.cfg.sessions.Sessions()
	}
	return out
}

func (a *API) closeSession(w http.ResponseWriter, r *http.Request) {
	if a.cfg.sessions == nil {
		writeError(w, http.StatusNotFound, CodeNotFound, "this node has no MCP sessions (no edge)")
		return
	}
	if err := a.cfg.sessions.CloseSession(r.PathValue("id")); err != nil {
		writeError(w, http.StatusNotFound, CodeNotFound, err.Error())
		return
	}
	a.cfg.log.Info("local API: ended an MCP session", "id", protocol.Clip(r.PathValue("id"), 80))
	writeJSON(w, http.StatusOK, struct {
		ID string `json:"id"`
	}{r.PathValue("id")})
}

// call runs req as uiCaller: here through the node's dispatch, on a peer
// through the node's gateway (Forward: a relay when the peer is behind
// one). Either way it is audited like any call.
func (a *API) call(ctx context.Context, req CallRequest) (CallResponse, error) {
	self := a.n.ID().String()
	out := CallResponse{Peer: cmp.Or(req.Peer, self), Skill: req.Skill}
	msg := protocol.CallMessage(req.Skill, req.Arguments)
	var res json.RawMessage
	var perr *protocol.Error
	if out.Peer == self {
		res, perr = protocol.OneResult(a.n.Handle(ctx, uiCaller(), msg))
	} else {
		raw, err := a.n.Forward(ctx, uiCaller(), out.Peer, msg)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				return out, err
			}
			perr = pe
		} else {
			res, perr = protocol.OneResult(raw, nil)
		}
	}
	out.Result, out.Error = res, perr
	return out, nil
}

// decodeCall reads a CallRequest (see decodeBody) with a skill, arguments
// an object when given and a peer that looks like a PeerID when given.
func decodeCall(r io.Reader) (CallRequest, error) {
	req, err := decodeBody[CallRequest](r, `{"peer", "skill", "arguments"}`)
	if err != nil {
		return req, err
	}
	if req.Skill == "" {
		return CallRequest{}, errors.New(`request body: "skill" is missing`)
	}
	if len(req.Skill) > 256 {
		return CallRequest{}, errors.New(`request body: "skill" is over 256 bytes`)
	}
	if a := bytes.TrimSpace(req.Arguments); len(a) > 0 && a[0] != '{' && !bytes.Equal(a, []byte("null")) {
		return CallRequest{}, errors.New(`request body: "arguments" must be a JSON object`)
	}
	if req.Peer != "" && !protocol.LooksLikePeerID(req.Peer) {
		return CallRequest{}, fmt.Errorf(`request body: "peer" %q is not a PeerID`, protocol.Clip(req.Peer, 80))
	}
	return req, nil
}

// wantsJSON reports whether r asks for JSON rather than a page.
func wantsJSON(r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Query().Get("format") == "json" {
		return true
	}
	acc := r.Header.Get("Accept")
	return strings.Contains(acc, "application/json") && !strings.Contains(acc, "text/html")
}

// The /v1 routes of the pages.

func (a *API) getSkills(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.skills())
}

func (a *API) getFind(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	if len(q) > 256 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "q: over 256 bytes")
		return
	}
	writeJSON(w, http.StatusOK, a.find(r.Context(), q))
}

func (a *API) getActivity(w http.ResponseWriter, r *http.Request) {
	f, err := activityFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	out, err := a.activity(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) getTransfers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.transfers())
}

func (a *API) getAccess(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.access())
}

func (a *API) postCall(w http.ResponseWriter, r *http.Request) {
	req, err := decodeCall(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	out, err := a.call(ctx, req)
	if err != nil {
		writeError(w, http.StatusBadGateway, CodeUnreachable, fmt.Sprintf("call %s on %s: %v", protocol.Clip(req.Skill, 80), out.Peer, err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// getAuditStream is GET /v1/audit/stream: server-sent events, one "audit"
// event per audit line the filter selects, as it is written. Streams are
// capped (maxStreams); a subscriber that falls behind is told how many
// lines it missed ("dropped" event).
func (a *API) getAuditStream(w http.ResponseWriter, r *http.Request) {
	f, err := activityFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	select {
	case a.streams <- struct{}{}:
		defer func() { <-a.streams }()
	default:
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, CodeBusy, fmt.Sprintf("%d event streams are open already: close one", maxStreams))
		return
	}
	recs, dropped, cancel, err := a.n.SubscribeAudit(64)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, CodeBusy, err.Error())
		return
	}
	defer cancel()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	// A reader that stops reading is dropped after streamWriteTimeout,
	// not kept in a blocked Write until the node closes.
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		_, err := w.Write(b)
		return err == nil && rc.Flush() == nil
	}
	if !write([]byte(": mcpv2 audit stream\n\n")) {
		return
	}
	keep := time.NewTicker(25 * time.Second)
	defer keep.Stop()
	var told uint64
	for {
		select {
		case <-r.Context().Done():
			return
		case <-a.done:
			return
		case <-keep.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case rec, ok := <-recs:
			if !ok {
				return
			}
			var buf bytes.Buffer
			if d := dropped(); d > told {
				fmt.Fprintf(&buf, "event: dropped\ndata: %d\n\n", d-told)
				told = d
			}
			if f.match(&rec) {
				b, _ := json.Marshal(rec)
				buf.WriteString("event: audit\ndata: ")
				buf.Write(b)
				buf.WriteString("\n\n")
			}
			if buf.Len() == 0 {
				continue
			}
			if !write(buf.Bytes()) {
				return
			}
		}
	}
}

// writePage answers a page's data as JSON when the request asks for it,
// or renders the page.
func (a *API) writePage(w http.ResponseWriter, r *http.Request, name string, data any, err error) {
	status, code := http.StatusOK, ""
	var bad *badRequest
	switch {
	case errors.As(err, &bad):
		status, code = http.StatusBadRequest, CodeBadRequest
	case err != nil:
		status, code = http.StatusInternalServerError, CodeInternal
	}
	if wantsJSON(r) {
		if err != nil {
			writeError(w, status, code, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, data)
		return
	}
	a.renderPage(w, status, name, data, err)
}

// badRequest marks an error of the request's own (400), not the node's.
type badRequest struct{ error }

func (b *badRequest) Unwrap() error { return b.error }

// pageRoutes adds the dashboard's pages to mux.
func (a *API) pageRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		a.writePage(w, r, "node", a.status(), nil)
	})
	mux.HandleFunc("GET /peers", func(w http.ResponseWriter, r *http.Request) {
		a.writePage(w, r, "peers", a.peers(), nil)
	})
	mux.HandleFunc("GET /skills", func(w http.ResponseWriter, r *http.Request) {
		a.writePage(w, r, "skills", a.skills(), nil)
	})
	mux.HandleFunc("GET /mesh", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		if len(q) > 256 {
			a.writePage(w, r, "mesh", FindResponse{Results: []FoundAgent{}}, &badRequest{errors.New("q: over 256 bytes")})
			return
		}
		a.writePage(w, r, "mesh", a.find(r.Context(), q), nil)
	})
	mux.HandleFunc("GET /activity", func(w http.ResponseWriter, r *http.Request) {
		f, err := activityFilter(r)
		if err != nil {
			a.writePage(w, r, "activity", ActivityResponse{Filter: f}, &badRequest{err})
			return
		}
		out, err := a.activity(r.Context(), f)
		a.writePage(w, r, "activity", out, err)
	})
	mux.HandleFunc("GET /access", func(w http.ResponseWriter, r *http.Request) {
		a.writePage(w, r, "access", a.access(), nil)
	})
}
