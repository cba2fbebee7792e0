package mcp

import (
	"context"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/protocol"
)

// ResourceServer is what a Backend may also offer: static resources of
// its own (mcpv2 node --resources; *node.Node has it). With it, the face
// lists the resources a caller may read beside its mcpv2:// ones and
// reads them. Both methods are safe for concurrent use.
type ResourceServer interface {
	// Resources returns the resources c may read.
	Resources(c protocol.Caller) []protocol.ResourceInfo
	// ReadResource reads uri for c and writes its audit line: -32007 for
	// a URI it does not serve, -32009 for one c may not read.
	ReadResource(ctx context.Context, c protocol.Caller, uri string) (protocol.ResourceContents, *protocol.Error)
}

// isStatic says whether uri is for the backend's static resources: a URI
// of any scheme but mcpv2:, which the face serves itself.
func (f *Face) isStatic(uri string) bool {
	if _, ok := f.b.(ResourceServer); !ok {
		return false
	}
	scheme, _, ok := strings.Cut(uri, ":")
	return ok && !strings.EqualFold(scheme, "mcpv2")
}

// staticResources lists the backend's resources that c may read.
func (f *Face) staticResources(c protocol.Caller) []*sdk.Resource {
	rs, ok := f.b.(ResourceServer)
	if !ok {
		return nil
	}
	var out []*sdk.Resource
	for _, r := range rs.Resources(c) {
		out = append(out, &sdk.Resource{URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType, Size: r.Size})
	}
	return out
}

// readStatic reads a static resource for c; a URI the backend does not
// serve is MCP's resource-not-found.
func (f *Face) readStatic(ctx context.Context, c protocol.Caller, uri string) (*sdk.ReadResourceResult, error) {
	rs, ok := f.b.(ResourceServer)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	rc, perr := rs.ReadResource(ctx, c, uri)
	if perr != nil {
		if perr.Code == protocol.CodeFileNotFound {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		return nil, protocolToWire(perr)
	}
	out := &sdk.ResourceContents{URI: rc.URI, MIMEType: rc.MIMEType}
	if rc.Blob != nil {
		out.Blob = rc.Blob
	} else {
		out.Text = rc.Text
	}
	res := &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{out}}
	settleCacheScope(nil, res)
	return res, nil
}

// ListResources returns what MCP resources/list returns to c: the node's
// card and files index, c's view of the stored files, the mesh agents'
// cards the face has seen, and the static resources c may read. It is the
// REST face's list (GET /api/v1/mcp/resources).
func (f *Face) ListResources(ctx context.Context, c protocol.Caller) ([]*sdk.Resource, error) {
	res, err := f.listResources(ctx, c, &sdk.ListResourcesResult{Resources: []*sdk.Resource{cardResource(), filesIndex()}})
	if err != nil {
		return nil, err
	}
	return res.(*sdk.ListResourcesResult).Resources, nil
}

// ReadResource returns what MCP resources/read returns to c for uri, with
// the same audit lines: the card, the files index, a stored file, a mesh
// agent's card, or a static resource. An error is the JSON-RPC error MCP
// would answer (a *jsonrpc.Error, with its code). It is the REST face's
// read (POST /api/v1/mcp/resources/read).
func (f *Face) ReadResource(ctx context.Context, c protocol.Caller, uri string) (*sdk.ReadResourceResult, error) {
	if f.isStatic(uri) {
		return f.readStatic(ctx, c, uri)
	}
	ctx = withCaller(ctx, c)
	req := &sdk.ReadResourceRequest{Params: &sdk.ReadResourceParams{URI: uri}}
	var res *sdk.ReadResourceResult
	var err error
	switch {
	case uri == CardURI:
		res, err = f.readCard(ctx, req)
	case uri == FilesURI:
		res, err = f.readFilesIndex(ctx, req)
	case strings.HasPrefix(uri, FilesURI+"/"):
		res, err = f.readFile(ctx, req)
	case strings.HasPrefix(uri, AgentsURI+"/"):
		res, err = f.readAgent(ctx, req)
	default:
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	settleCacheScope(req, res)
	return res, nil
}
