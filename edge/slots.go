package edge

import (
	"fmt"
	"sync"

	"github.com/mcpv2/mcpv2/protocol"
)

// Slots counts what callers hold at once — standing event streams, MCP
// sessions — against the identity rule of SPEC §6 (docs/spec.md §0):
//
//   - at most Total in all;
//   - Reserved of them only privileged callers (secret holders) fill, so
//     that no crowd of anonymous callers can lock the node's owner out;
//   - an unprivileged caller at most PerOwner under one credential (its
//     Owner), and all unprivileged callers of one client IP at most PerIP
//     together (an IP can mint many anonymous sessions).
//
// Zero caps are no cap. The zero Slots holds nothing; set the caps before
// first use. Safe for concurrent use; mu guards the counts.
type Slots struct {
	Total, Reserved, PerOwner, PerIP int
	// What names what is held, for refusals ("event streams").
	What string

	mu      sync.Mutex
	held    int            // in all
	unpriv  int            // by unprivileged callers
	byOwner map[string]int // unprivileged, by Owner
	byIP    map[string]int // unprivileged, by client IP
}

// Privileged reports whether c may fill the reserved share of Slots: a
// secret holder.
func Privileged(c protocol.Caller) bool { return c.Kind == protocol.CallerSecretHolder }

// SlotCap says which cap refused an Acquire.
type SlotCap int

const (
	// CapNone: not refused.
	CapNone SlotCap = iota
	// CapOwner: the caller's credential holds PerOwner already.
	CapOwner
	// CapIP: the unprivileged callers of its IP hold PerIP already.
	CapIP
	// CapTotal: the slots open to the caller are all held.
	CapTotal
)

// Acquire takes one slot for c, seen from client IP ip. It returns the
// release function (call it once), or nil and the cap that refused, with
// a message for the caller.
func (s *Slots) Acquire(c protocol.Caller, ip string) (release func(), refused SlotCap, msg string) {
	priv := Privileged(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.Total > 0 && s.held >= s.Total:
		return nil, CapTotal, fmt.Sprintf("busy: this edge holds %d %s at once, its most; retry later", s.Total, s.What)
	case priv:
	case s.Total > 0 && s.unpriv >= s.Total-s.Reserved:
		return nil, CapTotal, fmt.Sprintf("busy: callers without the node's secret hold %d %s, all this edge gives them (%d more are kept for its secret holders); retry later", s.unpriv, s.What, s.Reserved)
	case s.PerOwner > 0 && c.Owner != "" && s.byOwner[c.Owner] >= s.PerOwner:
		return nil, CapOwner, fmt.Sprintf("busy: this credential holds %d %s, the most one may; close one first", s.PerOwner, s.What)
	case s.PerIP > 0 && s.byIP[ip] >= s.PerIP:
		return nil, CapIP, fmt.Sprintf("busy: callers from %s hold %d %s, the most one IP address may without the node's secret; close one first", ip, s.PerIP, s.What)
	}
	s.held++
	if !priv {
		if s.byOwner == nil {
			s.byOwner, s.byIP = map[string]int{}, map[string]int{}
		}
		s.unpriv++
		s.byOwner[c.Owner]++
		s.byIP[ip]++
	}
	var once sync.Once
	return func() { once.Do(func() { s.release(priv, c.Owner, ip) }) }, CapNone, ""
}

func (s *Slots) release(priv bool, owner, ip string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held--
	if priv {
		return
	}
	s.unpriv--
	if s.byOwner[owner]--; s.byOwner[owner] <= 0 {
		delete(s.byOwner, owner)
	}
	if s.byIP[ip]--; s.byIP[ip] <= 0 {
		delete(s.byIP, ip)
	}
}

// Held returns how many slots are held in all.
func (s *Slots) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// ClientIP is the client IP of a caller the edge authenticated, from its
// Remote address ("ip:port"), IPv4-mapped addresses unmapped.
func ClientIP(c protocol.Caller) string { return clientIP(c.Remote) }
