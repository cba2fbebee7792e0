package protocol

// TraceparentCarrier carries one W3C traceparent value, and only that, for
// OpenTelemetry's TraceContext propagator (it is a
// propagation.TextMapCarrier): extracting through it never reads a
// tracestate, injecting through it never writes one. The node's slot
// context.traceparent and the edge's traceparent header both pass through
// it, so that neither takes nor passes on a caller's tracestate.
type TraceparentCarrier struct{ Value string }

// Get returns the traceparent value, "" for any other key.
func (c *TraceparentCarrier) Get(key string) string {
	if key == "traceparent" {
		return c.Value
	}
	return ""
}

// Set keeps a traceparent value; any other key (tracestate) is dropped.
func (c *TraceparentCarrier) Set(key, value string) {
	if key == "traceparent" {
		c.Value = value
	}
}

// Keys is the one key the carrier has.
func (c *TraceparentCarrier) Keys() []string { return []string{"traceparent"} }
