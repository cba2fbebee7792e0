package otlptest

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The receiver keeps what the SDK's OTLP/gRPC exporter sends it: ids,
// parent, name, kind and attributes; Close follows the Close rule.
func TestReceiver(t *testing.T) {
	r, err := New("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(r.Endpoint()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	_, span := tp.Tracer("test").Start(trace.ContextWithRemoteSpanContext(ctx, parent), "call",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("k", "v"), attribute.Int("n", 7)))
	span.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans, err := r.Wait(ctx, func(ss []Span) bool { return len(ss) == 1 })
	if err != nil {
		t.Fatal(err)
	}
	s := spans[0]
	if s.TraceID != parent.TraceID().String() || s.ParentSpanID != parent.SpanID().String() || s.SpanID != span.SpanContext().SpanID().String() ||
		s.Name != "call" || s.Kind.String() != "SPAN_KIND_SERVER" || s.Attributes["k"] != "v" || s.Attributes["n"] != "7" {
		t.Fatalf("received %+v", s)
	}
	testenv.CloseTwice(t, r)
}
