package mcp

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/protocol"
)

// The methods below let another face (the REST face, edge/rest) reach
// this face's MCP server for a caller without an MCP client of its own:
// each opens an in-memory go-sdk client session against the face's
// server, so that the request takes the MCP code path whole (the
// middleware, the node's dispatch, the audit lines), as a stdio or HTTP
// session's would.

// Session connects an in-memory MCP client session for c to the face's
// server, initialized; every request on it is c's. The caller closes it
// with the returned func, which also waits for the server's side to end.
// It fails when the face is closed.
func (f *Face) Session(ctx context.Context, c protocol.Caller) (*sdk.ClientSession, func(), error) {
	f.closeMu.Lock()
	closed := f.closed
	f.closeMu.Unlock()
	if closed {
		return nil, nil, errors.New("mcp: session: the face is closed")
	}
	ct, st := sdk.NewInMemoryTransports()
	ss, err := f.srv.Connect(withCaller(ctx, c), st, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp: session: %w", err)
	}
	cl := sdk.NewClient(&sdk.Implementation{Name: "mcpv2-rest", Version: f.version}, nil)
	cs, err := cl.Connect(ctx, ct, nil)
	if err != nil {
		_ = ss.Close()
		_ = ss.Wait()
		return nil, nil, fmt.Errorf("mcp: session: %w", err)
	}
	return cs, func() {
		_ = cs.Close()
		_ = ss.Wait()
	}, nil
}

// WireError turns an error of a Session's request into the mcpv2 error
// it carries (its JSON-RPC code and message); an error of the session
// itself is -32603.
func WireError(err error) *protocol.Error { return wireToProtocol(err) }

// ListPrompts lists the face's prompt templates for c, through an MCP
// session (Session): the names, descriptions and arguments that
// prompts/list gives. One audit line ("mcp prompts/list").
func (f *Face) ListPrompts(ctx context.Context, c protocol.Caller) ([]*sdk.Prompt, error) {
	cs, done, err := f.Session(ctx, c)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []*sdk.Prompt
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			return nil, wireToProtocol(err)
		}
		out = append(out, p)
	}
	return out, nil
}

// GetPrompt expands the prompt template name with args for c, through an
// MCP session (prompts/get): a *protocol.Error -32602 names a missing,
// unknown or invalid argument, or a prompt that does not exist. One audit
// line ("mcp prompts/get").
func (f *Face) GetPrompt(ctx context.Context, c protocol.Caller, name string, args map[string]string) (*sdk.GetPromptResult, error) {
	cs, done, err := f.Session(ctx, c)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: name, Arguments: args})
	if err != nil {
		return nil, wireToProtocol(err)
	}
	return res, nil
}
