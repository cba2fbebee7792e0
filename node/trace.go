package node

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// Traces across hops (docs/spec.md, slot context traceparent): every call a
// node runs has a span — an OpenTelemetry span when Config.TracerProvider
// is the SDK's, else only its ids (NewIDsTracerProvider) — that is the
// child of the caller's span (the edge's span of the HTTP request, else
// the slot's context.traceparent), or the root of a new trace. Its trace and span ids go in the call's audit
// line, and every call the node makes for it (gateway forward, orchestrate
// subtask, Client call) carries its traceparent.

// traceContext is the one parser and formatter of traceparent values, the
// W3C Trace Context propagator of OpenTelemetry, always through a
// protocol.TraceparentCarrier (no tracestate is taken or passed on).
var traceContext propagation.TraceContext

// ParseTraceparent returns the span context a traceparent value names, as
// a remote parent; an empty, invalid or oversized (over
// protocol.MaxTraceparent) value gives the zero SpanContext (not valid):
// the call then starts a new trace.
func ParseTraceparent(v string) trace.SpanContext {
	if v == "" || len(v) > protocol.MaxTraceparent {
		return trace.SpanContext{}
	}
	ctx := traceContext.Extract(context.Background(), &protocol.TraceparentCarrier{Value: v})
	return trace.SpanContextFromContext(ctx)
}

// Traceparent returns the traceparent value of ctx's span, "" when ctx has
// none.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	var c protocol.TraceparentCarrier
	traceContext.Inject(ctx, &c)
	return c.Value
}

// NewIDsTracerProvider returns the TracerProvider of a node without
// --otlp-endpoint: its spans record nothing and are exported nowhere, they
// are only ids — a new span id in the parent's trace (ctx's span), or in a
// new trace — so that audit lines and the calls out carry trace ids at the
// cost of two random numbers, without the SDK. Every span it makes is
// marked sampled, whatever the parent says (the caller does not decide
// whether this node's calls are exported further on). It holds nothing: no
// Shutdown. cmd passes one to both node.Config.TracerProvider (New's
// default) and edge.Config.TracerProvider.
func NewIDsTracerProvider() trace.TracerProvider { return idsProvider{} }

type idsProvider struct{ embedded.TracerProvider }

func (idsProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return idsTracer{} }

type idsTracer struct{ embedded.Tracer }

// Start returns a context with a new span (not recording): the child of
// ctx's span, or the root of a new trace (with trace.WithNewRoot too).
func (idsTracer) Start(ctx context.Context, _ string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(ctx)
	if cfg := trace.NewSpanStartConfig(opts...); cfg.NewRoot() {
		parent = trace.SpanContext{}
	}
	ctx = trace.ContextWithSpanContext(ctx, childSpanContext(parent))
	return ctx, trace.SpanFromContext(ctx)
}

// childSpanContext returns a new sampled span context in parent's trace,
// or in a new trace when parent is not valid; never with a tracestate.
func childSpanContext(parent trace.SpanContext) trace.SpanContext {
	cfg := trace.SpanContextConfig{TraceID: parent.TraceID(), TraceFlags: trace.FlagsSampled}
	for !cfg.TraceID.IsValid() {
		binary.BigEndian.PutUint64(cfg.TraceID[:8], rand.Uint64())
		binary.BigEndian.PutUint64(cfg.TraceID[8:], rand.Uint64())
	}
	for !cfg.SpanID.IsValid() {
		binary.BigEndian.PutUint64(cfg.SpanID[:], rand.Uint64())
	}
	return trace.NewSpanContext(cfg)
}

// tracerOf is the node's tracer from tp (nil: NewIDsTracerProvider).
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = NewIDsTracerProvider()
	}
	return tp.Tracer("github.com/mcpv2/mcpv2/node")
}

// startSpan begins the node's span of slot s (SpanKindServer), named after
// its method when it is one of the protocol's, else "unknown" (a caller
// does not name spans). Its parent is ctx's span when ctx has one (an
// edge's span of the HTTP request: the span of the node that received the
// request is the parent of what it runs), else the slot's
// context.traceparent (a mesh caller's span), else none: a new trace.
func (n *Node) startSpan(ctx context.Context, s *protocol.Slot) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() && s.Context != nil {
		if parent := ParseTraceparent(s.Context.Traceparent); parent.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
		}
	}
	return n.tracer.Start(ctx, spanMethod(s.Method), serverSpan...)
}

// serverSpan are startSpan's options, made once: made per call, the
// option and the slice of options were two allocations of every call.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// spanMethod is the name of a slot's span: its method when it is one of
// the protocol's, else "unknown".
func spanMethod(method string) string {
	switch method {
	case protocol.MethodToolsList, protocol.MethodToolsCall, protocol.MethodAgentCard, protocol.MethodA2ACard:
		return method
	}
	return "unknown"
}

// skillLabel is how a skill is named outside the audit log (span names
// and attributes): its name when it is registered on this node, "" for
// none, else "unknown" — a caller's made-up name never leaves the node.
func (n *Node) skillLabel(skill string) string {
	if skill == "" {
		return ""
	}
	if _, ok := n.reg.Lookup(skill); ok {
		return skill
	}
	return skillUnknown
}

// endSpan ends the span of a call with what it is safe to export about it:
// the skill (skillLabel), the face it came through, its outcome and the
// caller's kind (never its arguments, result or credentials).
func (n *Node) endSpan(span trace.Span, c Caller, skill string, perr *protocol.Error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	outcome := "ok"
	if perr != nil {
		outcome = "error"
		span.SetStatus(codes.Error, "JSON-RPC error "+strconv.Itoa(perr.Code))
		span.SetAttributes(attribute.Int("mcpv2.code", perr.Code))
	}
	if skill = n.skillLabel(skill); skill != "" {
		span.SetName(skill)
	}
	span.SetAttributes(
		attribute.String("mcpv2.skill", skill),
		attribute.String("mcpv2.face", c.Via),
		attribute.String("mcpv2.outcome", outcome),
		attribute.String("mcpv2.caller_kind", c.Kind.String()),
	)
	span.End()
}

// traceFields puts the trace and span ids of ctx's span in rec; without
// one of this node's (a message refused before any slot ran, on a stream
// that carried no trace; an edge without a TracerProvider, whose ctx holds
// at most the caller's remote span) the line gets a span id of its own, in
// the caller's trace or a new one, so that every audit line has a trace id.
func traceFields(ctx context.Context, rec *store.AuditRecord) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || sc.IsRemote() { // none, or the caller's: not this node's span
		sc = childSpanContext(sc)
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [48]byte // both in one string: one allocation per line, not four
	hex.Encode(b[:32], tid[:])
	hex.Encode(b[32:], sid[:])
	ids := string(b[:])
	rec.Trace, rec.Span = ids[:32], ids[32:]
}
