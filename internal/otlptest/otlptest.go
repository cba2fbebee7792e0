// Package otlptest runs a real OTLP trace receiver for tests: the
// OpenTelemetry collector's trace service (go.opentelemetry.io/proto/otlp,
// collector/trace/v1) over gRPC, which keeps the spans it is sent. A node
// started with --otlp-endpoint set to its Endpoint exports to it.
//
// It is imported by _test.go files only, and imports no package of the
// project.
package otlptest

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is what the receiver keeps of one span.
type Span struct {
	// TraceID, SpanID and ParentSpanID are lowercase hex; ParentSpanID is
	// "" for a root span.
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Kind is the OTLP span kind (tracepb.Span_SPAN_KIND_SERVER, …).
	Kind tracepb.Span_SpanKind
	// Attributes are the span's string and integer attributes, as text.
	Attributes map[string]string
	// Service is the resource's service.name.
	Service string
}

// Receiver is a running OTLP/gRPC trace receiver on a TCP listener.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer

	ln  net.Listener
	srv *grpc.Server
	wg  sync.WaitGroup

	mu      sync.Mutex
	spans   []Span
	changed chan struct{} // closed and replaced at each export
	closed  bool
}

// New starts a receiver listening on addr ("127.0.0.1:0": any free port on
// loopback; a lab test gives an address the namespaces reach).
func New(addr string) (*Receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("otlptest: listen %s: %w", addr, err)
	}
	return Serve(ln), nil
}

// Serve starts a receiver on ln, which it closes on Close (a lab test
// opens ln inside a network namespace).
func Serve(ln net.Listener) *Receiver {
	r := &Receiver{ln: ln, srv: grpc.NewServer(), changed: make(chan struct{})}
	collectortrace.RegisterTraceServiceServer(r.srv, r)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = r.srv.Serve(ln)
	}()
	return r
}

// Endpoint is the receiver's URL for --otlp-endpoint: http://HOST:PORT.
func (r *Receiver) Endpoint() string { return "http://" + r.ln.Addr().String() }

// Export implements the collector's trace service: it keeps the spans.
func (r *Receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
					Attributes: map[string]string{}, Service: service}
				for _, kv := range s.GetAttributes() {
					switch v := kv.GetValue().GetValue().(type) {
					case *commonpb.AnyValue_StringValue:
						sp.Attributes[kv.GetKey()] = v.StringValue
					case *commonpb.AnyValue_IntValue:
						sp.Attributes[kv.GetKey()] = fmt.Sprint(v.IntValue)
					}
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// Wait returns the spans received so far once done reports true of them,
// or ctx's error when it ends first.
func (r *Receiver) Wait(ctx context.Context, done func([]Span) bool) ([]Span, error) {
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return spans, fmt.Errorf("otlptest: %d spans received: %w", len(spans), ctx.Err())
		}
	}
}

// Close stops the receiver; a second call returns net.ErrClosed.
func (r *Receiver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return net.ErrClosed
	}
	r.closed = true
	r.mu.Unlock()
	r.srv.Stop()
	r.wg.Wait()
	return nil
}
