package edge

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// The fuzz server's fixed secret, clock and caller IP (httptest.NewRequest's
// RemoteAddr), so that the committed corpus under testdata/fuzz holds tokens
// that stay valid.
var (
	fuzzSecret = []byte("fuzz-secret")
	fuzzNow    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

const fuzzIP = "192.0.2.1"

// newFuzzServer returns a bound (not serving) Server whose handler the fuzz
// targets call directly, with a quiet fake backend.
func newFuzzServer(f *testing.F) (*Server, *fakeBackend) {
	f.Helper()
	b := &fakeBackend{quiet: true}
	s, err := New(b, Config{BindHost: "127.0.0.1", Secret: fuzzSecret, Now: func() time.Time { return fuzzNow },
		RateLimit: -1, SessionRateLimit: -1, MaxBody: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	return s, b
}

func fuzzToken(t protocol.Token) string { return protocol.EncodeToken(fuzzSecret, t) }

// padded returns tok with its payload in padded base64url, as the seed's
// Python clients send it.
func padded(tok string) string {
	p, mac, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(p)
	return base64.URLEncoding.EncodeToString(raw) + "." + mac
}

// FuzzSessionToken feeds arbitrary strings to the token extraction and
// verification path (header and query) and through the handler. It must
// never panic, and never accept a token that was not minted with the secret
// for the caller's IP.
func FuzzSessionToken(f *testing.F) {
	s, _ := newFuzzServer(f)
	valid := fuzzToken(protocol.Token{Subject: fuzzIP, Nonce: "00112233445566778899aabbccddeeff", IssuedAt: fuzzNow.Unix(), TTL: 3600})
	f.Add(valid, false)
	f.Add(valid, true)
	f.Add(padded(valid), false)
	f.Add(fuzzToken(protocol.Token{Subject: "10.9.9.9", Nonce: "n", IssuedAt: fuzzNow.Unix(), TTL: 3600}), false)
	f.Add("", true)
	f.Add("a.b", false)

	f.Fuzz(func(t *testing.T, tok string, inQuery bool) {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcpv2", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if inQuery {
			r.URL.RawQuery = url.Values{SessionParam: {tok}}.Encode()
		} else {
			r.Header.Set(SessionHeader, tok)
		}
		got, kind, perr := verifyRequest(s, r)
		if perr == nil {
			// Accepted: it must be exactly a token of the secret (a secret
			// holder) or of the derived key (anonymous) for this IP.
			_, mac, ok := strings.Cut(tok, ".")
			if !ok {
				t.Fatalf("accepted %q without a mac", tok)
			}
			pt, payload, err := protocol.ParseToken(tok)
			if err != nil {
				t.Fatalf("accepted %q that does not parse: %v", tok, err)
			}
			key := fuzzSecret
			if kind == protocol.CallerAnonymous {
				key = anonymousKey(fuzzSecret)
			} else if kind != protocol.CallerSecretHolder {
				t.Fatalf("accepted %q as kind %v", tok, kind)
			}
			m := hmac.New(sha256.New, key)
			m.Write([]byte(payload))
			if hex.EncodeToString(m.Sum(nil)) != mac {
				t.Fatalf("accepted %q as %v, but its mac is not that kind's", tok, kind)
			}
			if got.Subject != fuzzIP || pt != got {
				t.Fatalf("accepted %q for subject %q", tok, got.Subject)
			}
			if canon := fuzzToken(got); tok != canon && tok != padded(canon) {
				t.Fatalf("accepted %q, a variant of %q", tok, canon)
			}
		} else {
			if perr.Code != protocol.CodeInvalidSession || perr.Message == "" {
				t.Fatalf("refusal %+v", perr)
			}
			d, _ := perr.Data.(map[string]string)
			switch d["reason"] {
			case "missing", "malformed", "signature", "expired", "future", "other_ip":
			default:
				t.Fatalf("refusal reason %q for %q", d["reason"], tok)
			}
		}
		// The handler agrees with verify.
		w := httptest.NewRecorder()
		s.handler.ServeHTTP(w, r)
		want := http.StatusUnauthorized
		if perr == nil {
			want = http.StatusOK
		}
		if w.Code != want || !json.Valid(w.Body.Bytes()) {
			t.Fatalf("handler: status %d (want %d), body %q", w.Code, want, w.Body.Bytes())
		}
	})
}

// FuzzHTTPRequest posts arbitrary bodies, content types and conversation
// headers to POST /mcpv2, /mcpv2/ai/{provider} and the gateway through the
// handler. It must never panic; every answer is JSON (or 204 with no body)
// with a status of the expected set, every error a JSON-RPC error object,
// and every request at least one audit line.
func FuzzHTTPRequest(f *testing.F) {
	s, b := newFuzzServer(f)
	tok := fuzzToken(protocol.Token{Subject: fuzzIP, Nonce: "fuzz", IssuedAt: fuzzNow.Unix(), TTL: 3600})
	f.Add(uint8(0), "", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"}}`), "application/json", "")
	f.Add(uint8(0), "", []byte(`[{"jsonrpc":"2.0","method":"tools/list"}]`), "", "")
	for p, body := range aiRequests {
		f.Add(uint8(1), p, []byte(body), "application/json", "conv-1")
	}
	f.Add(uint8(1), "llama", []byte(`{}`), "text/plain", "")
	f.Add(uint8(2), "", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), "application/json", "")

	f.Fuzz(func(t *testing.T, target uint8, provider string, body []byte, contentType, conv string) {
		path := "/mcpv2"
		isAI := false
		switch target % 3 {
		case 1:
			path, isAI = "/mcpv2/ai/"+pathSegment(provider), true
		case 2:
			path = "/mcpv2/peers/" + testPeerID
		}
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcpv2", bytes.NewReader(body))
		r.URL.Path = path
		r.Header.Set(SessionHeader, tok)
		r.Header.Set("Content-Type", contentType)
		if conv != "" {
			r.Header.Set(ConversationHeader, conv)
		}
		before := b.auditCount()
		w := httptest.NewRecorder()
		s.handler.ServeHTTP(w, r)
		if b.auditCount() == before {
			t.Errorf("no audit line for status %d", w.Code)
		}
		out := w.Body.Bytes()
		switch w.Code {
		case http.StatusNoContent:
			if len(out) != 0 {
				t.Fatalf("204 with a body %q", out)
			}
			return
		case http.StatusOK, http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound,
			http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway:
		default:
			t.Fatalf("unexpected status %d: %q", w.Code, out)
		}
		if !json.Valid(out) || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("status %d with a non-JSON answer %q", w.Code, out)
		}
		if w.Code != http.StatusOK {
			var resp protocol.Response
			if err := json.Unmarshal(out, &resp); err != nil || resp.Error == nil || resp.Error.Code == 0 || resp.Error.Message == "" {
				t.Fatalf("status %d without a JSON-RPC error: %q", w.Code, out)
			}
			return
		}
		if isAI {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("ai answer is not an object: %q", out)
			}
			key := map[string]string{"claude": "content", "gemini": "candidates", "openai": "choices", "deepseek": "choices"}[pathSegment(provider)]
			if key == "" || m[key] == nil {
				t.Fatalf("ai answer for %q lacks %q: %q", provider, key, out)
			}
		}
	})
}

// pathSegment turns a fuzzed provider name into one clean path segment.
func pathSegment(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteRune(c)
		}
		if b.Len() >= 20 {
			break
		}
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}

// TestSessionTokenCorpus checks that the committed corpus of
// FuzzSessionToken holds tokens that are accepted (valid_*) and tokens
// refused for each reason, so that the fuzzer starts from both sides.
func TestSessionTokenCorpus(t *testing.T) {
	b := &fakeBackend{quiet: true}
	s, err := New(b, Config{BindHost: "127.0.0.1", Secret: fuzzSecret, Now: func() time.Time { return fuzzNow }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := map[string]string{
		"valid_header": "", "valid_query": "", "valid_padded": "",
		"other_ip": "other_ip", "ipv6_subject": "other_ip", "expired": "expired", "future": "future",
		"other_secret": "signature", "mac_flipped": "signature", "payload_tampered": "signature",
		"mac_upper": "malformed", "no_dot": "malformed", "two_dots": "malformed", "newline_in_payload": "malformed",
		"zero_ttl": "malformed", "long": "malformed", "empty": "missing",
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzSessionToken")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("%d corpus files, want %d", len(entries), len(want))
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 3 || lines[0] != "go test fuzz v1" {
			t.Fatalf("%s: not a corpus file of two values", e.Name())
		}
		tok, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcpv2", nil)
		if lines[2] == "bool(true)" {
			r.URL.RawQuery = url.Values{SessionParam: {tok}}.Encode()
		} else {
			r.Header.Set(SessionHeader, tok)
		}
		_, _, perr := verifyRequest(s, r)
		got := ""
		if perr != nil {
			got = perr.Data.(map[string]string)["reason"]
		}
		if w, ok := want[e.Name()]; !ok || got != w {
			t.Errorf("%s: reason %q, want %q", e.Name(), got, w)
		}
	}
}

// verifyRequest checks the session token r presents, as the edge's
// session endpoints do: "missing" when there is none.
func verifyRequest(s *Server, r *http.Request) (protocol.Token, protocol.CallerKind, *protocol.Error) {
	tok := presented(r)
	if tok == "" {
		return protocol.Token{}, 0, invalidCredential("missing", "no credential")
	}
	return s.verifySession(tok, clientIP(r.RemoteAddr))
}
