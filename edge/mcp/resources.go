package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

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

func fileURI(name string) string    { return FilesURI + "/" + url.PathEscape(name) }
func agentURI(peerID string) string { return AgentsURI + "/" + peerID }
func filesIndex() *sdk.Resource {
	return &sdk.Resource{URI: FilesURI, Name: "files", Title: "Stored files", MIMEType: "application/json",
		Description: "The node's stored files with size, sha256 and modification time (list_files); each is a resource mcpv2://files/NAME."}
}

// addResources registers the fixed resources and the templates; the files
// and the agents found are listed per request (listResources).
func (f *Face) addResources(s *sdk.Server) {
	s.AddResource(&sdk.Resource{URI: CardURI, Name: "card", Title: "This node's agent card", MIMEType: "application/json",
		Description: "The signed self-description of this mcpv2 node: PeerID, addresses, skills, capabilities."}, f.readCard)
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
	out.CacheScope = "private" // the list depends on who asks
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
	res, perr := protocol.OneResult(edge.HandleByForward(ctx, f.b.Forward, c, peer, []byte(`{"jsonrpc":"2.0","id":1,"method":"agent/card"}`)))
	f.b.Audit(c, "mcp resources/read agent", perr, start)
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

// subscribe accepts resources/subscribe for the files (the list and each
// file) and the card; the go-sdk keeps who subscribed. A change of the
// files sends notifications/resources/updated for the list and for every
// file URI anyone subscribed to (a file's subscribers hear of any change
// of the files; they read again to see whether theirs did).
func (f *Face) subscribe(_ context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	switch {
	case uri == FilesURI || uri == CardURI:
	case strings.HasPrefix(uri, FilesURI+"/"):
		f.subs.add(uri)
	default:
		return sdk.ResourceNotFoundError(uri)
	}
	return nil
}

// maxSubscribed bounds the file URIs remembered for updates.
const maxSubscribed = 4096

// subscribed remembers the file URIs subscribed to, besides the list,
// which is always updated. mu guards uris.
type subscribed struct {
	mu   sync.Mutex
	uris map[string]bool
}

func (s *subscribed) add(uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uris == nil {
		s.uris = map[string]bool{}
	}
	if len(s.uris) < maxSubscribed {
		s.uris[uri] = true
	}
}

// list returns the list's URI and the subscribed files'.
func (s *subscribed) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []string{FilesURI}
	for u := range s.uris {
		out = append(out, u)
	}
	return out
}
