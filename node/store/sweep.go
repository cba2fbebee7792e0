package store

import (
	"errors"
	"time"
)

// SweepResult says what one Sweep removed.
type SweepResult struct {
	// Partials is how many stale partial uploads were removed.
	Partials int
	// Conversations is how many conversations were dropped (expired, or
	// beyond the count cap).
	Conversations int
	// Tasks is how many finished tasks expired.
	Tasks int
}

// Sweep removes what has outlived its time: partial uploads untouched for
// the partial TTL (by the file system's clock; never one open now), and
// conversations unused for the conversation TTL (by the store's clock) or
// beyond the count cap, and finished tasks past the task TTL. A running node calls it periodically. Safe for
// concurrent use; after Close it fails with an error wrapping net.ErrClosed.
func (s *Store) Sweep() (SweepResult, error) {
	var r SweepResult
	var perr, cerr, terr error
	r.Partials, perr = s.files.RemoveStaleParts(time.Now())
	r.Conversations, cerr = s.ExpireConversations(s.now())
	r.Tasks, terr = s.ExpireTasks(s.now())
	return r, errors.Join(perr, cerr, terr)
}
