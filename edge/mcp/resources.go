package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/protocol"
)

// Resource URIs of the face.
const (
	// CardURI is the node's own agent card.
	CardURI = "mcpv2://card"
	// FilesURI is the list of the node's stored files, as list_files gives
	// it; each file is FilesURI + "/" + its name, path-escaped.
	FilesURI = "mcpv2://files"
	// AgentsURI prefixes the cards of mesh agents: AgentsURI + "/" + PeerID.
	AgentsURI = "mcpv2://agents"
)

func fileURI(name string) string { return FilesURI + "/" + url.PathEscape(name) }
func cardResource() *sdk.Resource {
	return &sdk.Resource{URI: CardURI, Name: "card", Title: "This node's agent card", MIMEType: "application/json",
		Description: "The signed self-description of this mcpv2 node: PeerID, addresses, skills, capabilities."}
}
func agentURI(peerID string) string { return AgentsURI + "/" + peerID }
func filesIndex() *sdk.Resource {
	return &sdk.Resource{URI: FilesURI, Name: "files", Title: "Stored files", MIMEType: "application/json",
		Description: "The node's stored files with size, sha256 and modification time (list_files); each is a resource mcpv2://files/NAME."}
}

// addResources registers the fixed resources and the templates; the files
// and the agents found are listed per request (listResources).
func (f *Face) addResources(s *sdk.Server) {
	s.AddResource(cardResource(), f.readCard)
	s.AddResource(filesIndex(), f.readFilesIndex)
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: FilesURI + "/{name}", Name: "file", Title: "A stored file",
		Description: fmt.Sprintf("A file of the node's store, whole when at most %d bytes; larger files are read in pages with the read_file tool.", f.maxRes)}, f.readFile)
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: AgentsURI + "/{peer_id}", Name: "agent", Title: "A mesh agent's card", MIMEType: "application/json",
		Description: "The agent card of a peer of the mesh, asked of that peer now."}, f.readAgent)
}

// listResources adds to the registered resources the caller's view of the
// files (list_files, run as the caller: a caller without that grant sees
// none) and the cards of the agents that mesh_find returned.
func (f *Face) listResources(ctx context.Context, c protocol.Caller, res sdk.Result) (sdk.Result, error) {
	lr, ok := res.(*sdk.ListResourcesResult)
	if !ok {
		return res, nil
	}
	out := *lr
	out.Resources = append([]*sdk.Resource(nil), lr.Resources...)
	if files, perr := f.listFiles(ctx, c); perr == nil {
		for _, fi := range files {
			out.Resources = append(out.Resources, &sdk.Resource{URI: fileURI(fi.Filename), Name: fi.Filename,
				MIMEType: mimeOf(fi.Filename), Size: fi.Size, Description: "sha256 " + fi.SHA256})
		}
	}
	for _, card := range f.agents.list() {
		out.Resources = append(out.Resources, &sdk.Resource{URI: agentURI(card.PeerID), Name: "agent " + card.Name,
			MIMEType: "application/json", Description: protocol.Clip(card.Description, 200)})
	}
	out.Resources = append(out.Resources, f.staticResources(c)...)
	out.CacheScope = scopePrivate // the list depends on who asks
	return &out, nil
}

type fileEntry struct {
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

func (f *Face) listFiles(ctx context.Context, c protocol.Caller) ([]fileEntry, *protocol.Error) {
	res, perr := f.call(ctx, c, "list_files", json.RawMessage(`{}`))
	if perr != nil {
		return nil, perr
	}
	var lf struct {
		Files []fileEntry `json:"files"`
	}
	if err := json.Unmarshal(res, &lf); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "internal error: list_files answered what could not be read")
	}
	return lf.Files, nil
}

// call runs one skill through Handle for c.
func (f *Face) call(ctx context.Context, c protocol.Caller, skill string, args json.RawMessage) (json.RawMessage, *protocol.Error) {
	return protocol.OneResult(f.b.Handle(ctx, c, protocol.CallMessage(skill, args)))
}

func (f *Face) readCard(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	c := callerOf(ctx, req)
	res, perr := protocol.OneResult(f.b.Handle(ctx, c, []byte(`{"jsonrpc":"2.0","id":1,"method":"agent/card"}`)))
	if perr != nil {
		return nil, protocolToWire(perr)
	}
	return jsonResource(CardURI, res), nil
}

func (f *Face) readFilesIndex(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	res, perr := f.call(ctx, callerOf(ctx, req), "list_files", json.RawMessage(`{}`))
	if perr != nil {
		return nil, protocolToWire(perr)
	}
	return jsonResource(FilesURI, res), nil
}

// readAnswer is the part of read_file's result the face uses.
type readAnswer struct {
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	MIMEType string `json:"mime_type"`
	Length   int    `json:"length"`
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
}

// readFile reads mcpv2://files/NAME with the read_file skill, as the
// caller: whole when it is at most maxRes bytes, else refused with the way
// to page it.
func (f *Face) readFile(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	name, err := url.PathUnescape(strings.TrimPrefix(uri, FilesURI+"/"))
	if err != nil || name == "" || strings.Contains(name, "/") {
		return nil, protocolToWire(protocol.Errorf(protocol.CodeInvalidParams, "invalid params: %q does not name a stored file (want mcpv2://files/NAME, NAME path-escaped)", protocol.Clip(uri, 200)))
	}
	args, _ := json.Marshal(map[string]any{"filename": name, "length": f.maxRes})
	res, perr := f.call(ctx, callerOf(ctx, req), "read_file", args)
	if perr != nil {
		if perr.Code == protocol.CodeFileNotFound {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		return nil, protocolToWire(perr)
	}
	var a readAnswer
	if err := json.Unmarshal(res, &a); err != nil {
		return nil, protocolToWire(protocol.Errorf(protocol.CodeInternal, "internal error: read_file answered what could not be read"))
	}
	if a.Size > int64(a.Length) {
		return nil, protocolToWire(protocol.Errorf(protocol.CodeInvalidParams,
			"file %q is %d bytes, more than the %d bytes a resource read returns; read it in pages with the read_file tool (filename, offset, length)", name, a.Size, f.maxRes))
	}
	rc := &sdk.ResourceContents{URI: uri, MIMEType: a.MIMEType}
	if a.Encoding == "base64" {
		if rc.Blob, err = base64.StdEncoding.DecodeString(a.Content); err != nil {
			return nil, protocolToWire(protocol.Errorf(protocol.CodeInternal, "internal error: read_file answered bad base64"))
		}
	} else {
		rc.Text = a.Content
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
}

// readAgent asks the peer of mcpv2://agents/PEERID for its card now (the
// open agent/card method, forwarded as the caller).
func (f *Face) readAgent(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	peer := strings.TrimPrefix(uri, AgentsURI+"/")
	if !protocol.LooksLikePeerID(peer) {
		return nil, protocolToWire(protocol.Errorf(protocol.CodeInvalidParams, "invalid params: %q does not name an agent (want mcpv2://agents/PEERID)", protocol.Clip(uri, 200)))
	}
	c := callerOf(ctx, req)
	if f.limiter != nil && c.Remote != "" {
		if perr := f.limiter.AllowGateway(c.Remote); perr != nil {
			return nil, protocolToWire(perr)
		}
	}
	start := time.Now()
	res, perr := protocol.OneResult(edge.HandleByForward(protocol.Uncounted(ctx), f.b.Forward, c, peer, []byte(`{"jsonrpc":"2.0","id":1,"method":"agent/card"}`)))
	f.b.Audit(ctx, c, "mcp resources/read agent", perr, start)
	if perr != nil {
		return nil, protocolToWire(perr)
	}
	var card protocol.AgentCard
	if json.Unmarshal(res, &card) == nil && card.PeerID == peer {
		f.agents.put(card)
	}
	return jsonResource(uri, res), nil
}

func jsonResource(uri string, b json.RawMessage) *sdk.ReadResourceResult {
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}
}

// mimeOf guesses a file's media type from its name, for resources/list
// (read_file sniffs the content too).
func mimeOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		if t := mimeByExt[strings.ToLower(name[i:])]; t != "" {
			return t
		}
	}
	return "application/octet-stream"
}

// mimeByExt are the common types, fixed so that the list does not depend
// on the host's mime.types.
var mimeByExt = map[string]string{
	".txt": "text/plain; charset=utf-8", ".md": "text/markdown; charset=utf-8", ".json": "application/json",
	".csv": "text/csv; charset=utf-8", ".html": "text/html; charset=utf-8", ".xml": "text/xml; charset=utf-8",
	".yaml": "application/yaml", ".yml": "application/yaml", ".go": "text/x-go; charset=utf-8",
	".py": "text/x-python; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".pdf": "application/pdf",
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".svg": "image/svg+xml",
	".zip": "application/zip", ".gz": "application/gzip", ".tar": "application/x-tar", ".wasm": "application/wasm",
}

// agentCache remembers the cards mesh_find returned (and agent reads),
// at most maxAgents, the oldest dropped first. mu guards its fields.
type agentCache struct {
	mu    sync.Mutex
	cards map[string]protocol.AgentCard
	order []string // PeerIDs, oldest first
}

func (a *agentCache) put(card protocol.AgentCard) {
	if card.PeerID == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cards == nil {
		a.cards = make(map[string]protocol.AgentCard)
	}
	if _, ok := a.cards[card.PeerID]; !ok {
		a.order = append(a.order, card.PeerID)
		if len(a.order) > maxAgents {
			delete(a.cards, a.order[0])
			a.order = a.order[1:]
		}
	}
	a.cards[card.PeerID] = card
}

func (a *agentCache) list() []protocol.AgentCard {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]protocol.AgentCard, 0, len(a.order))
	for _, id := range a.order {
		out = append(out, a.cards[id])
	}
	return out
}

// Caps of subscriptions.
const (
	// MaxSubscribeURI caps the bytes of the URI a resources/subscribe
	// names: 1 KiB. Every URI the face serves is shorter.
	MaxSubscribeURI = 1 << 10
	// MaxSubscriptions caps the resources one session subscribes to at
	// once: 64.
	MaxSubscriptions = 64
	// logURI is how much of a URI a log line quotes.
	logURI = 200
)

// subscribe accepts resources/subscribe to what the caller may read,
// checked as a read would check it: the card (open to all), the files'
// list (list_files, run as the caller) and a file (read_file of one byte,
// run as the caller: a file that does not exist yet may be subscribed to
// by a caller who may read files). A URI is at most MaxSubscribeURI bytes,
// in the form the face writes it, and a session holds at most
// MaxSubscriptions; they are dropped when the session ends. A change of
// the files sends notifications/resources/updated for the list and for
// every file URI a session subscribed to (a file's subscribers hear of any
// change of the files; they read again to see whether theirs did).
func (f *Face) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	if len(uri) > MaxSubscribeURI {
		return protocolToWire(protocol.Errorf(protocol.CodeInvalidParams,
			"invalid params: the URI is %d bytes, more than the %d bytes (1 KiB) a subscription may name: %q", len(uri), MaxSubscribeURI, protocol.Clip(uri, 100)))
	}
	c := subscriberOf(ctx, req)
	switch {
	case uri == CardURI:
	case uri == FilesURI:
		if _, perr := f.call(ctx, c, "list_files", json.RawMessage(`{}`)); perr != nil {
			return protocolToWire(perr)
		}
	case strings.HasPrefix(uri, FilesURI+"/"):
		name, err := url.PathUnescape(strings.TrimPrefix(uri, FilesURI+"/"))
		if err != nil || name == "" || strings.Contains(name, "/") || fileURI(name) != uri {
			return protocolToWire(protocol.Errorf(protocol.CodeInvalidParams,
				"invalid params: %q does not name a stored file as this face writes it (mcpv2://files/NAME, NAME path-escaped)", protocol.Clip(uri, logURI)))
		}
		args, _ := json.Marshal(map[string]any{"filename": name, "length": 1})
		if _, perr := f.call(ctx, c, "read_file", args); perr != nil && perr.Code != protocol.CodeFileNotFound {
			return protocolToWire(perr)
		}
	case strings.HasPrefix(uri, AgentsURI+"/"):
		return protocolToWire(protocol.Errorf(protocol.CodeInvalidParams,
			"invalid params: an agent's card (%s) has no updates to subscribe to; read it again to see it now", protocol.Clip(uri, logURI)))
	default:
		return protocolToWire(protocol.Errorf(protocol.CodeInvalidParams,
			"invalid params: %q is not a resource of this node (%s, %s, %s/NAME)", protocol.Clip(uri, logURI), CardURI, FilesURI, FilesURI))
	}
	if perr := f.subs.add(req.Session, uri, func() {
		f.wg.Add(1)
		go f.dropWithSession(req.Session)
	}); perr != nil {
		return protocolToWire(perr)
	}
	f.log.Debug("mcp: subscribed", "uri", protocol.Clip(uri, logURI), "caller", c.ID)
	return nil
}

// subscriberOf is callerOf for a subscription: the go-sdk's
// subscriptions/listen (MCP 2026-07-28) calls the handler with a request of
// its own, without the HTTP request's token, which the context still
// carries.
func subscriberOf(ctx context.Context, req *sdk.SubscribeRequest) protocol.Caller {
	if ex := req.GetExtra(); ex == nil || ex.TokenInfo == nil {
		if ti := auth.TokenInfoFromContext(ctx); ti != nil {
			if c, ok := ti.Extra[callerKey].(protocol.Caller); ok {
				return c
			}
		}
	}
	return callerOf(ctx, req)
}

// unsubscribe forgets one subscription of the session (the go-sdk forgets
// its own after this).
func (f *Face) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	f.subs.remove(req.Session, req.Params.URI)
	return nil
}

// keepDefault is the innermost receiving middleware: it keeps the go-sdk's
// own method handler, through which dropWithSession makes the go-sdk
// forget an ended session's subscriptions.
func (f *Face) keepDefault(next sdk.MethodHandler) sdk.MethodHandler {
	f.sdkHandler = next
	return next
}

// dropWithSession waits for ss to end, then drops its subscriptions: the
// face's, and the go-sdk's entries for its URIs, which the go-sdk would
// otherwise keep (empty) for the life of the server. The face's wg owns
// it; Close ends the sessions it waits for.
func (f *Face) dropWithSession(ss *sdk.ServerSession) {
	defer f.wg.Done()
	_ = ss.Wait()
	for _, uri := range f.subs.drop(ss) {
		if f.sdkHandler != nil {
			_, _ = f.sdkHandler(context.Background(), "resources/unsubscribe",
				&sdk.UnsubscribeRequest{Session: ss, Params: &sdk.UnsubscribeParams{URI: uri}})
		}
	}
}

// subscribed is who subscribed to which file URIs and the card, per
// session; the list of files is always updated. mu guards by and closed.
type subscribed struct {
	mu     sync.Mutex
	by     map[*sdk.ServerSession]map[string]bool
	closed bool // the face is closing: no more subscriptions
}

// add records that ss subscribed to uri, at most MaxSubscriptions per
// session; at ss's first it calls first, under the lock (close waits).
func (s *subscribed) add(ss *sdk.ServerSession, uri string, first func()) *protocol.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || ss == nil {
		return protocol.Errorf(protocol.CodeInternal, "internal error: the face is closing")
	}
	if s.by == nil {
		s.by = map[*sdk.ServerSession]map[string]bool{}
	}
	mine := s.by[ss]
	if mine[uri] {
		return nil
	}
	if len(mine) >= MaxSubscriptions {
		// -32602, not the store quotas' -32004: MCP clients (the go-sdk's)
		// read -32004 as "server is closing".
		return &protocol.Error{Code: protocol.CodeInvalidParams,
			Message: fmt.Sprintf("quota exceeded: this session holds %d subscriptions, the most one session may; unsubscribe from one first", MaxSubscriptions),
			Data:    map[string]any{"quota": "subscriptions per session", "limit": MaxSubscriptions}}
	}
	if mine == nil {
		mine = map[string]bool{}
		s.by[ss] = mine
		first()
	}
	mine[uri] = true
	return nil
}

// close refuses new subscriptions from now on and returns the sessions
// that hold some, for Close to end.
func (s *subscribed) close() []*sdk.ServerSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	out := make([]*sdk.ServerSession, 0, len(s.by))
	for ss := range s.by {
		out = append(out, ss)
	}
	return out
}

func (s *subscribed) remove(ss *sdk.ServerSession, uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by[ss], uri)
}

// drop forgets ss and returns the URIs it had subscribed to.
func (s *subscribed) drop(ss *sdk.ServerSession) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for u := range s.by[ss] {
		out = append(out, u)
	}
	delete(s.by, ss)
	return out
}

// list returns the list's URI and every file URI a session subscribed to.
func (s *subscribed) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{FilesURI: true}
	out := []string{FilesURI}
	for _, uris := range s.by {
		for u := range uris {
			if !seen[u] && strings.HasPrefix(u, FilesURI+"/") {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out
}

// clipLogger is l with every string value of a record clipped to logURI
// bytes (protocol.Clip), for the go-sdk, which logs the URIs and other
// strings a client sends whole.
func clipLogger(l *slog.Logger) *slog.Logger { return slog.New(clipHandler{l.Handler()}) }

type clipHandler struct{ slog.Handler }

func (h clipHandler) Handle(ctx context.Context, r slog.Record) error {
	level := r.Level
	if level == slog.LevelWarn && strings.Contains(r.Message, "rejected by transport") {
		// The go-sdk warns of each notification it could not deliver
		// (jsonrpc2.ErrRejected): a session whose client keeps no
		// standing stream, or has just left. Nothing is wrong with the
		// node, and a WARN per file change per such session buried the
		// log (issue 26): a detail, at Debug.
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		level = slog.LevelDebug
	}
	out := slog.NewRecord(r.Time, level, protocol.Clip(r.Message, logURI), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(clipAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h clipHandler) WithAttrs(as []slog.Attr) slog.Handler {
	cs := make([]slog.Attr, len(as))
	for i, a := range as {
		cs[i] = clipAttr(a)
	}
	return clipHandler{h.Handler.WithAttrs(cs)}
}

func (h clipHandler) WithGroup(name string) slog.Handler {
	return clipHandler{h.Handler.WithGroup(name)}
}

func clipAttr(a slog.Attr) slog.Attr {
	switch v := a.Value.Resolve(); v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, protocol.Clip(v.String(), logURI))
	case slog.KindGroup:
		g := v.Group()
		cs := make([]any, len(g))
		for i, ga := range g {
			cs[i] = clipAttr(ga)
		}
		return slog.Group(a.Key, cs...)
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}
