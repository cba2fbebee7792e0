package mcp

// Subscriptions counts the sessions that hold subscriptions, and the
// subscriptions they hold, for the tests.
func (f *Face) Subscriptions() (sessions, subs int) {
	f.subs.mu.Lock()
	defer f.subs.mu.Unlock()
	for _, uris := range f.subs.by {
		sessions++
		subs += len(uris)
	}
	return sessions, subs
}

// ClipLogger is clipLogger, for the tests.
var ClipLogger = clipLogger
