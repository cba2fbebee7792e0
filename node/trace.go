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

	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// Traces across hops (docs/spec.md, slot context traceparent): every call a
// node runs has a span — an OpenTelemetry span when Config.TracerProvider
// is set, else only its ids — that is the child of the caller's span (the
// slot's context.traceparent, or the edge's span of the HTTP request), or
// the root of a new trace. Its trace and span ids go in the call's audit
// line, and every call the node makes for it (gateway forward, orchestrate
// subtask, Client call) carries its traceparent.

// traceContext is the one parser and formatter of traceparent values, the
// W3C Trace Context propagator of OpenTelemetry.
var traceContext propagation.TraceContext

// traceparentCarrier carries one traceparent value for traceContext.
type traceparentCarrier struct{ value string }

func (c *traceparentCarrier) Get(key string) string {
	if key == "traceparent" {
		return c.value
	}
	return ""
}

func (c *traceparentCarrier) Set(key, value string) {
	if key == "traceparent" {
		c.value = value
	}
}

func (c *traceparentCarrier) Keys() []string { return []string{"traceparent"} }

// ParseTraceparent returns the span context a traceparent value names, as
// a remote parent; an empty, invalid or oversized (over
// protocol.MaxTraceparent) value gives the zero SpanContext (not valid):
// the call then starts a new trace.
func ParseTraceparent(v string) trace.SpanContext {
	if v == "" || len(v) > protocol.MaxTraceparent {
		return trace.SpanContext{}
	}
	ctx := traceContext.Extract(context.Background(), &traceparentCarrier{value: v})
	return trace.SpanContextFromContext(ctx)
}

// Traceparent returns the traceparent value of ctx's span, "" when ctx has
// none.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	var c traceparentCarrier
	traceContext.Inject(ctx, &c)
	return c.value
}

// tracer starts the spans of a node's calls; its zero value (no
// TracerProvider) makes span contexts only, at the cost of two random
// numbers, so that audit lines and the calls out carry trace ids without
// the SDK.
type tracer struct {
	t trace.Tracer // nil: ids only
}

func newTracer(tp trace.TracerProvider) tracer {
	if tp == nil {
		return tracer{}
	}
	return tracer{t: tp.Tracer("github.com/mcpv2/mcpv2/node")}
}

// start begins the span of a call named name: the child of parent when it
// is valid, else of ctx's span, else the root of a new trace. The returned
// context carries it; End it when the call is done.
func (t tracer) start(ctx context.Context, name string, parent trace.SpanContext) (context.Context, trace.Span) {
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	if t.t != nil {
		return t.t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	}
	ctx = trace.ContextWithSpanContext(ctx, childSpanContext(trace.SpanContextFromContext(ctx)))
	return ctx, trace.SpanFromContext(ctx)
}

// childSpanContext returns a new span context in parent's trace, or in a
// new (sampled) trace when parent is not valid.
func childSpanContext(parent trace.SpanContext) trace.SpanContext {
	cfg := trace.SpanContextConfig{TraceID: parent.TraceID(), TraceFlags: parent.TraceFlags(), TraceState: parent.TraceState()}
	if !parent.IsValid() {
		cfg = trace.SpanContextConfig{TraceFlags: trace.FlagsSampled}
		for !cfg.TraceID.IsValid() {
			binary.BigEndian.PutUint64(cfg.TraceID[:8], rand.Uint64())
			binary.BigEndian.PutUint64(cfg.TraceID[8:], rand.Uint64())
		}
	}
	for !cfg.SpanID.IsValid() {
		binary.BigEndian.PutUint64(cfg.SpanID[:], rand.Uint64())
	}
	return trace.NewSpanContext(cfg)
}

// endSpan ends the span of a call with what it is safe to export about it:
// the skill, the face it came through, its outcome and the caller's kind
// (never its arguments, result or credentials).
func endSpan(span trace.Span, c Caller, skill string, perr *protocol.Error) {
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
	if skill != "" {
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
// one (a message refused before any slot ran, on a stream that carried
// no trace) the line gets ids of its own, in a new trace, so that every
// audit line has a trace id.
func traceFields(ctx context.Context, rec *store.AuditRecord) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		sc = childSpanContext(sc)
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [48]byte // both in one string: one allocation per line, not four
	hex.Encode(b[:32], tid[:])
	hex.Encode(b[32:], sid[:])
	ids := string(b[:])
	rec.Trace, rec.Span = ids[:32], ids[32:]
}
