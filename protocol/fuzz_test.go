package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/ (go test runs them as
// ordinary tests); a fuzzing run adds what it finds to the same directory
// when it fails.

// FuzzParseRequest: ParseRequest never panics; a message it accepts has 1 to
// MaxBatchSize slots, is a batch iff it starts with '[', and answering every
// slot with an error encodes to valid UTF-8 JSON that parses back.
func FuzzParseRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		req, perr := ParseRequest(data)
		trimmed := bytes.Trim(data, " \t\r\n")
		if perr != nil {
			if perr.Code != CodeParseError && perr.Code != CodeInvalidRequest {
				t.Fatalf("whole-message refusal with code %d", perr.Code)
			}
			if len(req.Slots) != 0 || req.IsBatch {
				t.Fatalf("refused message still has %d slots", len(req.Slots))
			}
			checkEncoded(t, false, []Response{ErrorResponse(nil, perr)})
			return
		}
		if !json.Valid(trimmed) || !utf8.Valid(trimmed) {
			t.Fatalf("accepted a message that is not UTF-8 JSON: %q", data)
		}
		if n := len(req.Slots); n < 1 || n > MaxBatchSize {
			t.Fatalf("accepted %d slots", n)
		}
		if req.IsBatch != (trimmed[0] == '[') {
			t.Fatalf("IsBatch = %v for a message starting with %q", req.IsBatch, trimmed[0])
		}
		if !req.IsBatch && (len(req.Slots) != 1 || trimmed[0] != '{') {
			t.Fatalf("a non-batch message gave %d slots", len(req.Slots))
		}
		var resps []Response
		for i, s := range req.Slots {
			checkSlot(t, i, s, data)
			if s.IsNotification() {
				continue
			}
			e := s.Err
			if e == nil {
				e = Errorf(CodeInternal, "answer to %s", s.Method)
			}
			resps = append(resps, ErrorResponse(s.ID, e))
		}
		checkEncoded(t, req.IsBatch, resps)
	})
}

// FuzzParseRequestAlloc: ParseRequest allocates at most allocFactor times
// the message's size, plus allocSlack for the refusal and the decoder's
// small state, whatever the message holds: a batch of millions of elements,
// deep nesting, objects of many members (issue 7: an 8 MB array once cost
// 500 MB). The seeds include a 256 KiB array of zeros, 65,536 open brackets
// and 101 slots.
func FuzzParseRequestAlloc(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		req, perr := ParseRequest(data)
		runtime.ReadMemStats(&after)
		n := after.TotalAlloc - before.TotalAlloc
		if limit := allocLimit(len(data)); n > limit {
			t.Fatalf("allocated %d bytes for a %d-byte message (limit %d)", n, len(data), limit)
		}
		if perr == nil && (len(req.Slots) == 0 || len(req.Slots) > MaxBatchSize) {
			t.Fatalf("accepted %d slots", len(req.Slots))
		}
	})
}

func checkSlot(t *testing.T, i int, s Slot, data []byte) {
	t.Helper()
	if s.ID != nil {
		// By its syntax: a number past float64's range (1e700) is a JSON
		// number, and an id goes back as it came.
		if !json.Valid(s.ID) {
			t.Fatalf("slot %d: id %q is not JSON", i, s.ID)
		}
		switch s.ID[0] {
		case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		default:
			t.Fatalf("slot %d: id %s is neither string, number nor null", i, s.ID)
		}
		if string(s.ID) != "null" && !bytes.Contains(data, s.ID) {
			t.Fatalf("slot %d: id %s is not the one on the wire", i, s.ID)
		}
	}
	if s.Err == nil {
		if s.JSONRPC != "2.0" || s.Method == "" {
			t.Fatalf("slot %d passed with jsonrpc %q, method %q", i, s.JSONRPC, s.Method)
		}
		if s.Context != nil && s.Context.Provider != "" && !ValidProvider(s.Context.Provider) {
			t.Fatalf("slot %d passed with provider %q", i, s.Context.Provider)
		}
		return
	}
	switch s.Err.Code {
	case CodeInvalidRequest:
		if s.ID == nil {
			t.Fatalf("slot %d: invalid slot without id would go unanswered", i)
		}
	case CodeUnsupportedProvider:
	default:
		t.Fatalf("slot %d: unexpected code %d", i, s.Err.Code)
	}
}

func checkEncoded(t *testing.T, isBatch bool, resps []Response) {
	t.Helper()
	out, err := EncodeResponses(isBatch, resps)
	if err != nil {
		t.Fatalf("EncodeResponses: %v", err)
	}
	if len(resps) == 0 {
		if out != nil {
			t.Fatalf("no responses encoded to %q", out)
		}
		return
	}
	if !json.Valid(out) || !utf8.Valid(out) {
		t.Fatalf("EncodeResponses wrote invalid JSON: %q", out)
	}
	if (out[0] == '[') != isBatch {
		t.Fatalf("batch %v encoded as %q…", isBatch, out[0])
	}
	back, err := ParseResponses(out)
	if err != nil {
		t.Fatalf("ParseResponses(%s): %v", out, err)
	}
	want := len(resps)
	if !isBatch {
		want = 1
	}
	if len(back) != want {
		t.Fatalf("ParseResponses gave %d responses, want %d", len(back), want)
	}
	for i := range back {
		if back[i].Error == nil || back[i].Error.Code != resps[i].Error.Code {
			t.Fatalf("response %d: %+v after the round trip", i, back[i])
		}
	}
}

// FuzzParseAddress: ParseAddress never panics; every failure wraps
// ErrBadAddress; a parsed address renders with String() to a form that
// parses back to the same address.
func FuzzParseAddress(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			if !errors.Is(err, ErrBadAddress) {
				t.Fatalf("error %v does not wrap ErrBadAddress", err)
			}
			if a != (Address{}) {
				t.Fatalf("failure returned %#v", a)
			}
			return
		}
		switch a.Kind {
		case AddrMesh:
			if !LooksLikePeerID(a.PeerID) || a.Host != "" || a.Port != 0 || a.URL != "" {
				t.Fatalf("mesh address %#v", a)
			}
			if a.Multiaddr != "" && !strings.HasSuffix(a.Multiaddr, "/p2p/"+a.PeerID) {
				t.Fatalf("multiaddr %q does not end in /p2p/%s", a.Multiaddr, a.PeerID)
			}
		case AddrHTTP:
			if a.Host == "" || a.Port < 1 || a.Port > 65535 || a.PeerID != "" {
				t.Fatalf("edge address %#v", a)
			}
			u, err := url.Parse(a.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() != a.Host || u.Port() != fmt.Sprint(a.Port) || u.Path != "/mcpv2" {
				t.Fatalf("edge URL %q of %#v: %v", a.URL, a, err)
			}
		default:
			t.Fatalf("kind %d", a.Kind)
		}
		s2 := a.String()
		b, err := ParseAddress(s2)
		if err != nil {
			t.Fatalf("ParseAddress(%q) = %#v, but its String() %q does not parse: %v", s, a, s2, err)
		}
		if b != a {
			t.Fatalf("round trip %q -> %q\ngot  %#v\nwant %#v", s, s2, b, a)
		}
		if s3 := b.String(); s3 != s2 {
			t.Fatalf("String() not stable: %q then %q", s2, s3)
		}
	})
}

// fuzzSecret signs the tokens of the FuzzVerifyToken seed corpus.
var fuzzSecret = []byte("mcpv2 fuzz secret")

// FuzzVerifyToken: VerifyToken never panics and every refusal wraps
// ErrInvalidSession and exactly one reason. A token that verifies is the one
// EncodeToken writes for it with the same secret (or, for the seed's
// clients, that token with its payload's base64url padded): tokens are not
// malleable. tok is tried as given; payload is signed with fuzzSecret as SPEC
// §5 says, so that the payload parser is exercised past the HMAC.
func FuzzVerifyToken(f *testing.F) {
	f.Fuzz(func(t *testing.T, tok string, payload string) {
		checkToken(t, tok)
		checkToken(t, specToken(fuzzSecret, payload))
	})
}

func checkToken(t *testing.T, tok string) {
	t.Helper()
	// Against an arbitrary caller and clock: must not panic, must classify.
	if _, err := VerifyToken(fuzzSecret, tok, "203.0.113.9", time.Unix(1_760_000_000, 0), DefaultClockSkew); err != nil {
		checkRefusal(t, err)
	}
	parsed, payload, err := ParseToken(tok)
	if err != nil {
		checkRefusal(t, err)
		if !errors.Is(err, ErrTokenMalformed) {
			t.Fatalf("ParseToken error %v is not ErrTokenMalformed", err)
		}
		return
	}
	// Against its own subject and issue time: only the signature (and an
	// overflowing expiry) can refuse it now. A clock near the end of int64
	// (issued_at beyond 1<<42 s, 140,000 years away) is no clock to test.
	if parsed.IssuedAt > 1<<42 {
		return
	}
	got, err := VerifyToken(fuzzSecret, tok, parsed.Subject, time.Unix(parsed.IssuedAt, 0), DefaultClockSkew)
	if err != nil {
		checkRefusal(t, err)
		if !errors.Is(err, ErrTokenSignature) && !errors.Is(err, ErrTokenExpired) {
			t.Fatalf("well-formed token %q refused with %v", tok, err)
		}
		return
	}
	if got != parsed {
		t.Fatalf("VerifyToken = %+v, ParseToken = %+v", got, parsed)
	}
	want := EncodeToken(fuzzSecret, got)
	_, mac, _ := strings.Cut(want, ".")
	padded := base64.URLEncoding.EncodeToString([]byte(payload)) + "." + mac
	if tok != want && tok != padded {
		t.Fatalf("token %q verifies but re-encodes as %q", tok, want)
	}
	if want != specToken(fuzzSecret, fmt.Sprintf("%s:%s:%d:%d", got.Subject, got.Nonce, got.IssuedAt, got.TTL)) {
		t.Fatalf("EncodeToken(%+v) differs from SPEC §5", got)
	}
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrInvalidSession) {
		t.Fatalf("refusal %v does not wrap ErrInvalidSession", err)
	}
	n := 0
	for _, r := range tokenReasons {
		if errors.Is(err, r) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("refusal %v wraps %d reasons, want exactly one", err, n)
	}
}

// TestFuzzCorpora checks that each fuzz target has a committed seed corpus
// of at least 8 files in Go's corpus format.
func TestFuzzCorpora(t *testing.T) {
	for name, args := range map[string]int{"FuzzParseRequest": 1, "FuzzParseRequestAlloc": 1, "FuzzParseAddress": 1, "FuzzVerifyToken": 2} {
		dir := filepath.Join("testdata", "fuzz", name)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(entries) < 8 {
			t.Errorf("%s: %d seeds, want at least 8", name, len(entries))
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if lines[0] != "go test fuzz v1" || len(lines) != 1+args {
				t.Errorf("%s/%s: not a corpus file of %d argument(s)", name, e.Name(), args)
			}
		}
	}
}
