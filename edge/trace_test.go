package edge

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpv2/mcpv2/protocol"
)

const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID  = "00f067aa0ba902b7"
	testTP      = "00-" + testTraceID + "-" + testSpanID + "-01"
)

// lastSpan returns the span context of the backend's last audit line, which
// must be valid.
func (f *fakeBackend) lastSpan(t *testing.T) trace.SpanContext {
	t.Helper()
	lines := f.auditLines()
	if len(lines) == 0 {
		t.Fatal("no audit line")
	}
	sc := lines[len(lines)-1].span
	if !sc.IsValid() {
		t.Fatalf("audit line %+v without a span", lines[len(lines)-1])
	}
	return sc
}

// The edge's span of a request is the child of its traceparent header:
// the audit lines (the edge's own, and the backend's for the slots) have
// its trace id and a new span id. A header that is missing, invalid or
// oversized is ignored: a new trace, never a refusal.
func TestTraceparentHeader(t *testing.T) {
	e := startEdge(t, Config{})
	for _, tc := range []struct {
		name, tp string
		same     bool
	}{
		{"valid", testTP, true},
		{"none", "", false},
		{"garbage", "garbage", false},
		{"zero trace", "00-00000000000000000000000000000000-" + testSpanID + "-01", false},
		{"oversized", testTP + "-" + strings.Repeat("x", protocol.MaxTraceparent), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{SessionHeader: e.token}
			if tc.tp != "" {
				hdr["traceparent"] = tc.tp
			}
			for _, req := range []struct{ method, path, body string }{
				{"GET", "/mcpv2/health", ""},
				{"POST", "/mcpv2", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"}}`},
			} {
				var body []byte
				if req.body != "" {
					body = []byte(req.body)
				}
				if status, _, b := e.do(t, req.method, req.path, body, hdr); status != 200 {
					t.Fatalf("%s %s with traceparent %q: %d %s", req.method, req.path, tc.tp, status, b)
				}
				sc := e.b.lastSpan(t)
				if (sc.TraceID().String() == testTraceID) != tc.same || sc.SpanID().String() == testSpanID {
					t.Fatalf("%s %s with traceparent %q: audited in trace %s span %s", req.method, req.path, tc.tp, sc.TraceID(), sc.SpanID())
				}
			}
		})
	}
}

// With a TracerProvider the edge exports a server span per request, the
// child of the traceparent header, named after the route, with the face,
// outcome and caller kind; the audit line names that span.
func TestEdgeSpanExported(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := startEdge(t, Config{TracerProvider: tp})
	hdr := map[string]string{SessionHeader: e.token, "traceparent": testTP}
	if status, _, b := e.do(t, "POST", "/mcpv2/peers/"+testPeerID, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"}}`), hdr); status != 200 {
		t.Fatalf("gateway: %d %s", status, b)
	}
	sc := e.b.lastSpan(t)
	if status, _, _ := e.do(t, "PUT", "/mcpv2", nil, hdr); status != 405 {
		t.Fatalf("PUT /mcpv2: %d", status)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans exported, want 2: %+v", len(spans), spans)
	}
	attrs := func(s tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	gw, refused := spans[0], spans[1]
	if gw.Name != "POST /mcpv2/peers/{peer}" || gw.SpanKind != trace.SpanKindServer || gw.Parent.SpanID().String() != testSpanID ||
		gw.SpanContext.TraceID().String() != testTraceID || gw.SpanContext.SpanID() != sc.SpanID() {
		t.Fatalf("gateway span %s kind %v parent %s, context %v; audited in %v", gw.Name, gw.SpanKind, gw.Parent.SpanID(), gw.SpanContext, sc)
	}
	if a := attrs(gw); a["mcpv2.face"] != "gateway" || a["mcpv2.outcome"] != "ok" || a["mcpv2.caller_kind"] != "secret" {
		t.Fatalf("gateway span attributes %v", a)
	}
	if a := attrs(refused); a["mcpv2.outcome"] != "error" || a["mcpv2.code"] != "-32600" {
		t.Fatalf("refused span attributes %v", a)
	}
}

// edge.Client sends its ctx's span as the traceparent header.
func TestClientSendsTraceparent(t *testing.T) {
	e := startEdge(t, Config{})
	c := newClient(t)
	addr, err := protocol.ParseAddress(e.base)
	if err != nil {
		t.Fatal(err)
	}
	addr.SessionID = e.token
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(t.Context(), sc)
	if _, err := c.Call(ctx, addr, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"}}`)); err != nil {
		t.Fatal(err)
	}
	if got := e.b.lastSpan(t); got.TraceID() != sc.TraceID() || got.SpanID() == sc.SpanID() {
		t.Fatalf("the edge audited trace %s span %s, want trace %s", got.TraceID(), got.SpanID(), sc.TraceID())
	}
}
