package edge

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpv2/mcpv2/protocol"
)

// traceContext is the one parser and formatter of traceparent headers, the
// W3C Trace Context propagator of OpenTelemetry (the node parses a slot's
// context.traceparent with it too).
var traceContext propagation.TraceContext

// startSpan begins the edge's span of the HTTP request r (Config.TracerProvider:
// an OpenTelemetry span; nil: its ids only): the child of the request's
// traceparent header when that is valid, else the root of a new trace (an
// invalid or oversized header is ignored, never an error). r's context then
// carries it, for the node's audit lines and spans and the calls out; end
// ends it with the request's outcome.
func (s *Server) startSpan(r *http.Request, q *request) (*http.Request, func()) {
	ctx := r.Context()
	if v := r.Header.Values("traceparent"); len(v) == 1 && len(v[0]) <= protocol.MaxTraceparent {
		ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	var span trace.Span
	if s.tracer != nil {
		ctx, span = s.tracer.Start(ctx, spanName(r), trace.WithSpanKind(trace.SpanKindServer))
	} else {
		ctx = trace.ContextWithSpanContext(ctx, childSpanContext(trace.SpanContextFromContext(ctx)))
		span = trace.SpanFromContext(ctx)
	}
	return r.WithContext(ctx), func() {
		if span.IsRecording() {
			outcome := "ok"
			if q.refused != nil {
				outcome = "error"
				span.SetStatus(codes.Error, q.refused.Message)
				span.SetAttributes(attribute.Int("mcpv2.code", q.refused.Code))
			}
			span.SetAttributes(
				attribute.String("mcpv2.face", faceOf(r.URL.Path)),
				attribute.String("mcpv2.outcome", outcome),
				attribute.String("mcpv2.caller_kind", q.caller.Kind.String()),
			)
		}
		span.End()
	}
}

// spanName names the edge's span of r after its route: "POST /mcpv2/peers/{peer}".
func spanName(r *http.Request) string {
	p := r.Pattern
	if i := strings.IndexByte(p, ' '); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		p = "/"
	}
	return protocol.Clip(r.Method, 20) + " " + p
}

// faceOf names the face a request path is for, with the names of the
// node's metrics (the face label of mcpv2_calls_total): a face of a mesh
// peer is its kind's.
func faceOf(path string) string {
	switch {
	case strings.HasPrefix(path, "/mcpv2/peers/"):
		return "gateway"
	case path == "/mcp" || strings.HasPrefix(path, "/mcp/"):
		return "mcp"
	case path == "/a2a" || strings.HasPrefix(path, "/a2a/"):
		return "a2a"
	case strings.HasPrefix(path, "/peers/") && strings.HasSuffix(path, "/mcp"):
		return "mcp"
	case strings.HasPrefix(path, "/peers/"):
		return "a2a"
	default:
		return "http"
	}
}

// childSpanContext returns a new span context in parent's trace, or in a
// new (sampled) trace when parent is not valid: the span ids of an edge
// without a TracerProvider.
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

// injectTraceparent sets the traceparent header of an outgoing request to
// ctx's span, when it has one.
func injectTraceparent(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		traceContext.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
