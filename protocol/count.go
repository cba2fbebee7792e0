package protocol

import "context"

// uncountedKey marks a context whose audit lines are not counted as calls.
type uncountedKey struct{}

// Uncounted returns ctx marked so that the node counts none of the audit
// lines it writes under it as calls in its metrics (mcpv2_calls_total):
// they are inner lines of a request that its face counts once, by its own
// line (an A2A task's skill calls, the forward of MCP's mesh_call, an
// orchestration's subtasks, the gateway's answered HTTP request whose
// slots the node counted). Audit lines are written all the same.
func Uncounted(ctx context.Context) context.Context {
	return context.WithValue(ctx, uncountedKey{}, true)
}

// IsUncounted says whether ctx was marked by Uncounted.
func IsUncounted(ctx context.Context) bool {
	v, _ := ctx.Value(uncountedKey{}).(bool)
	return v
}
