package localapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/keys"
)

// maxBody caps a request body.
const maxBody = 64 << 10

// StatusResponse is GET /v1/status: the node's Status, and what the node
// does not know itself.
type StatusResponse struct {
	node.Status
	// EdgeURLs are the HTTP edge's URLs (empty: no edge).
	EdgeURLs []string `json:"edge_urls"`
	// DashboardURL is the dashboard's URL, without its login token ("":
	// none).
	DashboardURL string `json:"dashboard_url,omitempty"`
	// Socket is the control socket ("" when the handler is served
	// elsewhere).
	Socket string `json:"control_socket,omitempty"`
}

// PeersResponse is GET /v1/peers: every open connection (node.Conn), by
// peer then opening time, and their counts.
type PeersResponse struct {
	Counts node.PeerCounts `json:"counts"`
	Conns  []node.Conn     `json:"conns"`
	// History is what the node saw of each peer since it started (the
	// peers seen most recently first): connections opening and closing,
	// relayed or direct, and hole punches.
	History []node.PeerHistory `json:"history"`
}

// LinkResponse is GET /v1/ui/link (on the control socket only): the
// dashboard's URL and its login link, which carries the login token.
type LinkResponse struct {
	URL   string `json:"url"`
	Login string `json:"login"`
}

// IDResponse is GET /v1/id: the PeerID and the addresses the node
// advertises now, each with /p2p/<PeerID>.
type IDResponse struct {
	PeerID string   `json:"peer_id"`
	Addrs  []string `json:"addrs"`
}

// KeyInfo is one API key as the API (and `mcpv2 key list --json`) shows
// it: everything but its secret, with its status at the server's clock.
type KeyInfo struct {
	Name    string     `json:"name"`
	Status  string     `json:"status"`
	Grants  []string   `json:"grants"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// KeyInfoOf is k as KeyInfo, its status at now.
func KeyInfoOf(k keys.Key, now time.Time) KeyInfo {
	ki := KeyInfo{Name: k.Name, Status: k.Status(now), Grants: slices.Clone(k.Grants), Created: k.Created}
	if ki.Grants == nil {
		ki.Grants = []string{}
	}
	if !k.Expires.IsZero() {
		e := k.Expires
		ki.Expires = &e
	}
	if !k.Revoked.IsZero() {
		r := k.Revoked
		ki.Revoked = &r
	}
	return ki
}

// KeysResponse is GET /v1/keys: the keys file and its keys.
type KeysResponse struct {
	File string    `json:"file"`
	Keys []KeyInfo `json:"keys"`
}

// AddKeyRequest is the body of POST /v1/keys: a name, the skills the key
// grants ("*": every one) and how long it stays valid in keys.ParseExpires'
// form ("30d", "12h"; "": never).
type AddKeyRequest struct {
	Name    string   `json:"name"`
	Grants  []string `json:"grants,omitempty"`
	Expires string   `json:"expires,omitempty"`
}

// AddKeyResponse is POST /v1/keys' answer: the new key's secret (shown
// only this once), the key and the keys file.
type AddKeyResponse struct {
	Secret string  `json:"secret"`
	Key    KeyInfo `json:"key"`
	File   string  `json:"file"`
}

// RevokeKeyResponse is the answer of a revocation.
type RevokeKeyResponse struct {
	Name string `json:"name"`
	File string `json:"file"`
}

// ErrorResponse is the body of every error: a sentence, and a word that a
// client maps back to an error value (see Client).
type ErrorResponse struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// The error codes.
const (
	CodeBadRequest     = "bad_request"
	CodeNotFound       = "not_found"
	CodeNameInUse      = "name_in_use"
	CodeNoKey          = "no_key"
	CodeAlreadyRevoked = "already_revoked"
	CodeLocked         = "locked"
	CodeInternal       = "internal"
	CodeMethod         = "method_not_allowed"
	CodeForbidden      = "forbidden"
	CodeUnauthorized   = "unauthorized"
	CodeUnreachable    = "unreachable"
	CodeBusy           = "busy"
	CodeNoDashboard    = "no_dashboard"
	CodeNoAgent        = "no_agent"
)

func (a *API) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", a.getStatus)
	mux.HandleFunc("GET /v1/peers", a.getPeers)
	mux.HandleFunc("GET /v1/id", a.getID)
	mux.HandleFunc("GET /v1/keys", a.listKeys)
	mux.HandleFunc("POST /v1/keys", a.addKey)
	mux.HandleFunc("DELETE /v1/keys/{name}", a.revokeKey)
	mux.HandleFunc("POST /v1/keys/{name}/revoke", a.revokeKey)
	mux.HandleFunc("GET /v1/skills", a.getSkills)
	mux.HandleFunc("GET /v1/find", a.getFind)
	mux.HandleFunc("GET /v1/activity", a.getActivity)
	mux.HandleFunc("GET /v1/audit/stream", a.getAuditStream)
	mux.HandleFunc("GET /v1/transfers", a.getTransfers)
	mux.HandleFunc("GET /v1/access", a.getAccess)
	mux.HandleFunc("POST /v1/call", a.postCall)
	mux.HandleFunc("DELETE /v1/sessions/{id}", a.closeSession)
	mux.HandleFunc("GET /v1/ui/link", a.getLink)
	mux.HandleFunc("GET /v1/agents", a.getAgents)
	mux.HandleFunc("POST /v1/agents", a.postAgents)
	mux.HandleFunc("DELETE /v1/agents", a.deleteAgent)
	mux.HandleFunc("GET /v1/find/task", a.getFindTask)
	return jsonErrors(mux)
}

// jsonErrors turns the mux's own 404 and 405 (plain text) into JSON errors,
// keeping the Allow header of a 405.
func jsonErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r) // sets the path values that Handler does not
			return
		}
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		switch rec.code {
		case http.StatusMethodNotAllowed:
			writeError(w, http.StatusMethodNotAllowed, CodeMethod, fmt.Sprintf("%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow")))
		default:
			writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("%s %s: no such route (see the routes in docs/spec.md: GET /v1/status, /v1/peers, /v1/skills, /v1/activity, /v1/access, …)", r.Method, r.URL.Path))
		}
	})
}

// statusRecorder keeps the status and headers of the mux's error handler.
type statusRecorder struct {
	header http.Header
	code   int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusRecorder) WriteHeader(code int)        { s.code = code }

func (a *API) getStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.status())
}

func (a *API) status() StatusResponse {
	s := a.n.Status()
	if now := a.cfg.now(); now.After(s.Started) {
		s.Uptime = int64(now.Sub(s.Started) / time.Second)
	}
	s.Version = a.cfg.version
	edges := slices.Clone(a.cfg.edgeURLs)
	if edges == nil {
		edges = []string{}
	}
	dash := ""
	if a.dash != nil {
		dash = a.dash.url
	}
	return StatusResponse{Status: s, EdgeURLs: edges, DashboardURL: dash, Socket: a.socket}
}

func (a *API) getPeers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.peers())
}

func (a *API) peers() PeersResponse {
	conns := a.n.Conns()
	return PeersResponse{Counts: node.CountConns(conns), Conns: conns, History: a.n.PeerHistory()}
}

func (a *API) getLink(w http.ResponseWriter, _ *http.Request) {
	if a.dash == nil {
		writeError(w, http.StatusNotFound, CodeNoDashboard, "this node serves no dashboard (it runs with --ui off)")
		return
	}
	writeJSON(w, http.StatusOK, LinkResponse{URL: a.dash.url, Login: a.dash.link()})
}

func (a *API) getID(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, IDResponse{PeerID: a.n.ID().String(), Addrs: a.n.P2PAddrs()})
}

func (a *API) listKeys(w http.ResponseWriter, _ *http.Request) {
	out, err := a.keys.List()
	if err != nil {
		writeKeysError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) addKey(w http.ResponseWriter, r *http.Request) {
	req, err := decodeAddKey(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	out, err := a.keys.Add(req)
	if err != nil {
		writeKeysError(w, err)
		return
	}
	a.cfg.log.Info("local API: added an API key", "name", out.Key.Name, "grants", out.Key.Grants)
	writeJSON(w, http.StatusCreated, out)
}

func (a *API) revokeKey(w http.ResponseWriter, r *http.Request) {
	out, err := a.keys.Revoke(r.PathValue("name"))
	if err != nil {
		writeKeysError(w, err)
		return
	}
	a.cfg.log.Info("local API: revoked an API key", "name", out.Name)
	writeJSON(w, http.StatusOK, out)
}

// Keys is what the /v1/keys routes do, on a key ring: the API serves it,
// and `mcpv2 key` calls it directly on the keys file when no node runs,
// so that both give the same answers.
type Keys struct {
	ring *keys.Ring
	now  func() time.Time
}

// NewKeys returns the key operations on ring, with key statuses at now
// (nil: time.Now).
func NewKeys(ring *keys.Ring, now func() time.Time) *Keys {
	if now == nil {
		now = time.Now
	}
	return &Keys{ring: ring, now: now}
}

// List is GET /v1/keys.
func (k *Keys) List() (KeysResponse, error) {
	list, err := k.ring.List()
	if err != nil {
		return KeysResponse{}, err
	}
	now := k.now()
	out := KeysResponse{File: k.ring.Path(), Keys: []KeyInfo{}}
	for _, key := range list {
		out.Keys = append(out.Keys, KeyInfoOf(key, now))
	}
	return out, nil
}

// Add is POST /v1/keys.
func (k *Keys) Add(req AddKeyRequest) (AddKeyResponse, error) {
	expires, err := keys.ParseExpires(req.Expires)
	if err != nil {
		return AddKeyResponse{}, fmt.Errorf("expires: %w", err)
	}
	secret, key, err := k.ring.Add(req.Name, req.Grants, expires)
	if err != nil {
		return AddKeyResponse{}, err
	}
	return AddKeyResponse{Secret: secret, Key: KeyInfoOf(key, k.now()), File: k.ring.Path()}, nil
}

// Revoke is DELETE /v1/keys/{name}.
func (k *Keys) Revoke(name string) (RevokeKeyResponse, error) {
	if err := k.ring.Revoke(name); err != nil {
		return RevokeKeyResponse{}, err
	}
	return RevokeKeyResponse{Name: name, File: k.ring.Path()}, nil
}

// decodeAddKey reads an AddKeyRequest (see decodeBody) with a name.
func decodeAddKey(r io.Reader) (AddKeyRequest, error) {
	req, err := decodeBody[AddKeyRequest](r, `{"name", "grants", "expires"}`)
	if err != nil {
		return req, err
	}
	if req.Name == "" {
		return AddKeyRequest{}, errors.New(`request body: "name" is missing`)
	}
	return req, nil
}

// decodeBody reads a request body: one JSON object of at most maxBody
// bytes with no unknown field; shape names its fields in the error.
func decodeBody[T any](r io.Reader, shape string) (T, error) {
	var req, zero T
	body, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return zero, fmt.Errorf("request body: over %d bytes", maxBody)
		}
		return zero, fmt.Errorf("request body: %w", err)
	}
	if len(body) > maxBody {
		return zero, fmt.Errorf("request body: over %d bytes", maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return zero, fmt.Errorf("request body: want a JSON object %s: %w", shape, err)
	}
	if dec.More() {
		return zero, errors.New("request body: more than one JSON value")
	}
	return req, nil
}

// writeKeysError answers an error of the key ring with its status and code.
func writeKeysError(w http.ResponseWriter, err error) {
	code, word := http.StatusBadRequest, CodeBadRequest
	switch {
	case errors.Is(err, keys.ErrNameInUse):
		code, word = http.StatusConflict, CodeNameInUse
	case errors.Is(err, keys.ErrAlreadyRevoked):
		code, word = http.StatusConflict, CodeAlreadyRevoked
	case errors.Is(err, keys.ErrNoKey):
		code, word = http.StatusNotFound, CodeNoKey
	case errors.Is(err, keys.ErrLocked):
		code, word = http.StatusServiceUnavailable, CodeLocked
	}
	writeError(w, code, word, err.Error())
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorResponse{Error: "encode the answer: " + err.Error(), Code: CodeInternal})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
