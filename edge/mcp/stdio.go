package mcp

import (
	"context"
	"io"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpv2/mcpv2/protocol"
)

// MaxStdioLine caps one message on stdio: the mesh's message cap and room
// for its JSON-RPC envelope. A longer line ends the session with an error
// (the go-sdk cannot skip it and go on).
const MaxStdioLine = protocol.DefaultMaxMessage + 64<<10

// ServeStdio serves one MCP session on in and out (MCP's stdio transport:
// one JSON-RPC message a line) for the caller c, until ctx ends, in
// closes, or the client ends the session. Only MCP is written to out. A
// stdio session is its own caller: mcpv2 mcp gives it the node owner's
// trust (it runs as the user who holds the node's key).
func (f *Face) ServeStdio(ctx context.Context, c protocol.Caller, in io.ReadCloser, out io.WriteCloser) error {
	c.Via = "mcp"
	return f.srv.Run(withCaller(ctx, c), &sdk.IOTransport{Reader: in, Writer: out, MaxLineLength: MaxStdioLine})
}
