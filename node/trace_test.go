package node

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpv2/mcpv2/protocol"
)

const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID  = "00f067aa0ba902b7"
)

// testSpanContext is the span context of testTraceID and testSpanID, as a
// caller's span.
func testSpanContext(t testing.TB) trace.SpanContext {
	t.Helper()
	sc := ParseTraceparent("00-" + testTraceID + "-" + testSpanID + "-01")
	if !sc.IsValid() || sc.TraceID().String() != testTraceID || sc.SpanID().String() != testSpanID {
		t.Fatalf("ParseTraceparent of a valid traceparent: %v", sc)
	}
	return sc
}

// lastTrace returns the trace and span of n's last audit line, which must
// both be there and well formed.
func lastTrace(t testing.TB, n *Node) (tr, span string) {
	t.Helper()
	lines := readAudit(t, n)
	if len(lines) == 0 {
		t.Fatal("no audit line")
	}
	l := lines[len(lines)-1]
	tr, _ = l["trace"].(string)
	span, _ = l["span"].(string)
	if _, err := trace.TraceIDFromHex(tr); err != nil {
		t.Fatalf("audit line %v: trace %q: %v", l, tr, err)
	}
	if _, err := trace.SpanIDFromHex(span); err != nil {
		t.Fatalf("audit line %v: span %q: %v", l, span, err)
	}
	return tr, span
}

// A slot's context.traceparent makes the node's span of the call its
// child: the same trace id in the audit line, a span id of its own. One
// that is not valid is ignored: the call runs, in a new trace.
func TestSlotTraceparentInAuditLine(t *testing.T) {
	n := newTestNode(t, nil)
	anon := Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}
	for _, tc := range []struct {
		name, traceparent string
		same              bool
	}{
		{"valid", "00-" + testTraceID + "-" + testSpanID + "-01", true},
		{"valid, not sampled", "00-" + testTraceID + "-" + testSpanID + "-00", true},
		{"none", "", false},
		{"garbage", "not a traceparent", false},
		{"zero trace id", "00-00000000000000000000000000000000-" + testSpanID + "-01", false},
		{"zero span id", "00-" + testTraceID + "-0000000000000000-01", false},
		{"upper case", "00-" + strings.ToUpper(testTraceID) + "-" + testSpanID + "-01", false},
		{"version ff", "ff-" + testTraceID + "-" + testSpanID + "-01", false},
		{"short trace id", "00-" + testTraceID[2:] + "-" + testSpanID + "-01", false},
		{"oversized", "01-" + testTraceID + "-" + testSpanID + "-01-" + strings.Repeat("x", protocol.MaxTraceparent), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctxJSON, _ := json.Marshal(map[string]string{"traceparent": tc.traceparent})
			msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{}},"context":` + string(ctxJSON) + `}`
			out, refused := n.Handle(ctxT(t), anon, []byte(msg))
			var r protocol.Response
			if refused != nil || json.Unmarshal(out, &r) != nil || r.Error != nil {
				t.Fatalf("ping with traceparent %q: %s %v", tc.traceparent, out, refused)
			}
			tr, span := lastTrace(t, n)
			if (tr == testTraceID) != tc.same {
				t.Fatalf("trace %s with traceparent %q, want the caller's %s: %v", tr, tc.traceparent, testTraceID, tc.same)
			}
			if span == testSpanID {
				t.Fatalf("span %s is the caller's: the node's span must be new", span)
			}
		})
	}
}

// A face's span in ctx (the edge's) is the parent of the node's span of
// each slot, and a message refused whole is audited in it too.
func TestContextSpanInAuditLine(t *testing.T) {
	n := newTestNode(t, nil)
	ctx := trace.ContextWithSpanContext(ctxT(t), testSpanContext(t))
	anon := Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}
	for _, msg := range []string{slotJSON(1, "ping", "{}"), "[]"} {
		n.Handle(ctx, anon, []byte(msg))
		if tr, span := lastTrace(t, n); tr != testTraceID || (msg != "[]" && span == testSpanID) {
			t.Fatalf("%s: trace %s span %s, want trace %s and a span of the node's", msg, tr, span, testTraceID)
		}
	}
	// The span in ctx (the edge's: this node's) is the parent, not the
	// slot's own traceparent.
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"},"context":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01"}}`
	n.Handle(ctx, anon, []byte(msg))
	if tr, _ := lastTrace(t, n); tr != testTraceID {
		t.Fatalf("a slot's traceparent won over ctx's span: trace %s, want %s", tr, testTraceID)
	}
	// Without a span anywhere, every line still has a trace of its own.
	n.Handle(context.Background(), anon, []byte("[]"))
	if tr, _ := lastTrace(t, n); tr == testTraceID {
		t.Fatal("a message without a trace was audited in the last one's")
	}
}

// The node's calls out carry the current span's traceparent: a Client
// call, and a gateway Forward (which orchestrate subtasks use), so the
// peer's line has the same trace.
func TestCallsOutCarryTraceparent(t *testing.T) {
	a, b := pair(t, nil)
	ctx := trace.ContextWithSpanContext(ctxT(t), testSpanContext(t))
	if _, err := a.Client().CallSkill(ctx, addrOf(t, b), "ping", nil, protocol.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if tr, span := lastTrace(t, b); tr != testTraceID || span == testSpanID {
		t.Fatalf("Client call: B's line has trace %s span %s, want trace %s and a span of B's", tr, span, testTraceID)
	}
	// ctx's span replaces a slot's own traceparent, as in Forward below.
	slot := protocol.Slot{Method: protocol.MethodToolsCall, ID: json.RawMessage("1"), Params: json.RawMessage(`{"name":"ping"}`),
		Context: &protocol.SlotContext{Traceparent: "00-11111111111111111111111111111111-2222222222222222-01"}}
	if _, err := a.Client().Call(ctx, addrOf(t, b), []protocol.Slot{slot}, false, protocol.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if tr, _ := lastTrace(t, b); tr != testTraceID {
		t.Fatalf("Client call with the slot's own traceparent: B's line has trace %s, want ctx's %s", tr, testTraceID)
	}
	// Without a span in ctx the call carries none: B starts a trace.
	if _, err := a.Client().CallSkill(ctxT(t), addrOf(t, b), "ping", nil, protocol.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if tr, _ := lastTrace(t, b); tr == testTraceID {
		t.Fatal("a call without a span carried the last one's trace")
	}
	anon := Caller{ID: "ip:10.1.1.1", Via: "http", Kind: protocol.CallerAnonymous}
	// The caller's own traceparent in the slot is replaced by the
	// gateway's span: the gateway is the peer's parent.
	msg := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ping"},"context":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01"}}`
	out, err := a.Forward(ctx, anon, b.PeerID(), []byte(msg))
	if err != nil || !strings.Contains(string(out), `"pong":true`) {
		t.Fatalf("forward: %s %v", out, err)
	}
	if tr, _ := lastTrace(t, b); tr != testTraceID {
		t.Fatalf("Forward: B's line has trace %s, want %s", tr, testTraceID)
	}
}

// Traceparent formats what ParseTraceparent parses.
func TestTraceparentRoundTrip(t *testing.T) {
	sc := testSpanContext(t)
	v := Traceparent(trace.ContextWithSpanContext(context.Background(), sc))
	if v != "00-"+testTraceID+"-"+testSpanID+"-01" {
		t.Fatalf("Traceparent = %q", v)
	}
	if Traceparent(context.Background()) != "" {
		t.Fatal("Traceparent of a context without a span is not empty")
	}
}

// FuzzParseTraceparent: any value parses without panicking, within
// MaxTraceparent only, and what it gives back formats and parses again to
// the same span context.
func FuzzParseTraceparent(f *testing.F) {
	f.Add("00-" + testTraceID + "-" + testSpanID + "-01")
	f.Add("00-" + testTraceID + "-" + testSpanID + "-00")
	f.Add("01-" + testTraceID + "-" + testSpanID + "-01-extra")
	f.Add("ff-" + testTraceID + "-" + testSpanID + "-01")
	f.Add("00-00000000000000000000000000000000-" + testSpanID + "-01")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		sc := ParseTraceparent(v)
		if !sc.IsValid() {
			return
		}
		if len(v) > protocol.MaxTraceparent {
			t.Fatalf("a %d-byte traceparent was taken", len(v))
		}
		again := ParseTraceparent(Traceparent(trace.ContextWithSpanContext(context.Background(), sc)))
		if again.TraceID() != sc.TraceID() || again.SpanID() != sc.SpanID() || again.TraceFlags() != sc.TraceFlags() {
			t.Fatalf("%q: %v formats and parses as %v", v, sc, again)
		}
	})
}

// With a TracerProvider the node exports a server span per slot, named
// after the skill when it is registered here, else "unknown" (a made-up
// skill or method does not name spans), the child of the slot's
// traceparent, with the skill, face, outcome and caller kind. Close does
// not shut the provider down: it is the caller's, and still works after;
// its own Shutdown flushes the batch still held.
func TestNodeSpansExported(t *testing.T) {
	exp := &keptSpans{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour)))
	n, err := New(Config{DataDir: t.TempDir(), ListenAddrs: loopback, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	anon := Caller{ID: "ip:10.0.0.1", Via: "http", Kind: protocol.CallerAnonymous}
	long := strings.Repeat("x", 4000)
	msg := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"},"context":{"traceparent":"00-` + testTraceID + `-` + testSpanID + `-01"}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_files"}},` +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"made_up_` + long + `"}},` +
		`{"jsonrpc":"2.0","id":4,"method":"made/up/` + long + `"}]`
	n.Handle(ctxT(t), anon, []byte(msg))
	lineSpan := map[string]any{} // skill → its audit line's span
	for _, l := range readAudit(t, n) {
		skill, _ := l["skill"].(string)
		lineSpan[skill] = l["span"]
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if got := exp.get(); len(got) != 0 {
		t.Fatalf("%d spans exported by the node's Close: it shut down a provider it does not own", len(got))
	}
	if _, s := tp.Tracer("t").Start(ctxT(t), "after"); !s.IsRecording() {
		t.Fatal("the provider was shut down by the node's Close")
	} else {
		s.End()
	}
	if err := tp.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	spans := exp.get()
	if len(spans) != 5 {
		t.Fatalf("%d spans exported on Shutdown, want 5 (4 slots and one of the test's)", len(spans))
	}
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	attrs := func(s tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	if len(byName["ping"]) != 1 || len(byName["list_files"]) != 1 || len(byName["unknown"]) != 2 {
		t.Fatalf("span names %v, want ping, list_files and unknown twice", byName)
	}
	ping, refused := byName["ping"][0], byName["list_files"][0]
	if ping.Parent.SpanID().String() != testSpanID || ping.SpanContext.TraceID().String() != testTraceID || ping.SpanKind != trace.SpanKindServer {
		t.Fatalf("ping's span: parent %v, context %v, kind %v", ping.Parent, ping.SpanContext, ping.SpanKind)
	}
	if a := attrs(ping); a["mcpv2.skill"] != "ping" || a["mcpv2.face"] != "http" || a["mcpv2.outcome"] != "ok" || a["mcpv2.caller_kind"] != "anonymous" {
		t.Fatalf("ping's span attributes %v", a)
	}
	if a := attrs(refused); a["mcpv2.outcome"] != "error" || a["mcpv2.code"] != "-32009" || refused.Parent.IsValid() {
		t.Fatalf("list_files's span (refused, no traceparent: a root): attributes %v, parent %v", a, refused.Parent)
	}
	for _, s := range byName["unknown"] {
		for k, v := range attrs(s) {
			if strings.Contains(v, "made") {
				t.Fatalf("the span of a made-up skill or method has %s=%q", k, protocol.Clip(v, 40))
			}
		}
	}
	for skill, s := range map[string]tracetest.SpanStub{"ping": ping, "list_files": refused} {
		if lineSpan[skill] != s.SpanContext.SpanID().String() {
			t.Fatalf("the audit line of %s names span %v, its span is %s", skill, lineSpan[skill], s.SpanContext.SpanID())
		}
	}
}

// The ids-only provider makes a new span id in the parent's trace (ctx's
// span, remote or not) or a new trace, always sampled (a caller's flags do
// not travel on) and never with the parent's tracestate; it records
// nothing.
func TestIDsTracerProviderSpans(t *testing.T) {
	tr := NewIDsTracerProvider().Tracer("t")
	ts, err := trace.ParseTraceState("vendor=secret")
	if err != nil {
		t.Fatal(err)
	}
	parent := testSpanContext(t).WithTraceFlags(0).WithTraceState(ts)
	for name, ctx := range map[string]context.Context{
		"remote": trace.ContextWithRemoteSpanContext(ctxT(t), parent),
		"local":  trace.ContextWithSpanContext(ctxT(t), parent),
	} {
		ctx2, span := tr.Start(ctx, "x")
		sc := span.SpanContext()
		if sc.TraceID() != parent.TraceID() || sc.SpanID() == parent.SpanID() || !sc.SpanID().IsValid() || !sc.IsSampled() || sc.TraceState().Len() != 0 || sc.IsRemote() || span.IsRecording() {
			t.Fatalf("%s parent: child %v (recording %v)", name, sc, span.IsRecording())
		}
		if !trace.SpanContextFromContext(ctx2).Equal(sc) {
			t.Fatalf("%s parent: the context does not carry the new span", name)
		}
		if _, again := tr.Start(ctx, "x"); again.SpanContext().SpanID() == sc.SpanID() {
			t.Fatalf("%s parent: two spans with one id", name)
		}
		if _, root := tr.Start(ctx, "x", trace.WithNewRoot()); root.SpanContext().TraceID() == parent.TraceID() {
			t.Fatalf("%s parent: WithNewRoot kept the trace", name)
		}
	}
	_, span := tr.Start(ctxT(t), "x")
	if sc := span.SpanContext(); !sc.IsValid() || !sc.IsSampled() {
		t.Fatalf("without a parent: %v, want a new sampled trace", sc)
	}
}

// keptSpans is an exporter that keeps what it is given, also after
// Shutdown (the SDK's in-memory exporter forgets them then).
type keptSpans struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (k *keptSpans) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.spans = append(k.spans, spans...)
	return nil
}

func (k *keptSpans) Shutdown(context.Context) error { return nil }

func (k *keptSpans) get() tracetest.SpanStubs {
	k.mu.Lock()
	defer k.mu.Unlock()
	return tracetest.SpanStubsFromReadOnlySpans(k.spans)
}
