package protocol

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	ed, qm, cid := edPeerID("a"), qmPeerID("a"), cidPeerID("a")
	relay, target := edPeerID("relay"), edPeerID("target")
	const real = "12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"
	mesh := func(id, ma string) Address { return Address{Kind: AddrMesh, PeerID: id, Multiaddr: ma} }
	edge := func(host string, port int, url, session string) Address {
		return Address{Kind: AddrHTTP, Host: host, Port: port, URL: url, SessionID: session}
	}
	tests := []struct {
		in   string
		want Address
	}{
		// Mesh: multiaddrs ending in /p2p/<PeerID>.
		{"/ip4/127.0.0.1/tcp/4001/p2p/" + ed, mesh(ed, "/ip4/127.0.0.1/tcp/4001/p2p/"+ed)},
		{"/ip4/127.0.0.1/tcp/4001/p2p/" + real, mesh(real, "/ip4/127.0.0.1/tcp/4001/p2p/"+real)},
		{"/ip4/203.0.113.7/udp/4001/quic-v1/p2p/" + ed, mesh(ed, "/ip4/203.0.113.7/udp/4001/quic-v1/p2p/"+ed)},
		{"/ip6/::1/tcp/4001/p2p/" + ed, mesh(ed, "/ip6/::1/tcp/4001/p2p/"+ed)},
		{"/ip6/2001:db8::7/udp/4001/quic-v1/p2p/" + qm, mesh(qm, "/ip6/2001:db8::7/udp/4001/quic-v1/p2p/"+qm)},
		{"/dns4/boot.example.org/tcp/4001/p2p/" + ed, mesh(ed, "/dns4/boot.example.org/tcp/4001/p2p/"+ed)},
		{"/dns6/boot.example.org/udp/4001/quic-v1/p2p/" + ed, mesh(ed, "/dns6/boot.example.org/udp/4001/quic-v1/p2p/"+ed)},
		{"/dnsaddr/bootstrap.libp2p.io/p2p/" + qm, mesh(qm, "/dnsaddr/bootstrap.libp2p.io/p2p/"+qm)},
		{"/p2p/" + ed, mesh(ed, "/p2p/"+ed)},
		// Relay: the PeerID is the last /p2p/, the target's, not the relay's.
		{"/ip4/198.51.100.1/tcp/4001/p2p/" + relay + "/p2p-circuit/p2p/" + target,
			mesh(target, "/ip4/198.51.100.1/tcp/4001/p2p/"+relay+"/p2p-circuit/p2p/"+target)},
		{"/ip4/198.51.100.1/udp/4001/quic-v1/p2p/" + relay + "/p2p-circuit/p2p/" + target,
			mesh(target, "/ip4/198.51.100.1/udp/4001/quic-v1/p2p/"+relay+"/p2p-circuit/p2p/"+target)},
		// Mesh: a PeerID alone.
		{"mcpv2://" + ed, mesh(ed, "")},
		{"mcpv2://" + ed + "/", mesh(ed, "")},
		{"mcpv2://" + qm, mesh(qm, "")},
		{ed, mesh(ed, "")},
		{real, mesh(real, "")},
		{qm, mesh(qm, "")},
		{cid, mesh(cid, "")},
		{"  " + ed + "\n", mesh(ed, "")},
		// HTTP edge.
		{"mcpv2://127.0.0.1:8000/mcpv2", edge("127.0.0.1", 8000, "http://127.0.0.1:8000/mcpv2", "")},
		{"mcpv2://127.0.0.1:8000/mcpv2/", edge("127.0.0.1", 8000, "http://127.0.0.1:8000/mcpv2", "")},
		{"mcpv2://127.0.0.1:8000/mcpv2?sessionId=abc.def", edge("127.0.0.1", 8000, "http://127.0.0.1:8000/mcpv2", "abc.def")},
		{"mcpv2://127.0.0.1:8000/mcpv2?sessionId=MTI3LjAuMC4xOm46MTox.0a1b%2B", edge("127.0.0.1", 8000, "http://127.0.0.1:8000/mcpv2", "MTI3LjAuMC4xOm46MTox.0a1b+")},
		{"mcpv2://[::1]:8000/mcpv2", edge("::1", 8000, "http://[::1]:8000/mcpv2", "")},
		{"mcpv2://[2001:db8::1]:65535/mcpv2?sessionId=x.y", edge("2001:db8::1", 65535, "http://[2001:db8::1]:65535/mcpv2", "x.y")},
		{"mcpv2://agent.example.org:1/mcpv2", edge("agent.example.org", 1, "http://agent.example.org:1/mcpv2", "")},
		{"mcpv2://localhost:8000", edge("localhost", 8000, "http://localhost:8000/mcpv2", "")},
		{"http://host:8000", edge("host", 8000, "http://host:8000/mcpv2", "")},
		{"http://host:8000/", edge("host", 8000, "http://host:8000/mcpv2", "")},
		{"http://host:8000/mcpv2", edge("host", 8000, "http://host:8000/mcpv2", "")},
		{"http://10.0.0.2:8000/mcpv2?sessionId=tok.mac", edge("10.0.0.2", 8000, "http://10.0.0.2:8000/mcpv2", "tok.mac")},
		{"http://host", edge("host", 80, "http://host:80/mcpv2", "")},
		{"https://host", edge("host", 443, "https://host:443/mcpv2", "")},
		{"https://host:8443/mcpv2", edge("host", 8443, "https://host:8443/mcpv2", "")},
		{"https://[::1]/mcpv2?sessionId=a.b", edge("::1", 443, "https://[::1]:443/mcpv2", "a.b")},
		{"mcpv2://[fe80::1%25eth0]:8000/mcpv2", edge("fe80::1%eth0", 8000, "http://[fe80::1%25eth0]:8000/mcpv2", "")},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseAddress(tc.in)
			if err != nil {
				t.Fatalf("ParseAddress: %v", err)
			}
			if got != tc.want {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
			// Round trip: the canonical form parses back to the same address.
			s := got.String()
			back, err := ParseAddress(s)
			if err != nil {
				t.Fatalf("ParseAddress(String() = %q): %v", s, err)
			}
			if back != got {
				t.Fatalf("round trip through %q\ngot  %#v\nwant %#v", s, back, got)
			}
			if s2 := back.String(); s2 != s {
				t.Errorf("String() is not stable: %q then %q", s, s2)
			}
		})
	}
}

func TestAddressString(t *testing.T) {
	ed := edPeerID("a")
	tests := []struct {
		in, want string
	}{
		{ed, "mcpv2://" + ed},
		{"mcpv2://" + ed + "/", "mcpv2://" + ed},
		{"/ip4/127.0.0.1/tcp/4001/p2p/" + ed, "/ip4/127.0.0.1/tcp/4001/p2p/" + ed},
		{"http://host:8000", "mcpv2://host:8000/mcpv2"},
		{"mcpv2://[::1]:8000/mcpv2/", "mcpv2://[::1]:8000/mcpv2"},
		{"mcpv2://127.0.0.1:8000/mcpv2?sessionId=abc.def", "mcpv2://127.0.0.1:8000/mcpv2?sessionId=abc.def"},
		{"mcpv2://h:1/mcpv2?sessionId=a%2Bb%26c", "mcpv2://h:1/mcpv2?sessionId=a%2Bb%26c"},
		{"https://host", "https://host:443/mcpv2"},
		{"https://host:8443/?sessionId=t.m", "https://host:8443/mcpv2?sessionId=t.m"},
		{"mcpv2://[fe80::1%25eth0]:8000/mcpv2", "mcpv2://[fe80::1%25eth0]:8000/mcpv2"},
	}
	for _, tc := range tests {
		a, err := ParseAddress(tc.in)
		if err != nil {
			t.Fatalf("ParseAddress(%q): %v", tc.in, err)
		}
		if got := a.String(); got != tc.want {
			t.Errorf("ParseAddress(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
	}
	if s := (Address{}).String(); s != "" {
		t.Errorf("zero Address String() = %q, want empty", s)
	}
}

func TestParseAddressErrors(t *testing.T) {
	ed := edPeerID("a")
	relay := edPeerID("relay")
	swap := func(id string, c byte) string { return id[:20] + string(c) + id[21:] }
	tests := []struct {
		name, in string
		says     string // a word the message must contain
	}{
		{"empty", "", "empty"},
		{"blank", " \t\n ", "empty"},
		{"space inside", "mcpv2://127.0.0.1:8000/mc pv2", "whitespace"},
		{"space inside a PeerID", ed[:10] + " " + ed[10:], "whitespace"},
		{"tab inside a multiaddr", "/ip4/127.0.0.1/tcp/4001\t/p2p/" + ed, "whitespace"},
		{"NUL", "mcpv2://" + ed + "\x00", "control"},
		{"NUL in a multiaddr", "/ip4/127.0.0.1\x00/tcp/4001/p2p/" + ed, "control"},
		{"multiaddr without /p2p", "/ip4/127.0.0.1/tcp/4001", "/p2p/"},
		{"quic multiaddr without /p2p", "/ip4/127.0.0.1/udp/4001/quic-v1", "/p2p/"},
		{"relay without target", "/ip4/198.51.100.1/tcp/4001/p2p/" + relay + "/p2p-circuit", "PeerID"},
		{"empty PeerID in a multiaddr", "/ip4/127.0.0.1/tcp/4001/p2p/", "PeerID"},
		{"trailing slash after the PeerID", "/ip4/127.0.0.1/tcp/4001/p2p/" + ed + "/", "PeerID"},
		{"0 in a multiaddr PeerID", "/ip4/127.0.0.1/tcp/4001/p2p/" + swap(ed, '0'), "PeerID"},
		{"bare PeerID with 0", swap(ed, '0'), "PeerID"},
		{"bare PeerID with O", swap(ed, 'O'), "PeerID"},
		{"bare PeerID with I", swap(ed, 'I'), "PeerID"},
		{"bare PeerID with l", swap(ed, 'l'), "PeerID"},
		{"bare PeerID with +", swap(ed, '+'), "PeerID"},
		{"PeerID too short", "12D3KooWD3eck", "PeerID"},
		{"PeerID too long", strings.Repeat("z", 129), "PeerID"},
		{"mcpv2:// PeerID with l", "mcpv2://" + swap(ed, 'l'), "PeerID"},
		{"port 0", "mcpv2://127.0.0.1:0/mcpv2", "port"},
		{"port 70000", "mcpv2://127.0.0.1:70000/mcpv2", "port"},
		{"port 65536", "http://host:65536", "port"},
		{"huge port", "mcpv2://127.0.0.1:99999999999999999999999/mcpv2", "port"},
		{"port not a number", "mcpv2://127.0.0.1:80a/mcpv2", "port"},
		{"negative port", "mcpv2://127.0.0.1:-1/mcpv2", "port"},
		{"empty port", "mcpv2://127.0.0.1:/mcpv2", "port"},
		{"missing port for mcpv2://host", "mcpv2://127.0.0.1/mcpv2", "port"},
		{"missing port for mcpv2://[::1]", "mcpv2://[::1]/mcpv2", "port"},
		{"missing host", "mcpv2://:8000/mcpv2", "host"},
		{"unbracketed IPv6", "mcpv2://::10", "host"},
		{"unbracketed IPv6 with port", "mcpv2://::1:8000/mcpv2", "brackets"},
		{"host with a percent", "mcpv2://a%25b:8000/mcpv2", "host"},
		{"host with sub-delims", "mcpv2://a!$b:8000/mcpv2", "host"},
		{"IPv4 with a zone", "http://[1.2.3.4%25eth0]:80", "host"},
		{"zone with a slash", "mcpv2://[fe80::1%25a%2Fb]:8000/mcpv2", "escape"},
		{"zone with a bang", "mcpv2://[fe80::1%25a!b]:8000/mcpv2", "host"},
		{"empty zone", "mcpv2://[fe80::1%25]:8000/mcpv2", "host"},
		{"nothing after the scheme", "mcpv2://", "host"},
		{"mcpv2://host without port or path", "mcpv2://localhost", "port"},
		{"wrong path", "mcpv2://127.0.0.1:8000/api", "path"},
		{"wrong path under mcpv2", "mcpv2://127.0.0.1:8000/mcpv2/session", "path"},
		{"wrong path on http", "http://host:8000/rpc", "path"},
		{"user info", "mcpv2://user:pw@127.0.0.1:8000/mcpv2", "user info"},
		{"user info on http", "http://alice@host:8000", "user info"},
		{"user info on https", "https://alice:secret@host", "user info"},
		{"unknown scheme", "ftp://host:21", "want"},
		{"upper-case scheme", "MCPV2://127.0.0.1:8000/mcpv2", "want"},
		{"scheme without slashes", "mcpv2:127.0.0.1:8000", "want"},
		{"host:port without scheme", "127.0.0.1:8000", "want"},
		{"oversize", "mcpv2://" + strings.Repeat("a", 3000) + ":8000/mcpv2", "longer than"},
		{"oversize multiaddr", "/ip4/127.0.0.1" + strings.Repeat("/tcp/1", 400) + "/p2p/" + ed, "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAddress(tc.in)
			if err == nil {
				t.Fatalf("ParseAddress(%q) = %+v, want an error", tc.in, a)
			}
			if !errors.Is(err, ErrBadAddress) {
				t.Errorf("error %v does not wrap ErrBadAddress", err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if a != (Address{}) {
				t.Errorf("a failed parse returned %+v, want the zero Address", a)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error message is %d bytes; an oversize input must be truncated", len(err.Error()))
			}
		})
	}
}

func TestLooksLikePeerID(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{edPeerID("x"), true},
		{qmPeerID("x"), true},
		{cidPeerID("x"), true},
		{"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA", true},
		{"16Uiu2HAmLhLvBoYaoZfaMUKuibM6ac163GwKY74c5kiSLg5KvLpY", true}, // secp256k1 form
		{"", false},
		{"12D3KooW", false},
		{"127.0.0.1", false},
		{"localhost", false},
		{"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5S0", false},
		{"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SO", false},
		{"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SI", false},
		{"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5Sl", false},
		{"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5S/", false},
		{"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5Sé", false},
		{"bafzaajaiaejcavfba3myl6bzon37ahdzb5nglyhobtjxqw33r6jmhvljcleozbr1", false}, // 1 is not base32
	}
	for _, tc := range tests {
		if got := LooksLikePeerID(tc.s); got != tc.want {
			t.Errorf("LooksLikePeerID(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
