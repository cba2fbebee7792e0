package mcp

// This file is H3's stand-in (issue 23) for ListResources and
// ReadResource, whose owner is resources.go (H4's branch): at the merge,
// keep H4's methods and delete this file. The signatures are the same.

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/protocol"
)

// ListResources lists the resources c sees (resources/list, through an
// MCP session: the fixed ones, the caller's files, the agents found).
func (f *Face) ListResources(ctx context.Context, c protocol.Caller) ([]*sdk.Resource, error) {
	cs, done, err := f.Session(ctx, c)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []*sdk.Resource
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			return nil, wireToProtocol(err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ReadResource reads the resource uri for c (resources/read, through an
// MCP session); an unknown uri is the MCP error the server answers.
func (f *Face) ReadResource(ctx context.Context, c protocol.Caller, uri string) (*sdk.ReadResourceResult, error) {
	cs, done, err := f.Session(ctx, c)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, wireToProtocol(err)
	}
	return res, nil
}
