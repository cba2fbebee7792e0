package edge

import (
	"context"
	"net/http"
	"net/http/httptest"
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
	tp := sdktrace.NewTracerProvider() // ids, nothing exported
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := startEdge(t, Config{TracerProvider: tp})
	for _, tc := range []struct {
		name, tp string
		same     bool
	}{
		{"valid", testTP, true},
		{"valid, not sampled", strings.TrimSuffix(testTP, "01") + "00", true},
		{"none", "", false},
		{"garbage", "garbage", false},
		{"zero trace", "00-00000000000000000000000000000000-" + testSpanID + "-01", false},
		{"oversized", testTP + "-" + strings.Repeat("x", protocol.MaxTraceparent), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{SessionHeader: e.token, "tracestate": "vendor=secret"}
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
				if sc.TraceState().Len() != 0 {
					t.Fatalf("%s %s: the caller's tracestate %q was taken", req.method, req.path, sc.TraceState())
				}
			}
		})
	}
}

// Without a TracerProvider (a library user's edge) the edge makes no span
// of its own: the backend gets the caller's traceparent as a remote span
// (the node gives its lines span ids of their own in that trace), or none.
func TestNoTracerProvider(t *testing.T) {
	e := startEdge(t, Config{})
	for _, tp := range []string{testTP, ""} {
		hdr := map[string]string{SessionHeader: e.token}
		if tp != "" {
			hdr["traceparent"] = tp
		}
		if status, _, b := e.do(t, "GET", "/mcpv2/health", nil, hdr); status != 200 {
			t.Fatalf("health: %d %s", status, b)
		}
		lines := e.b.auditLines()
		sc := lines[len(lines)-1].span
		if tp == "" && sc.IsValid() || tp != "" && (sc.TraceID().String() != testTraceID || sc.SpanID().String() != testSpanID || !sc.IsRemote()) {
			t.Fatalf("traceparent %q: the backend got span %v", tp, sc)
		}
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
	if status, _, _ := e.do(t, "MADE-UP-METHOD", "/mcpv2", nil, hdr); status != 405 {
		t.Fatalf("MADE-UP-METHOD /mcpv2: %d", status)
	}
	spans := exp.GetSpans()
	if len(spans) != 3 {
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
	if a := attrs(refused); a["mcpv2.outcome"] != "error" || a["mcpv2.code"] != "-32600" || refused.Name != "PUT /mcpv2" {
		t.Fatalf("refused span %s attributes %v", refused.Name, a)
	}
	if name := spans[2].Name; name != "_OTHER /mcpv2" {
		t.Fatalf("the span of a made-up HTTP method is named %q, want _OTHER /mcpv2", name)
	}
}

// edge.Client sends its ctx's span as the traceparent header.
func TestClientSendsTraceparent(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := startEdge(t, Config{TracerProvider: tp})
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

// edge.Client sends traceparent only: a tracestate in its ctx's span (a
// caller's, taken by a library user's own propagator) is not passed on.
func TestClientSendsNoTracestate(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Clone():
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	t.Cleanup(srv.Close)
	addr, err := protocol.ParseAddress(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := trace.ParseTraceState("vendor=secret")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: ts})
	_, _ = newClient(t).Call(trace.ContextWithSpanContext(t.Context(), sc), addr, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	h := <-got
	if h.Get("traceparent") != "00-01000000000000000000000000000000-0200000000000000-01" || h.Values("tracestate") != nil {
		t.Fatalf("sent traceparent %q tracestate %q", h.Get("traceparent"), h.Values("tracestate"))
	}
}

// The OAuth resource metadata, an open route outside open() and the faces,
// has the edge's span too, the child of the caller's traceparent.
func TestProtectedResourceSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := startEdge(t, Config{TracerProvider: tp, OIDCIssuers: []string{"http://127.0.0.1:1"}})
	if status, _, b := e.do(t, "GET", wellKnownResource, nil, map[string]string{"traceparent": testTP}); status != 200 {
		t.Fatalf("GET %s: %d %s", wellKnownResource, status, b)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "GET "+wellKnownResource || spans[0].Parent.SpanID().String() != testSpanID {
		t.Fatalf("spans %+v, want one GET %s, the child of the traceparent", spans, wellKnownResource)
	}
}
