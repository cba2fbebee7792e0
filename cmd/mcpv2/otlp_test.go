package main

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The exporting provider's sampler samples every call at this node: a
// root, and the child of a caller's traceparent whether it says sampled or
// not; the child is marked sampled, for the next hop.
func TestSamplerIgnoresCallersFlags(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tp.Tracer("t")
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: flags, Remote: true})
		_, span := tr.Start(trace.ContextWithRemoteSpanContext(t.Context(), parent), "call")
		if !span.IsRecording() || !span.SpanContext().IsSampled() {
			t.Fatalf("under a remote parent with flags %v: recording %v, sampled %v", flags, span.IsRecording(), span.SpanContext().IsSampled())
		}
		span.End()
	}
	_, root := tr.Start(t.Context(), "root")
	root.End()
	if n := len(exp.GetSpans()); n != 3 {
		t.Fatalf("%d spans exported, want 3", n)
	}
}
