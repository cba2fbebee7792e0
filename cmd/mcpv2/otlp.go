package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc/credentials"
)

// otlpEndpointUsage is the help of --otlp-endpoint.
const otlpEndpointUsage = "send a span of every call to this OpenTelemetry collector over OTLP/gRPC: http://HOST:PORT (plaintext) or https://HOST:PORT (TLS); off by default"

// sampler samples every call at this node: a root, and also the child of
// a caller's traceparent whatever its sampled flag says — a caller (any
// anonymous one) does not decide whether this node's calls are exported.
// The spans it samples carry the sampled flag on to the next hop.
var sampler = sdktrace.ParentBased(sdktrace.AlwaysSample(),
	sdktrace.WithRemoteParentNotSampled(sdktrace.AlwaysSample()))

// tracerShutdown bounds how long shutdownTracer waits for the last spans
// to be sent.
const tracerShutdown = 5 * time.Second

// shutdownTracer shuts tp down (nil: nothing to do), flushing its spans
// within tracerShutdown; a collector that does not take them costs a log
// line, not an error.
func shutdownTracer(tp *sdktrace.TracerProvider, log *slog.Logger) {
	if tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracerShutdown)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("trace export: spans not flushed", "err", err)
	}
}

// tracerProvider returns the OpenTelemetry TracerProvider that exports the
// node's and the edge's spans to the collector at endpoint (--otlp-endpoint)
// in batches, or nil when endpoint is empty (trace ids only, no SDK on the
// call path). Its owner, runningNode, shuts it down (shutdownTracer) after
// the node and the edge are closed, flushing what is left. The
// exporter's connection is made lazily: a collector that is down costs
// dropped spans and log lines, never a failed start.
func tracerProvider(endpoint string) (*sdktrace.TracerProvider, error) {
	if endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("--otlp-endpoint %q: want http://HOST:PORT (OTLP/gRPC in plaintext) or https://HOST:PORT (over TLS)", endpoint)
	}
	// The transport is set explicitly either way: the exporter takes
	// explicit credentials over OTEL_EXPORTER_OTLP_(TRACES_)INSECURE, so no
	// environment variable turns an https:// endpoint into plaintext.
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracegrpc.WithInsecure())
	} else {
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})))
	}
	exp, err := otlptracegrpc.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("--otlp-endpoint %q: %w", endpoint, err)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "mcpv2"))),
	), nil
}
