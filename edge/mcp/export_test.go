package mcp

import (
	"net/http"

	"github.com/mcpv2/mcpv2/protocol"
)

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

// ServeStateful serves r as a request of the 2025-11-25 era from c, as
// serveHTTP does after the edge's checks, and returns the answer's status.
func (f *Face) ServeStateful(w http.ResponseWriter, r *http.Request, c protocol.Caller) int {
	sw := &statusWriter{ResponseWriter: w}
	f.serveStateful(sw, r, c)
	return sw.status
}
