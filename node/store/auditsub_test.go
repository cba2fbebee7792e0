package store

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// TestSubscribeAudit: a subscriber receives the records written after it
// subscribed, in order; one whose buffer is full loses records (counted)
// while Audit goes on; cancel and Close end subscriptions; the number of
// subscriptions is bounded.
func TestSubscribeAudit(t *testing.T) {
	s, _ := openT(t)
	if err := s.Audit(AuditRecord{Caller: "before", Method: "m", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	recs, dropped, cancel, err := s.SubscribeAudit(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"one", "two", "three"} { // the third finds the buffer full
		if err := s.Audit(AuditRecord{Caller: c, Method: "m", Outcome: "ok", Findings: []AuditFinding{{Vector: "v", Level: "low"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if r := <-recs; r.Caller != "one" || r.Time.IsZero() || len(r.Findings) != 1 {
		t.Fatalf("first record %+v", r)
	}
	if r := <-recs; r.Caller != "two" {
		t.Fatalf("second record %+v", r)
	}
	if d := dropped(); d != 1 {
		t.Fatalf("dropped %d, want 1", d)
	}
	cancel()
	cancel() // again: nothing
	if _, ok := <-recs; ok {
		t.Fatal("records still open after cancel")
	}
	if err := s.Audit(AuditRecord{Caller: "after", Method: "m", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}

	var cancels []func()
	for range MaxAuditSubscribers {
		_, _, c, err := s.SubscribeAudit(1)
		if err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, c)
	}
	if _, _, _, err := s.SubscribeAudit(1); err == nil || !strings.Contains(err.Error(), "subscriptions") {
		t.Fatalf("subscription %d: %v, want refused", MaxAuditSubscribers+1, err)
	}
	cancels[0]()
	last, _, _, err := s.SubscribeAudit(1)
	if err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-last; ok {
		t.Fatal("records still open after Close")
	}
	cancels[1]() // after Close: nothing
	if _, _, _, err := s.SubscribeAudit(1); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after Close: %v, want net.ErrClosed", err)
	}
}
