package protocol

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// specToken builds a token exactly as SPEC §5 words it, independently of the
// package: base64url(payload) + "." + hex(HMAC_SHA256(secret, payload)).
func specToken(secret []byte, payload string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + hex.EncodeToString(m.Sum(nil))
}

var (
	testSecret = []byte("correct horse battery staple")
	testNow    = time.Unix(1_760_000_000, 0)
)

var tokenReasons = []error{ErrTokenMalformed, ErrTokenSignature, ErrTokenExpired, ErrTokenFuture, ErrTokenSubject}

func TestTokenWireFormat(t *testing.T) {
	tests := []struct {
		tok     Token
		payload string
	}{
		{Token{"203.0.113.9", "6e6f6e6365", 1_760_000_000, 3600}, "203.0.113.9:6e6f6e6365:1760000000:3600"},
		{Token{"2001:db8::1", "ab", 1, 1}, "2001:db8::1:ab:1:1"},
		{Token{edPeerID("a"), "00ff", 1_760_000_000, 86400}, edPeerID("a") + ":00ff:1760000000:86400"},
	}
	for _, tc := range tests {
		got := EncodeToken(testSecret, tc.tok)
		if want := specToken(testSecret, tc.payload); got != want {
			t.Errorf("EncodeToken(%+v)\n got %s\nwant %s", tc.tok, got, want)
		}
		back, payload, err := ParseToken(got)
		if err != nil || back != tc.tok || payload != tc.payload {
			t.Errorf("ParseToken(%s) = %+v, %q, %v; want %+v, %q", got, back, payload, err, tc.tok, tc.payload)
		}
	}
	// Known answers computed outside Go (Python's hmac and base64), so that
	// the format cannot drift together with specToken.
	known := []struct {
		tok     Token
		want    string
		subject string
	}{
		{Token{"127.0.0.1", "abcd", 1_760_000_000, 3600}, "MTI3LjAuMC4xOmFiY2Q6MTc2MDAwMDAwMDozNjAw.0a914908ef42362b277e170872a85691e9fb5e06836c727423cd25dbf2021d1a", "127.0.0.1"},
	}
	for _, k := range known {
		if got := EncodeToken([]byte("k"), k.tok); got != k.want {
			t.Errorf("EncodeToken(%+v) = %s, want %s", k.tok, got, k.want)
		}
		if got := specToken([]byte("k"), "127.0.0.1:abcd:1760000000:3600"); got != k.want {
			t.Errorf("specToken = %s, want %s", got, k.want)
		}
	}
	// A token as Python's urlsafe_b64encode pads it.
	const pyPadded = "MjAwMTpkYjg6OjE6NGYyYToxNzYwMDAwMDAwOjMwMA==.e75ae425e15b62b96bc436f17cc8b7411127da2742dd1220a3379e4c886e873a"
	if got, err := VerifyToken([]byte("k"), pyPadded, "2001:db8::1", time.Unix(1_760_000_100, 0), DefaultClockSkew); err != nil || got != (Token{"2001:db8::1", "4f2a", 1_760_000_000, 300}) {
		t.Errorf("VerifyToken(padded Python token) = %+v, %v", got, err)
	}
}

// malleate returns enc (unpadded base64url) with its last character changed
// so that it still decodes to the same bytes under a lenient decoder (the
// unused low bits set), or "" when enc has no unused bits.
func malleate(enc string) string {
	want, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return ""
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for _, c := range alphabet {
		alt := enc[:len(enc)-1] + string(c)
		if alt == enc {
			continue
		}
		if got, err := base64.RawURLEncoding.DecodeString(alt); err == nil && string(got) == string(want) {
			return alt
		}
	}
	return ""
}

func TestMintToken(t *testing.T) {
	for _, subject := range []string{"203.0.113.9", "127.0.0.1", "::1", "2001:db8:85a3::8a2e:370:7334", "::ffff:192.0.2.1", "fe80::1%eth0", edPeerID("a"), qmPeerID("a")} {
		t.Run(subject, func(t *testing.T) {
			tok, minted := MintToken(testSecret, subject, testNow, time.Hour)
			if minted.Subject != subject || minted.IssuedAt != testNow.Unix() || minted.TTL != 3600 {
				t.Fatalf("minted %+v", minted)
			}
			if len(minted.Nonce) < 16 {
				t.Errorf("nonce %q is too short to be unguessable", minted.Nonce)
			}
			// The wire format, computed independently.
			payload := fmt.Sprintf("%s:%s:%d:%d", subject, minted.Nonce, testNow.Unix(), 3600)
			if want := specToken(testSecret, payload); tok != want {
				t.Fatalf("token %s\nwant  %s", tok, want)
			}
			if got := minted.ExpiresAt(); !got.Equal(testNow.Add(time.Hour)) {
				t.Errorf("ExpiresAt = %v, want %v", got, testNow.Add(time.Hour))
			}
			for _, at := range []time.Time{testNow, testNow.Add(time.Minute), testNow.Add(time.Hour), testNow.Add(-DefaultClockSkew)} {
				got, err := VerifyToken(testSecret, tok, subject, at, DefaultClockSkew)
				if err != nil {
					t.Fatalf("VerifyToken at %v: %v", at.Sub(testNow), err)
				}
				if got != minted {
					t.Fatalf("VerifyToken = %+v, want %+v", got, minted)
				}
			}
		})
	}
	a, _ := MintToken(testSecret, "10.0.0.1", testNow, time.Hour)
	b, _ := MintToken(testSecret, "10.0.0.1", testNow, time.Hour)
	if a == b {
		t.Error("two tokens minted at the same second are equal; the nonce must be fresh")
	}
	if DefaultClockSkew != 300*time.Second {
		t.Errorf("DefaultClockSkew = %v, SPEC §5 says 300 s", DefaultClockSkew)
	}
}

func TestVerifyTokenRefusals(t *testing.T) {
	const ip = "203.0.113.9"
	now := testNow.Unix()
	good := specToken(testSecret, fmt.Sprintf("%s:deadbeef1:%d:3600", ip, now))
	b64, mac, _ := strings.Cut(good, ".")
	if len(b64)%4 == 0 || malleate(b64) == "" {
		t.Fatalf("the test token %s must have unused base64 bits", b64)
	}
	signed := func(payload string) string { return specToken(testSecret, payload) }
	flip := func(s string, i int) string {
		c := s[i]
		switch {
		case c == 'f':
			c = 'e'
		case c >= '0' && c <= '8' || c >= 'a' && c <= 'e':
			c++
		case c == '9':
			c = '0'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	tests := []struct {
		name    string
		tok     string
		subject string
		secret  []byte
		now     int64
		want    error
	}{
		// Signature.
		{"tampered payload (other ip)", base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("203.0.113.1:deadbeef1:%d:3600", now))) + "." + mac, "203.0.113.1", testSecret, now, ErrTokenSignature},
		{"tampered payload (longer ttl)", base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%s:deadbeef1:%d:999999", ip, now))) + "." + mac, ip, testSecret, now, ErrTokenSignature},
		{"tampered mac first digit", b64 + "." + flip(mac, 0), ip, testSecret, now, ErrTokenSignature},
		{"tampered mac last digit", b64 + "." + flip(mac, 63), ip, testSecret, now, ErrTokenSignature},
		{"mac of zeros", b64 + "." + strings.Repeat("0", 64), ip, testSecret, now, ErrTokenSignature},
		{"other secret", good, ip, []byte("another secret"), now, ErrTokenSignature},
		{"empty secret", good, ip, nil, now, ErrTokenSignature},
		{"signature checked before time", specToken([]byte("x"), fmt.Sprintf("%s:n:%d:1", ip, now-1000)), ip, testSecret, now, ErrTokenSignature},
		// Time.
		{"expired", signed(fmt.Sprintf("%s:n:%d:60", ip, now-86400)), ip, testSecret, now, ErrTokenExpired},
		{"expired by one second", signed(fmt.Sprintf("%s:n:%d:3600", ip, now-3601)), ip, testSecret, now, ErrTokenExpired},
		{"ttl overflow", signed(fmt.Sprintf("%s:n:%d:%d", ip, now, int64(1<<63-1))), ip, testSecret, now, ErrTokenExpired},
		{"future beyond skew", signed(fmt.Sprintf("%s:n:%d:3600", ip, now+301)), ip, testSecret, now, ErrTokenFuture},
		{"far future", signed(fmt.Sprintf("%s:n:%d:3600", ip, now+365*86400)), ip, testSecret, now, ErrTokenFuture},
		// Subject.
		{"other ip", good, "203.0.113.10", testSecret, now, ErrTokenSubject},
		{"prefix of the ip", good, "203.0.113.", testSecret, now, ErrTokenSubject},
		{"empty subject", good, "", testSecret, now, ErrTokenSubject},
		{"other ipv6", signed(fmt.Sprintf("::1:n:%d:3600", now)), "::2", testSecret, now, ErrTokenSubject},
		{"other PeerID", signed(fmt.Sprintf("%s:n:%d:3600", edPeerID("a"), now)), edPeerID("b"), testSecret, now, ErrTokenSubject},
		// Malformed, even when correctly signed.
		{"empty", "", ip, testSecret, now, ErrTokenMalformed},
		{"no dot", b64 + mac, ip, testSecret, now, ErrTokenMalformed},
		{"only a dot", ".", ip, testSecret, now, ErrTokenMalformed},
		{"no payload", "." + mac, ip, testSecret, now, ErrTokenMalformed},
		{"no mac", b64 + ".", ip, testSecret, now, ErrTokenMalformed},
		{"bad base64", "!!!!." + mac, ip, testSecret, now, ErrTokenMalformed},
		{"standard base64 alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(signed(fmt.Sprintf("%s:n>>?:%d:3600", ip, now))), ip, testSecret, now, ErrTokenMalformed},
		{"non-hex mac", b64 + "." + strings.Repeat("zz", 32), ip, testSecret, now, ErrTokenMalformed},
		{"mac with a second dot", b64 + "." + mac[:32] + "." + mac[32:], ip, testSecret, now, ErrTokenMalformed},
		{"short mac", b64 + "." + mac[:62], ip, testSecret, now, ErrTokenMalformed},
		{"long mac", b64 + "." + mac + "00", ip, testSecret, now, ErrTokenMalformed},
		{"upper-case mac", b64 + "." + strings.ToUpper(mac), ip, testSecret, now, ErrTokenMalformed},
		{"missing fields", signed(fmt.Sprintf("%s:%d:3600", "host", now)), "host", testSecret, now, ErrTokenMalformed},
		{"one field", signed("203.0.113.9"), ip, testSecret, now, ErrTokenMalformed},
		{"empty payload", "." + mac, ip, testSecret, now, ErrTokenMalformed},
		{"issued_at not a number", signed(ip + ":n:yesterday:3600"), ip, testSecret, now, ErrTokenMalformed},
		{"issued_at a float", signed(fmt.Sprintf("%s:n:%d.5:3600", ip, now)), ip, testSecret, now, ErrTokenMalformed},
		{"issued_at 0", signed(ip + ":n:0:3600"), ip, testSecret, now, ErrTokenMalformed},
		{"issued_at negative", signed(ip + ":n:-5:3600"), ip, testSecret, now, ErrTokenMalformed},
		{"issued_at with a plus sign", signed(fmt.Sprintf("%s:n:+%d:3600", ip, now)), ip, testSecret, now, ErrTokenMalformed},
		{"issued_at with a leading zero", signed(fmt.Sprintf("%s:n:0%d:3600", ip, now)), ip, testSecret, now, ErrTokenMalformed},
		{"ttl 0", signed(fmt.Sprintf("%s:n:%d:0", ip, now)), ip, testSecret, now, ErrTokenMalformed},
		{"ttl negative", signed(fmt.Sprintf("%s:n:%d:-60", ip, now)), ip, testSecret, now, ErrTokenMalformed},
		{"ttl missing", signed(fmt.Sprintf("%s:n:%d:", ip, now)), ip, testSecret, now, ErrTokenMalformed},
		{"ttl beyond int64", signed(fmt.Sprintf("%s:n:%d:99999999999999999999", ip, now)), ip, testSecret, now, ErrTokenMalformed},
		{"empty subject in token", signed(fmt.Sprintf(":n:%d:3600", now)), "", testSecret, now, ErrTokenMalformed},
		{"empty nonce", signed(fmt.Sprintf("%s::%d:3600", ip, now)), ip, testSecret, now, ErrTokenMalformed},
		{"oversize", signed(strings.Repeat("a", 2000) + fmt.Sprintf(":n:%d:3600", now)), strings.Repeat("a", 2000), testSecret, now, ErrTokenMalformed},
		{"non-zero unused bits in base64", malleate(b64) + "." + mac, ip, testSecret, now, ErrTokenMalformed},
		{"newline inside base64", b64[:8] + "\n" + b64[8:] + "." + mac, ip, testSecret, now, ErrTokenMalformed},
		{"CR inside base64", b64[:8] + "\r" + b64[8:] + "." + mac, ip, testSecret, now, ErrTokenMalformed},
		{"wrong padding", b64 + "===." + mac, ip, testSecret, now, ErrTokenMalformed},
		{"padding inside", b64[:4] + "=" + b64[4:] + "." + mac, ip, testSecret, now, ErrTokenMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := VerifyToken(tc.secret, tc.tok, tc.subject, time.Unix(tc.now, 0), DefaultClockSkew)
			if err == nil {
				t.Fatalf("VerifyToken accepted %q: %+v", tc.tok, got)
			}
			if got != (Token{}) {
				t.Errorf("a refusal returned %+v, want the zero Token", got)
			}
			if !errors.Is(err, ErrInvalidSession) {
				t.Errorf("%v does not wrap ErrInvalidSession", err)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
			for _, other := range tokenReasons {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("error %q also wraps %q", err, other)
				}
			}
			if strings.Contains(err.Error(), string(testSecret)) {
				t.Errorf("error %q leaks the secret", err)
			}
		})
	}
}

func TestVerifyTokenAccepts(t *testing.T) {
	const ip = "198.51.100.4"
	now := testNow.Unix()
	signed := func(payload string) string { return specToken(testSecret, payload) }
	padded := func(payload string) string {
		tok := signed(payload)
		_, mac, _ := strings.Cut(tok, ".")
		return base64.URLEncoding.EncodeToString([]byte(payload)) + "." + mac
	}
	tests := []struct {
		name, tok, subject string
		want               Token
	}{
		{"fresh", signed(fmt.Sprintf("%s:abc:%d:3600", ip, now)), ip, Token{ip, "abc", now, 3600}},
		{"last valid second", signed(fmt.Sprintf("%s:abc:%d:3600", ip, now-3600)), ip, Token{ip, "abc", now - 3600, 3600}},
		{"future within skew", signed(fmt.Sprintf("%s:abc:%d:3600", ip, now+120)), ip, Token{ip, "abc", now + 120, 3600}},
		{"future at the skew", signed(fmt.Sprintf("%s:abc:%d:3600", ip, now+300)), ip, Token{ip, "abc", now + 300, 3600}},
		{"ttl 1", signed(fmt.Sprintf("%s:abc:%d:1", ip, now)), ip, Token{ip, "abc", now, 1}},
		{"ipv6 subject", signed(fmt.Sprintf("2001:db8::1:abc:%d:60", now)), "2001:db8::1", Token{"2001:db8::1", "abc", now, 60}},
		{"ipv6 loopback subject", signed(fmt.Sprintf("::1:abc:%d:60", now)), "::1", Token{"::1", "abc", now, 60}},
		{"PeerID subject", signed(fmt.Sprintf("%s:abc:%d:60", edPeerID("a"), now)), edPeerID("a"), Token{edPeerID("a"), "abc", now, 60}},
		// The seed's Python clients pad base64url (urlsafe_b64encode).
		{"padded base64url", padded(fmt.Sprintf("%s:abcd:%d:3600", ip, now)), ip, Token{ip, "abcd", now, 3600}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := VerifyToken(testSecret, tc.tok, tc.subject, time.Unix(now, 0), DefaultClockSkew)
			if err != nil {
				t.Fatalf("VerifyToken(%s): %v", tc.tok, err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// The skew is the caller's: with none, one second ahead is refused.
	tok := signed(fmt.Sprintf("%s:abc:%d:3600", ip, now+1))
	if _, err := VerifyToken(testSecret, tok, ip, time.Unix(now, 0), 0); !errors.Is(err, ErrTokenFuture) {
		t.Errorf("zero skew: err = %v, want ErrTokenFuture", err)
	}
}
