package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsCountFacesE2E: a request is counted once, at the face it
// entered, with the outcome its caller got (callFace in node/metrics.go).
// Real processes: A serves the edge, MCP and A2A and --metrics; B is its
// mesh peer. After each request the test scrapes A's /metrics and checks
// the exact change of mcpv2_calls_total (by face, skill and outcome) and
// mcpv2_refusals_total (by face and reason), nothing else changed.
func TestMetricsCountFacesE2E(t *testing.T) {
	t.Parallel()
	aDir := t.TempDir()
	writeFile(t, filepath.Join(aDir, "policy.json"), `{"grants": {"http": ["ping", "orchestrate"]}}`)
	common := []string{"--no-mdns", "--no-nat"}
	bp := startEdgeProc(t, "B", nil, append([]string{"--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0"}, common...)...)
	bID := bp.first("MCPV2_PEER_ID")
	port := edgeFreePort(t, "127.0.0.1")
	ap := startEdgeProc(t, "A", nil, append([]string{"--data-dir", aDir, "--listen", "/ip4/127.0.0.1/tcp/0",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1", "--bootstrap", bp.tcpAddr(t), "--metrics", "127.0.0.1:0"}, common...)...)
	metricsURL := ap.first("MCPV2_METRICS")
	a := newEdgePeer(t, "A", ap)
	a.client = edgeHTTPClient(t, "", nil)
	tok := a.anonSession(t, a.client).SessionID
	edgeWaitGateway(t, a.client, a.base, tok, bID)

	// step runs do and checks what it changed against want: "face skill
	// outcome" for mcpv2_calls_total, "refused face reason" for
	// mcpv2_refusals_total.
	step := func(name string, want map[string]float64, do func()) {
		t.Helper()
		before := scrapeCalls(t, metricsURL)
		do()
		got := scrapeCalls(t, metricsURL)
		for k, v := range before {
			if got[k] -= v; got[k] == 0 {
				delete(got, k)
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: counted %v, want %v", name, got, want)
		}
	}

	step("gateway: one slot forwarded, one refused here", map[string]float64{
		"gateway remote ok": 1, "gateway remote refused": 1, "refused gateway policy": 1,
	}, func() {
		ans := a.post(t, a.client, "/mcpv2/peers/"+bID, tok, []any{edgeSlot(1, "ping", nil), edgeSlot(2, "delete_file", map[string]any{"filename": "x"})})
		if ans.status != http.StatusOK || !strings.Contains(string(ans.body), bID) || !strings.Contains(string(ans.body), "-32009") {
			t.Fatalf("gateway batch: %s", ans)
		}
	})

	mcpc := sdk.NewClient(&sdk.Implementation{Name: "metrics-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cs *sdk.ClientSession
	step("mcp: initialize", map[string]float64{"mcp none ok": 1}, func() {
		var err error
		cs, err = mcpc.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: a.base + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{tok: tok, base: a.client.Transport}}}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("mcp connect: %v", err)
		}
	})
	t.Cleanup(func() { _ = cs.Close() })
	mcpCall := func(tool string, args map[string]any, wantErr bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError != wantErr {
			t.Fatalf("mcp tools/call %s: %v %+v", tool, err, res)
		}
	}
	step("mcp: tools/call of a local skill", map[string]float64{"mcp ping ok": 1}, func() {
		mcpCall("ping", map[string]any{}, false)
	})
	step("mcp: mesh_call", map[string]float64{"mcp none ok": 1}, func() {
		mcpCall("mesh_call", map[string]any{"peer": bID, "skill": "ping", "arguments": map[string]any{}}, false)
	})
	step("mcp: mesh_call refused here", map[string]float64{"mcp none refused": 1, "refused mcp policy": 1}, func() {
		mcpCall("mesh_call", map[string]any{"peer": bID, "skill": "delete_file", "arguments": map[string]any{"filename": "x"}}, true)
	})

	// A peer's MCP face: its check that the peer answers is not counted,
	// its forwarded call is, under mcp with skill remote.
	var ps *sdk.ClientSession
	step("mcp of a peer: initialize", map[string]float64{"mcp none ok": 1}, func() {
		var err error
		ps, err = mcpc.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: a.base + "/peers/" + bID + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{tok: tok, base: a.client.Transport}}}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("mcp connect to the peer face: %v", err)
		}
	})
	t.Cleanup(func() { _ = ps.Close() })
	step("mcp of a peer: tools/call", map[string]float64{"mcp remote ok": 1}, func() {
		res, err := ps.CallTool(ctx, &sdk.CallToolParams{Name: "ping", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("peer face tools/call ping: %v %+v", err, res)
		}
	})

	step("a2a: message/send running one skill", map[string]float64{"a2a none ok": 1}, func() {
		body := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{
			"kind": "message", "role": "user", "messageId": "metrics-test-1",
			"parts": []any{map[string]any{"kind": "data", "data": map[string]any{"skill": "ping", "arguments": map[string]any{}}}}}}}
		ans := a.post(t, a.client, "/a2a", tok, body)
		if ans.status != http.StatusOK || !strings.Contains(string(ans.body), `"completed"`) {
			t.Fatalf("a2a message/send: %s", ans)
		}
	})

	step("orchestrate: one call, its subtask not counted", map[string]float64{"http orchestrate ok": 1}, func() {
		plan := map[string]any{"subtasks": []any{map[string]any{"id": "p", "text": "ping a peer", "skill": "ping", "arguments": map[string]any{}}}}
		res, e := a.call(t, tok, "orchestrate", map[string]any{"request": "ping a peer", "plan": plan})
		if e != nil {
			t.Fatalf("orchestrate: %+v", e)
		}
		var r struct {
			Subtasks []struct {
				Status string `json:"status"`
			} `json:"subtasks"`
		}
		if json.Unmarshal(res, &r) != nil || len(r.Subtasks) != 1 {
			t.Fatalf("orchestrate: %s", res)
		}
	})
}

// bearer sends tok as Authorization: Bearer on every request.
type bearer struct {
	tok  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return b.base.RoundTrip(r)
}

// scrapeMetrics reads and parses the node's /metrics at u.
func scrapeMetrics(t *testing.T, u string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return fams
}

// scrapeCalls reads the node's /metrics at u: mcpv2_calls_total as "face
// skill outcome" (summed over caller kinds) and mcpv2_refusals_total as
// "refused face reason", zero series left out.
func scrapeCalls(t *testing.T, u string) map[string]float64 {
	t.Helper()
	fams := scrapeMetrics(t, u)
	out := map[string]float64{}
	for _, name := range []string{"mcpv2_calls_total", "mcpv2_refusals_total"} {
		f := fams[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			k := fmt.Sprintf("%s %s %s", l["face"], l["skill"], l["outcome"])
			if name == "mcpv2_refusals_total" {
				k = "refused " + l["face"] + " " + l["reason"]
			}
			if v := m.GetCounter().GetValue(); v != 0 {
				out[k] += v
			}
		}
	}
	return out
}
