package mcp_test

import (
	"strconv"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/mcp"
	"github.com/mcpv2/mcpv2/node"
)

// gaugeOrCounter is the value of name's one series on g (-1: none).
func gaugeOrCounter(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := -1.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if w, ok := labels[l.GetName()]; ok && w != l.GetValue() {
					continue metric
				}
			}
			if v < 0 {
				v = 0
			}
			v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return v
}

// TestMetricsSessions: the sessions gauge follows the sessions open, each
// initialized session is counted once, a tool call over MCP is counted by
// the node under face "mcp", and Close takes the face's collectors off.
func TestMetricsSessions(t *testing.T) {
	reg := prometheus.NewRegistry()
	n, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: []byte(secret), Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	e, err := edge.New(n, edge.Config{BindHost: "127.0.0.1", Secret: []byte(secret), Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	f, err := mcp.New(n, mcp.WithMetrics(reg))
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	f.Mount(e, mcp.HTTPOptions{})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); f.Close() })
	url := "http://127.0.0.1:" + strconv.Itoa(e.BoundPort()) + mcp.Path
	tok, _ := e.MintSession("127.0.0.1")

	one := connect(t, url, tok, eraSessions, nil)
	two := connect(t, url, tok, eraSessions, nil)
	waitValue(t, reg, "mcpv2_mcp_sessions", nil, 2)
	waitValue(t, reg, "mcpv2_mcp_sessions_opened_total", nil, 2)
	if _, err := one.CallTool(ctxT(t), &sdk.CallToolParams{Name: "ping", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if v := gaugeOrCounter(t, reg, "mcpv2_calls_total", map[string]string{"face": "mcp", "skill": "ping", "outcome": "ok", "caller": "secret"}); v != 1 {
		t.Errorf("mcp ping calls counted by the node: %v, want 1", v)
	}
	if v := gaugeOrCounter(t, reg, "mcpv2_edge_requests_max_in_flight", nil); v != edge.DefaultMaxInFlight {
		t.Errorf("edge max in flight: %v, want %d", v, edge.DefaultMaxInFlight)
	}
	if err := two.Close(); err != nil {
		t.Fatal(err)
	}
	waitValue(t, reg, "mcpv2_mcp_sessions", nil, 1)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mcpv2_mcp_sessions", "mcpv2_mcp_sessions_opened_total", "mcpv2_edge_requests_in_flight"} {
		if v := gaugeOrCounter(t, reg, name, nil); v != -1 {
			t.Errorf("%s still registered after Close (%v)", name, v)
		}
	}
}

// waitValue waits (at most 10 s) until name's value is want.
func waitValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v := gaugeOrCounter(t, g, name, labels)
		if v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after 10 s, want %v", name, v, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
