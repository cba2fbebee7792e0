package protocol

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMeshToken(t *testing.T) {
	const a, b, c = "12D3KooWA", "12D3KooWB", "12D3KooWC"
	good := MintMeshToken(testSecret, a, b, PurposeRPC, testNow, time.Minute)
	if mt, err := VerifyMeshToken(testSecret, good, a, b, PurposeRPC, testNow, DefaultClockSkew); err != nil ||
		mt.Sender != a || mt.Audience != b || mt.Purpose != PurposeRPC || mt.TTL != 60 {
		t.Fatalf("good token: %+v %v", mt, err)
	}
	for _, tc := range []struct {
		name, tok, sender, audience, purpose string
		now                                  time.Time
		want                                 error
	}{
		{"another receiver", good, a, c, PurposeRPC, testNow, ErrTokenAudience},
		{"another purpose", good, a, b, PurposeBlob, testNow, ErrTokenAudience},
		{"another sender", good, c, b, PurposeRPC, testNow, ErrTokenSubject},
		{"expired", good, a, b, PurposeRPC, testNow.Add(2 * time.Minute), ErrTokenExpired},
		{"future", MintMeshToken(testSecret, a, b, PurposeRPC, testNow.Add(time.Hour), time.Minute), a, b, PurposeRPC, testNow, ErrTokenFuture},
		{"other secret", MintMeshToken([]byte("x"), a, b, PurposeRPC, testNow, time.Minute), a, b, PurposeRPC, testNow, ErrTokenSignature},
		{"version 1", EncodeToken(testSecret, Token{Subject: a, Nonce: "n", IssuedAt: testNow.Unix(), TTL: 60}), a, b, PurposeRPC, testNow, ErrTokenVersion},
		{"edge token", EncodeToken(testSecret, Token{Subject: "127.0.0.1", Nonce: "n", IssuedAt: testNow.Unix(), TTL: 60}), a, b, PurposeRPC, testNow, ErrTokenVersion},
		{"missing purpose", EncodeToken(testSecret, Token{Subject: meshTokenPrefix + ":" + a + ":" + b, Nonce: "n", IssuedAt: testNow.Unix(), TTL: 60}), a, b, PurposeRPC, testNow, ErrTokenMalformed},
		{"garbage", "x", a, b, PurposeRPC, testNow, ErrTokenMalformed},
	} {
		_, err := VerifyMeshToken(testSecret, tc.tok, tc.sender, tc.audience, tc.purpose, tc.now, DefaultClockSkew)
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidSession) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// A mesh token is no edge token.
	if _, err := VerifyToken(testSecret, good, a, testNow, DefaultClockSkew); err == nil {
		t.Error("a mesh token verified as an edge token")
	}
}

// FuzzVerifyMeshToken: whatever the bytes, VerifyMeshToken never panics,
// and accepts only a token that names the sender, audience and purpose it
// was asked for and that re-encodes to itself.
func FuzzVerifyMeshToken(f *testing.F) {
	f.Add(MintMeshToken(testSecret, "A", "B", PurposeRPC, testNow, time.Minute))
	f.Add(EncodeToken(testSecret, Token{Subject: "A", Nonce: "n", IssuedAt: testNow.Unix(), TTL: 60}))
	f.Add("bWNwdjItbWVzaC0yOkE6QjpycGM6bjox.00")
	f.Fuzz(func(t *testing.T, tok string) {
		mt, err := VerifyMeshToken(testSecret, tok, "A", "B", PurposeRPC, testNow, DefaultClockSkew)
		if err != nil {
			if !errors.Is(err, ErrInvalidSession) {
				t.Fatalf("refusal %v does not wrap ErrInvalidSession", err)
			}
			return
		}
		if mt.Sender != "A" || mt.Audience != "B" || mt.Purpose != PurposeRPC || strings.Count(tok, ".") != 1 {
			t.Fatalf("accepted %q as %+v", tok, mt)
		}
	})
}
