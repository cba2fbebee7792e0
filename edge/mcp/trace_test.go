package mcp_test

import (
	"net/http"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An MCP client's traceparent header reaches the node through the face, in
// both eras: the node's line of a local tool call, and the peer's line of a
// mesh_call, are in the client's trace (the go-sdk runs a message in the
// context of the HTTP request that carried it, the edge's span with it).
func TestTraceparentThroughMCPFace(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := newRig(t, nil)
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			h := http.Header{}
			h.Set("Authorization", "Bearer "+r.secretToken())
			h.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
			c := sdk.NewClient(&sdk.Implementation{Name: "trace-test", Version: "1"}, nil)
			cs, err := c.Connect(ctxT(t), &sdk.StreamableClientTransport{Endpoint: r.url,
				HTTPClient: &http.Client{Transport: headerRT{h: h, rt: http.DefaultTransport}}, MaxRetries: -1},
				&sdk.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			for _, tc := range []struct {
				tool  string
				args  map[string]any
				lines func() []map[string]any
			}{
				{"ping", map[string]any{}, func() []map[string]any { return auditLines(t, r.a) }},
				{"mesh_call", map[string]any{"peer": r.b.PeerID(), "skill": "ping", "arguments": map[string]any{}},
					func() []map[string]any { return auditLines(t, r.b) }},
			} {
				res, err := cs.CallTool(ctxT(t), &sdk.CallToolParams{Name: tc.tool, Arguments: tc.args})
				if err != nil || res.IsError {
					t.Fatalf("%s: %v %+v", tc.tool, err, res)
				}
				lines := tc.lines()
				last := lines[len(lines)-1]
				if last["skill"] != "ping" || last["trace"] != traceID {
					t.Fatalf("%s: the node's line %v, want ping in trace %s", tc.tool, last, traceID)
				}
			}
		})
	}
}
