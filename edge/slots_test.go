package edge

import (
	"testing"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestSlots holds the identity rule's caps: per credential, per IP across
// credentials, the secret holders' reserved share, and release.
func TestSlots(t *testing.T) {
	s := &Slots{What: "streams", Total: 8, Reserved: 2, PerOwner: 2, PerIP: 4}
	anon := func(owner string) protocol.Caller {
		return protocol.Caller{Kind: protocol.CallerAnonymous, Owner: owner}
	}
	secret := protocol.Caller{Kind: protocol.CallerSecretHolder, Owner: "secret"}
	var releases []func()
	take := func(c protocol.Caller, ip string, want SlotCap) {
		t.Helper()
		r, got, msg := s.Acquire(c, ip)
		if got != want || (r == nil) != (want != CapNone) || (want != CapNone && msg == "") {
			t.Fatalf("Acquire(%s, %s) = %v %q, want %v", c.Owner, ip, got, msg, want)
		}
		if r != nil {
			releases = append(releases, r)
		}
	}
	take(anon("a"), "ip1", CapNone)
	take(anon("a"), "ip1", CapNone)
	take(anon("a"), "ip1", CapOwner) // the credential's most
	take(anon("b"), "ip1", CapNone)
	take(anon("b"), "ip1", CapNone)
	take(anon("c"), "ip1", CapIP) // the IP's most, whatever the credential
	take(anon("c"), "ip2", CapNone)
	take(anon("d"), "ip3", CapNone)
	take(anon("e"), "ip4", CapTotal) // 6 = Total - Reserved: the rest is the secret holders'
	take(secret, "ip1", CapNone)
	take(secret, "ip1", CapNone)
	take(secret, "ip1", CapTotal) // 8 in all
	if s.Held() != 8 {
		t.Fatalf("held %d", s.Held())
	}
	releases[0]()
	releases[0]() // a second call is a no-op
	take(anon("a"), "ip1", CapNone)
	for _, r := range releases {
		r()
	}
	if s.Held() != 0 || len(s.byOwner) != 0 || len(s.byIP) != 0 {
		t.Fatalf("after every release: held %d, owners %v, IPs %v", s.Held(), s.byOwner, s.byIP)
	}
}
