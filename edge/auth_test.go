package edge

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// anonymousToken gets a session the way any stranger can: GET /mcpv2/session.
func (e *testEdge) anonymousToken(t *testing.T) string {
	t.Helper()
	st, _, body := e.do(t, http.MethodGet, "/mcpv2/session", nil, nil)
	if st != http.StatusOK {
		t.Fatalf("GET /mcpv2/session: %d %s", st, body)
	}
	var sa sessionAnswer
	if err := json.Unmarshal(body, &sa); err != nil || sa.SessionID == "" {
		t.Fatalf("session answer %s", body)
	}
	return sa.SessionID
}

// TestCallerKindFromToken: the edge tells a secret holder from an anonymous
// session by the token alone, and hands the node that kind, on every
// session endpoint, the gateway included.
func TestCallerKindFromToken(t *testing.T) {
	e := startEdge(t, Config{})
	anon := e.anonymousToken(t)
	secret := e.token // minted with the secret, as the seed's client did
	ping := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"}}`
	for _, tc := range []struct {
		tok  string
		want protocol.CallerKind
	}{{anon, protocol.CallerAnonymous}, {secret, protocol.CallerSecretHolder}} {
		before := len(e.b.callerList())
		if st, _, b := e.do(t, http.MethodPost, "/mcpv2", []byte(ping), map[string]string{SessionHeader: tc.tok}); st != 200 {
			t.Fatalf("POST /mcpv2: %d %s", st, b)
		}
		if got := e.b.callerList()[before:]; len(got) != 1 || got[0].Kind != tc.want {
			t.Errorf("Handle saw %+v, want kind %v", got, tc.want)
		}
		fbefore := len(e.b.forwardList())
		if st, _, b := e.do(t, http.MethodPost, "/mcpv2/peers/"+testPeerID, []byte(ping), map[string]string{SessionHeader: tc.tok}); st != 200 {
			t.Fatalf("gateway: %d %s", st, b)
		}
		if got := e.b.forwardList()[fbefore:]; len(got) != 1 || got[0].caller.Kind != tc.want || got[0].caller.ID != "ip:127.0.0.1" {
			t.Errorf("Forward saw %+v, want kind %v", got, tc.want)
		}
	}
	// An anonymous token re-signed by nobody cannot become a secret
	// holder's: flipping a byte of its MAC fails the signature check.
	bad := anon[:len(anon)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", anon[len(anon)-1])+1)%16])
	st, _, _ := e.do(t, http.MethodPost, "/mcpv2", []byte(ping), map[string]string{SessionHeader: bad})
	if st != http.StatusUnauthorized {
		t.Errorf("tampered anonymous token: %d, want 401", st)
	}
}

// TestAnonymousTokensOfAnotherSecretRefused: the derived key depends on the
// secret, so an anonymous session of one edge is worthless at another.
func TestAnonymousTokensOfAnotherSecretRefused(t *testing.T) {
	a := startEdge(t, Config{})
	b := startEdge(t, Config{Secret: []byte("another secret")})
	tok := a.anonymousToken(t)
	st, _, body := b.do(t, http.MethodPost, "/mcpv2", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), map[string]string{SessionHeader: tok})
	if st != http.StatusUnauthorized || !strings.Contains(string(body), "bad signature") {
		t.Errorf("%d %s", st, body)
	}
}

// TestCostlyPathsLimitedPerIP is the attacker with many sessions: the
// per-session rate does not bound it, the per-IP limit on find and the
// gateway does, and other endpoints stay usable.
func TestCostlyPathsLimitedPerIP(t *testing.T) {
	e := startEdge(t, Config{FindRateLimit: 2, GatewayRateLimit: 3, SessionRateLimit: -1})
	toks := make([]string, 8)
	for i := range toks {
		toks[i] = e.anonymousToken(t) // a fresh session each time
	}
	count := func(path, method string, body []byte) (ok, limited int) {
		for _, tok := range toks {
			st, hdr, b := e.do(t, method, path, body, map[string]string{SessionHeader: tok})
			switch st {
			case 200:
				ok++
			case 429:
				limited++
				if hdr.Get("Retry-After") == "" || rpcError(t, b).Code != protocol.CodeRateLimited {
					t.Errorf("429 without Retry-After or -32005: %s", b)
				}
			default:
				t.Fatalf("%s %s: %d %s", method, path, st, b)
			}
		}
		return
	}
	if ok, lim := count("/mcpv2/find?skill=ping", http.MethodGet, nil); ok != 2 || lim != 6 {
		t.Errorf("find from one IP with 8 sessions: %d ok, %d limited; want 2 and 6", ok, lim)
	}
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"}}`)
	if ok, lim := count("/mcpv2/peers/"+testPeerID, http.MethodPost, ping); ok != 3 || lim != 5 {
		t.Errorf("gateway from one IP with 8 sessions: %d ok, %d limited; want 3 and 5", ok, lim)
	}
	// The plain RPC endpoint is limited per session, not by these.
	if ok, lim := count("/mcpv2", http.MethodPost, ping); ok != 8 || lim != 0 {
		t.Errorf("POST /mcpv2: %d ok, %d limited", ok, lim)
	}
	// Time refills the buckets (the test clock).
	e.clk.Add(time.Second)
	if st, _, b := e.do(t, http.MethodGet, "/mcpv2/find?skill=ping", nil, map[string]string{SessionHeader: toks[0]}); st != 200 {
		t.Errorf("find after a second: %d %s", st, b)
	}
}

// TestInFlightCap: requests beyond MaxInFlight are refused at once with 503
// and -32005, each audited, and the slots free up when requests end.
func TestInFlightCap(t *testing.T) {
	b := &fakeBackend{handleDelay: time.Second, entered: make(chan struct{}, 8)}
	e := startEdgeWith(t, b, Config{MaxInFlight: 2})
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping"}}`)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, e.base+"/mcpv2?sessionId="+url.QueryEscape(e.token), strings.NewReader(string(ping)))
			if resp, err := e.http.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	<-b.entered
	<-b.entered // both slots are taken
	before := b.auditCount()
	st, hdr, body := e.do(t, http.MethodPost, "/mcpv2", ping, map[string]string{SessionHeader: e.token})
	if st != http.StatusServiceUnavailable || hdr.Get("Retry-After") != "1" {
		t.Fatalf("third request: %d %s", st, body)
	}
	if perr := rpcError(t, body); perr.Code != protocol.CodeRateLimited || !strings.Contains(perr.Message, "at most 2 requests at once") {
		t.Errorf("refusal %+v", perr)
	}
	if n := b.auditCount() - before; n != 1 {
		t.Errorf("%d audit lines for the refusal, want 1", n)
	}
	wg.Wait()
	if st, _, body := e.do(t, http.MethodPost, "/mcpv2", ping, map[string]string{SessionHeader: e.token}); st != 200 {
		t.Errorf("after the first two ended: %d %s", st, body)
	}
}

// TestVerifiedTokensRemembered: a session's second request is taken from
// the cache of verified tokens, but the cache never lets through what the
// full check would refuse: the same token from another IP, a token past
// its expiry, a token altered by a byte.
func TestVerifiedTokensRemembered(t *testing.T) {
	e := startEdge(t, Config{SessionTTL: 10 * time.Second})
	tok := e.anonymousToken(t)
	call := func(tok, ip string) error {
		_, _, err := e.s.verifyToken(tok, ip)
		return err
	}
	if err := call(tok, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := e.s.verified.get(tok, "127.0.0.1", e.clk.Now()); !ok {
		t.Fatal("a verified token is not remembered")
	}
	if err := call(tok, "10.0.0.9"); !errors.Is(err, protocol.ErrTokenSubject) {
		t.Errorf("the cached token from another IP: %v, want %v", err, protocol.ErrTokenSubject)
	}
	altered := tok[:len(tok)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", tok[len(tok)-1])+1)%16])
	if err := call(altered, "127.0.0.1"); !errors.Is(err, protocol.ErrTokenSignature) {
		t.Errorf("an altered token: %v, want %v", err, protocol.ErrTokenSignature)
	}
	// Within the cache's second the token still expires on time.
	e.clk.Add(9*time.Second + 500*time.Millisecond)
	if err := call(tok, "127.0.0.1"); err != nil {
		t.Fatalf("half a second before expiry: %v", err)
	}
	if _, _, ok := e.s.verified.get(tok, "127.0.0.1", e.clk.Now().Add(time.Second)); ok {
		t.Error("the cache would keep a token past its expiry")
	}
	e.clk.Add(1600 * time.Millisecond)
	if err := call(tok, "127.0.0.1"); !errors.Is(err, protocol.ErrTokenExpired) {
		t.Errorf("past expiry, just after a cached check: %v, want %v", err, protocol.ErrTokenExpired)
	}
}
