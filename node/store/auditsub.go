package store

import (
	"fmt"
	"net"
	"slices"
	"sync/atomic"
)

// MaxAuditSubscribers bounds the audit subscriptions open at once
// (SubscribeAudit); one more is refused.
const MaxAuditSubscribers = 64

// maxAuditSubBuf bounds a subscription's buffer.
const maxAuditSubBuf = 4096

// auditSub is one subscription: its channel and the records it lost.
type auditSub struct {
	ch      chan AuditRecord
	dropped atomic.Uint64
}

// SubscribeAudit returns the audit records written from now on, in the
// order of the log, and a cancel that ends the subscription (it closes
// records; calling it again does nothing). records has buf slots (buf is
// taken into 1–4096); a record that finds them full is dropped for that
// subscriber, which dropped counts: Audit never waits for a subscriber.
// Close of the store closes records too. At most MaxAuditSubscribers
// subscriptions are open at once; past that, or after Close, it fails.
func (s *Store) SubscribeAudit(buf int) (records <-chan AuditRecord, dropped func() uint64, cancel func(), err error) {
	sub := &auditSub{ch: make(chan AuditRecord, min(max(buf, 1), maxAuditSubBuf))}
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	if s.auditClosed {
		return nil, nil, nil, fmt.Errorf("store: subscribe to the audit log: %w", net.ErrClosed)
	}
	if len(s.auditSubs) >= MaxAuditSubscribers {
		return nil, nil, nil, fmt.Errorf("store: subscribe to the audit log: %d subscriptions are open, the most there may be", len(s.auditSubs))
	}
	if s.auditSubs == nil {
		s.auditSubs = map[*auditSub]struct{}{}
	}
	s.auditSubs[sub] = struct{}{}
	cancel = func() {
		s.auditMu.Lock()
		defer s.auditMu.Unlock()
		if _, ok := s.auditSubs[sub]; ok { // not yet cancelled, nor closed by Close
			delete(s.auditSubs, sub)
			close(sub.ch)
		}
	}
	return sub.ch, sub.dropped.Load, cancel, nil
}

// publishAudit hands rec to every subscriber that has room, and counts a
// drop for the others. Called under auditMu.
func (s *Store) publishAudit(rec AuditRecord) {
	if len(s.auditSubs) == 0 {
		return
	}
	rec.Findings = slices.Clone(rec.Findings) // the caller's slice stays the caller's
	for sub := range s.auditSubs {
		select {
		case sub.ch <- rec:
		default:
			sub.dropped.Add(1)
		}
	}
}
