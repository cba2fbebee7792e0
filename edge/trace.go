package edge

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpv2/mcpv2/protocol"
)

// traceContext is the one parser and formatter of traceparent headers, the
// W3C Trace Context propagator of OpenTelemetry, always through a
// protocol.TraceparentCarrier: a caller's tracestate is neither taken nor
// passed on.
var traceContext propagation.TraceContext

// startSpan begins the edge's span of the HTTP request r with s.tracer
// (Config.TracerProvider): the child of the request's traceparent header
// when that is valid, else the root of a new trace (an invalid, repeated or
// oversized header is ignored, never an error). r's context then carries
// it, for the node's audit lines and spans and the calls out; end ends it
// with the request's outcome.
func (s *Server) startSpan(r *http.Request, q *request) (*http.Request, func()) {
	ctx := r.Context()
	if v := r.Header.Values("traceparent"); len(v) == 1 && len(v[0]) <= protocol.MaxTraceparent {
		ctx = traceContext.Extract(ctx, &protocol.TraceparentCarrier{Value: v[0]})
	}
	ctx, span := s.tracer.Start(ctx, spanName(r), trace.WithSpanKind(trace.SpanKindServer))
	return r.WithContext(ctx), func() {
		if span.IsRecording() {
			outcome := "ok"
			if q.refused != nil {
				outcome = "error"
				span.SetStatus(codes.Error, "JSON-RPC error "+strconv.Itoa(q.refused.Code)) // as the node: a message may quote the caller
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

// Traced wraps an open route of the edge's or a face's that needs no
// credential (a card, the OAuth resource metadata) so that it has the
// edge's span as every other route does: its audit lines and the mesh
// calls it makes are in the caller's trace, and Refuse marks the span.
func (s *Server) Traced(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := s.newRequest(r)
		r, end := s.startSpan(r, q)
		defer end()
		h.ServeHTTP(w, r.WithContext(withRequest(r.Context(), q)))
	})
}

// spanName names the edge's span of r after its method, one of HTTP's
// (else "_OTHER": a caller does not name spans), and its route pattern
// (not the path): "POST /mcpv2/peers/{peer}".
func spanName(r *http.Request) string {
	m := r.Method
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
	default:
		m = "_OTHER"
	}
	p := r.Pattern
	if i := strings.IndexByte(p, ' '); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		p = "/"
	}
	return m + " " + p
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

// injectTraceparent sets the traceparent header of an outgoing request to
// ctx's span, when it has one.
func injectTraceparent(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		var c protocol.TraceparentCarrier
		traceContext.Inject(ctx, &c)
		h.Set("traceparent", c.Value)
	}
}
