package edge

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// fakeKeys is a KeyVerifier over a map of secrets; mu guards it.
type fakeKeys struct {
	mu   sync.Mutex
	keys map[string]fakeKey // secret → key
}

type fakeKey struct {
	name    string
	grants  []string
	revoked bool
}

func (k *fakeKeys) VerifyKey(secret string) (string, []string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.keys[secret]
	switch {
	case !ok:
		return "", nil, errors.New("no such key")
	case e.revoked:
		return "", nil, errors.New("revoked")
	}
	return e.name, e.grants, nil
}

func (k *fakeKeys) ActiveKeys() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, e := range k.keys {
		if !e.revoked {
			n++
		}
	}
	return n
}

func (k *fakeKeys) revoke(secret string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.keys[secret]
	e.revoked = true
	k.keys[secret] = e
}

const testKey = protocol.KeyPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// mountFace mounts a face at /face that answers with the caller it was
// given, as JSON.
func mountFace(e *testEdge) {
	e.s.Mux().Handle("/face", e.s.AuthenticatedFace([]string{http.MethodPost}, nil, func(w http.ResponseWriter, r *http.Request, c protocol.Caller) {
		writeJSON(w, http.StatusOK, c)
	}))
}

func callerOf(t *testing.T, body []byte) protocol.Caller {
	t.Helper()
	var c protocol.Caller
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return c
}

// TestCredentials: each kind of credential is its own caller on the
// faces and on POST /mcpv2, and a request without one is an anonymous
// caller on a face only.
func TestCredentials(t *testing.T) {
	keys := &fakeKeys{keys: map[string]fakeKey{testKey: {name: "laptop", grants: []string{"ask"}}}}
	e := startEdge(t, Config{Keys: keys})
	mountFace(e)
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

	// No credential: anonymous on the face, owning nothing; 401 on /mcpv2.
	status, _, body := e.do(t, http.MethodPost, "/face", []byte("{}"), nil)
	if c := callerOf(t, body); status != 200 || c.Kind != protocol.CallerAnonymous || c.Owner != "" || c.ID != "ip:127.0.0.1" {
		t.Fatalf("no credential on a face: %d %+v", status, c)
	}
	status, hdr, body := e.do(t, http.MethodPost, "/mcpv2", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), nil)
	if status != 401 || !strings.Contains(string(body), "no session token") || !strings.Contains(string(body), "API key") ||
		hdr.Get("WWW-Authenticate") != `Bearer realm="mcpv2"` {
		t.Fatalf("no credential on /mcpv2: %d %q %s", status, hdr.Get("WWW-Authenticate"), body)
	}

	// An API key: its own caller, with its grants, on the face and /mcpv2.
	status, _, body = e.do(t, http.MethodPost, "/face", []byte("{}"), bearer(testKey))
	if c := callerOf(t, body); status != 200 || c.Kind != protocol.CallerKey || c.ID != "key:laptop" || c.Owner != "key:laptop" || !slices.Equal(c.Grants, []string{"ask"}) {
		t.Fatalf("key on a face: %d %+v", status, c)
	}
	status, _, _ = e.do(t, http.MethodPost, "/mcpv2", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), bearer(testKey))
	if cs := e.b.callerList(); status != 200 || cs[len(cs)-1].ID != "key:laptop" || cs[len(cs)-1].Kind != protocol.CallerKey {
		t.Fatalf("key on /mcpv2: %d %+v", status, cs)
	}
	// Revoked: refused on the next request, with a challenge.
	keys.revoke(testKey)
	status, hdr, body = e.do(t, http.MethodPost, "/face", []byte("{}"), bearer(testKey))
	if status != 401 || !strings.Contains(string(body), "invalid API key: revoked") || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("revoked key: %d %q %s", status, hdr.Get("WWW-Authenticate"), body)
	}
	// A key shape without a key ring, a JWT without an issuer: 401.
	e2 := startEdge(t, Config{})
	for _, tok := range []string{testKey, "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"} {
		status, _, body = e2.do(t, http.MethodPost, "/mcpv2", []byte(`{}`), bearer(tok))
		if status != 401 || !strings.Contains(string(body), "accepts no") {
			t.Errorf("%.20s… on an edge without it: %d %s", tok, status, body)
		}
	}

	// An anonymous session and a secret holder's keep their kinds.
	status, _, body = e.do(t, http.MethodPost, "/face", []byte("{}"), bearer(e.token))
	if c := callerOf(t, body); status != 200 || c.Kind != protocol.CallerSecretHolder || c.Owner != protocol.OwnerSecret {
		t.Fatalf("secret holder on a face: %d %+v", status, c)
	}
}

// TestRequireAuth: with RequireAuth, or with an issuer and no grants to
// "http", a face refuses a request without a credential with 401 and a
// challenge; an issuer adds the resource metadata to it.
func TestRequireAuth(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		refuse bool
		meta   bool
	}{
		{"require-auth", Config{RequireAuth: true, Keys: &fakeKeys{}}, true, false},
		{"issuer, no anonymous grants", Config{OIDCIssuers: []string{"http://127.0.0.1:1"}}, true, true},
		{"issuer, anonymous grants", Config{OIDCIssuers: []string{"http://127.0.0.1:1"}, AnonymousGrants: true}, false, true},
		{"neither", Config{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEdge(t, tc.cfg)
			mountFace(e)
			status, hdr, body := e.do(t, http.MethodPost, "/face", []byte("{}"), nil)
			if !tc.refuse {
				if status != 200 {
					t.Fatalf("%d %s", status, body)
				}
				return
			}
			www := hdr.Get("WWW-Authenticate")
			if status != 401 || !strings.Contains(string(body), "authentication required") || !strings.HasPrefix(www, "Bearer ") || strings.Contains(www, "error=") {
				t.Fatalf("%d %q %s", status, www, body)
			}
			if want := `resource_metadata="` + e.base + `/.well-known/oauth-protected-resource/face"`; tc.meta != strings.Contains(www, want) {
				t.Fatalf("WWW-Authenticate %q: want %s: %v", www, want, tc.meta)
			}
			var h HealthStatus
			_, _, body = e.do(t, http.MethodGet, "/mcpv2/health", nil, nil)
			if err := json.Unmarshal(body, &h); err != nil || h.Credentials == nil || h.Credentials.Anonymous {
				t.Fatalf("health %s: %v", body, err)
			}
		})
	}
}

// TestSessionRevoke: DELETE /mcpv2/session revokes the session presented;
// it is refused from the next request, the health counts say so, and
// other sessions go on.
func TestSessionRevoke(t *testing.T) {
	e := startEdge(t, Config{})
	var got struct {
		SessionID string `json:"sessionId"`
	}
	var toks []string
	for range 3 {
		_, _, body := e.do(t, http.MethodGet, "/mcpv2/session", nil, nil)
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		toks = append(toks, got.SessionID)
	}
	health := func() CredentialCounts {
		var h HealthStatus
		_, _, body := e.do(t, http.MethodGet, "/mcpv2/health", nil, nil)
		if err := json.Unmarshal(body, &h); err != nil || h.Credentials == nil {
			t.Fatalf("health %s: %v", body, err)
		}
		return *h.Credentials
	}
	if h := health(); h.Sessions != 3 || h.RevokedSessions != 0 || h.APIKeys != -1 || !h.Anonymous {
		t.Fatalf("health before: %+v", h)
	}
	status, _, body := e.do(t, http.MethodDelete, "/mcpv2/session", nil, map[string]string{SessionHeader: toks[0]})
	if status != 200 || !strings.Contains(string(body), `"revoked":true`) {
		t.Fatalf("revoke: %d %s", status, body)
	}
	status, _, body = e.do(t, http.MethodPost, "/mcpv2", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), map[string]string{SessionHeader: toks[0]})
	if status != 401 || !strings.Contains(string(body), "invalid session: revoked at") || !strings.Contains(string(body), `"reason":"revoked"`) {
		t.Fatalf("revoked session: %d %s", status, body)
	}
	if status, _, body = e.do(t, http.MethodPost, "/mcpv2", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), map[string]string{SessionHeader: toks[1]}); status != 200 {
		t.Fatalf("another session: %d %s", status, body)
	}
	// The secret holder's session can be revoked too; it was not issued
	// here, so it is not among the issued ones.
	if status, _, body = e.do(t, http.MethodDelete, "/mcpv2/session", nil, map[string]string{"Authorization": "Bearer " + e.token}); status != 200 {
		t.Fatalf("revoke a secret holder's: %d %s", status, body)
	}
	if h := health(); h.Sessions != 2 || h.RevokedSessions != 2 {
		t.Fatalf("health after: %+v", h)
	}
	// No session, or a key: 400 naming what DELETE revokes.
	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer " + testKey}} {
		if status, _, body = e.do(t, http.MethodDelete, "/mcpv2/session", nil, hdr); status != 400 || !strings.Contains(string(body), "mcpv2 key revoke") {
			t.Fatalf("DELETE with %v: %d %s", hdr, status, body)
		}
	}
	// Expired sessions leave the counts.
	e.clk.Add(2 * time.Hour)
	if h := health(); h.Sessions != 0 || h.RevokedSessions != 0 {
		t.Fatalf("health after expiry: %+v", h)
	}
}

// TestCredentialRateLimits: the request rate is per credential, and per
// IP for callers without one.
func TestCredentialRateLimits(t *testing.T) {
	keys := &fakeKeys{keys: map[string]fakeKey{testKey: {name: "k"}}}
	e := startEdge(t, Config{Keys: keys, RateLimit: 2})
	mountFace(e)
	codes := func(hdr map[string]string) []int {
		var out []int
		for range 3 {
			status, _, _ := e.do(t, http.MethodPost, "/face", []byte("{}"), hdr)
			out = append(out, status)
		}
		return out
	}
	want := []int{200, 200, 429}
	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer " + testKey}, {SessionHeader: e.token}} {
		if got := codes(hdr); !slices.Equal(got, want) {
			t.Errorf("%v: %v, want %v", hdr, got, want)
		}
	}
}
