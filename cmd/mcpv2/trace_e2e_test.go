package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/otlptest"
	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestTraceAcrossGateway follows one request that a client sends with a
// traceparent header to A's edge gateway, which forwards it to B over the
// mesh: `mcpv2 audit --trace ID` finds its line on each node, and the two
// nodes' spans, exported with --otlp-endpoint to a real OTLP/gRPC
// receiver, are one trace, B's span the child of A's and A's the child of
// the client's. The client's traceparent says "not sampled": the nodes
// export their spans all the same (a caller does not decide that).
func TestTraceAcrossGateway(t *testing.T) {
	t.Parallel()
	rcv, err := otlptest.New("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcv.Close() })
	common := []string{"--no-mdns", "--no-nat", "--otlp-endpoint", rcv.Endpoint()}
	b := startNode(t, "", common...)
	port := testenv.FreePort(t)
	a := startNode(t, "", append([]string{"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1", "--bootstrap", b.tcpAddr(t)}, common...)...)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(c.CloseIdleConnections)

	ans := edgeDo(t, c, http.MethodGet, base+"/mcpv2/session", nil, nil)
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(ans.body, &s); err != nil || s.SessionID == "" {
		t.Fatalf("session: %s", ans)
	}
	edgeWaitGateway(t, c, base, s.SessionID, b.peerID)

	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ans = edgeDo(t, c, http.MethodPost, base+"/mcpv2/peers/"+b.peerID,
		map[string]string{"X-MCPV2-Session": s.SessionID, "traceparent": "00-" + traceID + "-" + clientSpan + "-00", "tracestate": "vendor=secret"},
		edgeSlot(1, "ping", map[string]string{"payload": "traced"}))
	if ans.status != http.StatusOK || !bytes.Contains(ans.body, []byte(b.peerID)) {
		t.Fatalf("gateway call: %s", ans)
	}

	aLine := auditTraceLine(t, a.dataDir, traceID)
	bLine := auditTraceLine(t, b.dataDir, traceID)
	if !strings.HasPrefix(aLine.Method, "http POST /mcpv2/peers/") || bLine.Skill != "ping" || bLine.Auth != "forwarded" {
		t.Fatalf("audit lines of the trace: A %+v, B %+v", aLine, bLine)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spans, err := rcv.Wait(ctx, func(ss []otlptest.Span) bool {
		n := 0
		for _, sp := range ss {
			if sp.TraceID == traceID {
				n++
			}
		}
		return n >= 2
	})
	if err != nil {
		t.Fatal(err)
	}
	bySpan := map[string]otlptest.Span{}
	for _, sp := range spans {
		if sp.TraceID == traceID {
			bySpan[sp.SpanID] = sp
		}
	}
	aSpan, ok := bySpan[aLine.Span]
	if !ok || aSpan.ParentSpanID != clientSpan || aSpan.Attributes["mcpv2.face"] != "gateway" || aSpan.Service != "mcpv2" {
		t.Fatalf("A's span %s (its audit line's) %+v, want the child of %s; spans of the trace: %+v", aLine.Span, aSpan, clientSpan, bySpan)
	}
	bSpan, ok := bySpan[bLine.Span]
	if !ok || bSpan.ParentSpanID != aSpan.SpanID || bSpan.Name != "ping" || bSpan.Attributes["mcpv2.outcome"] != "ok" ||
		bSpan.Attributes["mcpv2.caller_kind"] != "forwarded" {
		t.Fatalf("B's span %s (its audit line's) %+v, want ping, the child of A's %s; spans of the trace: %+v", bLine.Span, bSpan, aSpan.SpanID, bySpan)
	}
}

// traceLine is what TestTraceAcrossGateway reads of an audit line.
type traceLine struct {
	Method, Skill, Auth, Trace, Span string
}

// auditTraceLine runs `mcpv2 audit --trace ID --json` on dataDir and
// returns its one line.
func auditTraceLine(t *testing.T, dataDir, traceID string) traceLine {
	t.Helper()
	out, errs, code := run(t, "audit", "--data-dir", dataDir, "--trace", traceID, "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 1 {
		t.Fatalf("mcpv2 audit --trace %s on %s: exit %d, %d lines: %s %s", traceID, dataDir, code, len(lines), out, errs)
	}
	var l traceLine
	if err := json.Unmarshal([]byte(lines[0]), &l); err != nil || l.Trace != traceID || len(l.Span) != 16 {
		t.Fatalf("audit line %s: %v", lines[0], err)
	}
	return l
}

// A bad --trace or --otlp-endpoint is refused, naming the flag and what it
// wants.
func TestTraceFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := run(t, "audit", "--data-dir", dir, "--trace", "4BF92F3577B34DA6A3CE929D0E0E4736"); code == 0 || !strings.Contains(errs, "--trace") || !strings.Contains(errs, "32 lowercase hex") {
		t.Errorf("audit --trace in upper case: exit %d, %q", code, errs)
	}
	for _, ep := range []string{"localhost:4317", "ftp://127.0.0.1:4317", "http://127.0.0.1:4317/v1/traces"} {
		_, errs, code := run(t, "node", "--data-dir", dir, "--no-mesh", "--listen", "/ip4/127.0.0.1/tcp/0", "--otlp-endpoint", ep)
		if code == 0 || !strings.Contains(errs, "--otlp-endpoint") || !strings.Contains(errs, "http://HOST:PORT") {
			t.Errorf("--otlp-endpoint %s: exit %d, %q", ep, code, errs)
		}
	}
}
