package main

import (
	"context"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// otlpEndpointUsage is the help of --otlp-endpoint.
const otlpEndpointUsage = "send a span of every call to this OpenTelemetry collector over OTLP/gRPC: http://HOST:PORT (plaintext) or https://HOST:PORT (TLS); off by default"

// tracerProvider returns the OpenTelemetry TracerProvider that exports the
// node's and the edge's spans to the collector at endpoint (--otlp-endpoint)
// in batches, or nil when endpoint is empty (trace ids only, no SDK on the
// call path). The node's Close shuts it down, flushing what is left. The
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
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("--otlp-endpoint %q: %w", endpoint, err)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "mcpv2"))),
	), nil
}
