package protocol

import "context"

type progressKey struct{}

// Progress is how a long skill reports how far it is while it runs: text
// is one line a person reads, data (nil or a JSON value) the same for a
// program. A face that runs a call as a task (A2A, MCP tasks) puts one in
// the call's context; the task's status then carries each report. It may
// be called from several goroutines, and must not block for long.
type Progress func(text string, data any)

// WithProgress returns ctx carrying report, for the skill a call runs.
func WithProgress(ctx context.Context, report Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, report)
}

// ProgressFrom returns the Progress of ctx, or nil when no one listens.
func ProgressFrom(ctx context.Context) Progress {
	p, _ := ctx.Value(progressKey{}).(Progress)
	return p
}
