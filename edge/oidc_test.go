package edge

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpv2/mcpv2/internal/oidctest"
	"github.com/mcpv2/mcpv2/protocol"
)

// testResource is the resource the tokens of the OIDC tests are for.
const testResource = "http://127.0.0.1:9999/mcp"

// newTestOIDC returns an oidcAuth of issuers on a client of its own, with
// the discoveries started at once (background) unless cfg says otherwise
// through mod; t's cleanup closes it.
func newTestOIDC(t *testing.T, issuers []string, audience string, mod ...func(*oidcConfig)) *oidcAuth {
	t.Helper()
	tr := &http.Transport{}
	cfg := oidcConfig{issuers: issuers, audience: audience, client: &http.Client{Transport: tr}, background: true,
		log: newTextLogger(testWriter{t})}
	for _, m := range mod {
		m(&cfg)
	}
	a, err := newOIDCWith(cfg)
	if err != nil {
		t.Fatalf("newOIDC: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		tr.CloseIdleConnections()
	})
	return a
}

// testWriter writes a test's log lines with t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// wantReason checks a refusal: -32001, "invalid token: …", data.reason.
func wantReason(t *testing.T, perr *protocol.Error, reason string) {
	t.Helper()
	if perr == nil {
		t.Fatalf("accepted; want a refusal for %s", reason)
	}
	got, _ := perr.Data.(map[string]string)
	if perr.Code != protocol.CodeInvalidSession || got["reason"] != reason || !strings.HasPrefix(perr.Message, "invalid token: ") {
		t.Fatalf("refusal = %d %q %v; want %d, reason %q, an \"invalid token: \" message", perr.Code, perr.Message, perr.Data, protocol.CodeInvalidSession, reason)
	}
}

func TestCheckOIDCConfig(t *testing.T) {
	good := [][]string{
		{"https://issuer.example"}, {"https://issuer.example/tenant/"}, {"http://127.0.0.1:8080"},
		{"http://localhost:9000/realms/x"}, {"http://[::1]:5556"}, {"http://127.1.2.3"},
		{"https://a.example", "https://b.example"},
	}
	for _, iss := range good {
		if err := checkOIDCConfig(iss, ""); err != nil {
			t.Errorf("%v: %v", iss, err)
		}
	}
	bad := []struct {
		issuers []string
		want    string
	}{
		{nil, "no issuer"},
		{[]string{""}, "absolute"},
		{[]string{"issuer.example"}, "absolute"},
		{[]string{"http://issuer.example"}, "loopback"},
		{[]string{"http://10.0.0.1"}, "loopback"},
		{[]string{"ftp://issuer.example"}, "scheme"},
		{[]string{"https://u:p@issuer.example"}, "user info"},
		{[]string{"https://issuer.example?x=1"}, "query"},
		{[]string{"https://issuer.example#f"}, "fragment"},
		{[]string{"https://a.example", "https://a.example"}, "twice"},
		{[]string{"https://%zz"}, "not a URL"},
	}
	for _, c := range bad {
		err := checkOIDCConfig(c.issuers, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v; want one that says %q", c.issuers, err, c.want)
		}
	}
	if err := checkOIDCConfig([]string{"https://a.example"}, "  "); err == nil {
		t.Error("a blank audience was accepted")
	}
}

// TestOIDCVerify runs each kind of token past a verifier of op1: real
// tokens of the provider's grants, and tokens made to fail one check each.
func TestOIDCVerify(t *testing.T) {
	op1 := oidctest.Start(t, oidctest.Options{Scopes: []string{"mcp", "tools:call"}})
	op2 := oidctest.Start(t, oidctest.Options{})
	a := newTestOIDC(t, []string{op1.Issuer()}, "")
	ctx := context.Background()

	// Real tokens: the client-credentials grant and the authorization
	// code grant with PKCE, each for testResource.
	cc := op1.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, testResource, "mcp", "tools:call")
	if !looksLikeJWT(cc) {
		t.Fatalf("the provider's access token does not look like a JWT: %s", cc)
	}
	got, perr := a.Verify(ctx, cc, testResource)
	if perr != nil {
		t.Fatalf("client-credentials token refused: %v", perr)
	}
	if got.Issuer != op1.Issuer() || got.Subject != oidctest.ServiceClientID || got.ClientID != oidctest.ServiceClientID ||
		!slices.Equal(got.Scopes, []string{"mcp", "tools:call"}) || time.Until(got.Expiry) < time.Minute {
		t.Errorf("claims = %+v", got)
	}
	ac := op1.AuthCodeToken(t, testResource, "openid", "mcp")
	got, perr = a.Verify(ctx, ac, testResource)
	if perr != nil {
		t.Fatalf("authorization-code token refused: %v", perr)
	}
	if got.Subject != oidctest.User || got.ClientID != oidctest.PublicClientID || !slices.Equal(got.Scopes, []string{"openid", "mcp"}) {
		t.Errorf("claims = %+v", got)
	}

	// scp, an array, when scope is absent.
	c := op1.Claims("bob", testResource)
	c["scp"] = []string{"a", "b"}
	if got, perr := a.Verify(ctx, op1.Sign(t, c), testResource); perr != nil || !slices.Equal(got.Scopes, []string{"a", "b"}) {
		t.Errorf("scp token: %+v, %v", got, perr)
	}

	now := time.Now()
	with := func(p *oidctest.Provider, change func(map[string]any)) map[string]any {
		c := p.Claims("bob", testResource, "mcp")
		change(c)
		return c
	}
	enc := base64.RawURLEncoding.EncodeToString
	parts := strings.Split(op1.Sign(t, op1.Claims("bob", testResource)), ".")
	forged, _ := json.Marshal(op1.Claims("mallory", testResource))
	hmacToken, err := oidctest.SignJWT(jose.HS256, []byte("a shared secret of 32 bytes......"), op1.KeyID(), op1.Claims("bob", testResource))
	if err != nil {
		t.Fatal(err)
	}
	esToken, err := oidctest.SignJWT(jose.ES256, throwawayKey(t), op1.KeyID(), op1.Claims("bob", testResource))
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, token, reason string
	}{
		{"wrong audience", op1.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, "http://127.0.0.1:9999/a2a"), oidcAudience},
		{"no resource asked", op1.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, ""), oidcAudience},
		{"issuer not accepted", op2.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, testResource), oidcIssuer},
		{"no issuer", op1.Sign(t, with(op1, func(c map[string]any) { delete(c, "iss") })), oidcIssuer},
		{"expired", op1.Sign(t, with(op1, func(c map[string]any) {
			c["iat"], c["nbf"], c["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
		})), oidcExpired},
		{"not yet valid", op1.Sign(t, with(op1, func(c map[string]any) {
			c["nbf"], c["exp"] = now.Add(time.Hour).Unix(), now.Add(2*time.Hour).Unix()
		})), oidcNotYetValid},
		{"issued in the future", op1.Sign(t, with(op1, func(c map[string]any) { c["iat"] = now.Add(time.Hour).Unix() })), oidcNotYetValid},
		{"alg none", oidctest.Unsigned(op1.Claims("bob", testResource)), oidcAlgorithm},
		{"alg HS256", hmacToken, oidcAlgorithm},
		{"alg the issuer does not use", esToken, oidcAlgorithm},
		{"unknown kid", op1.SignAs(t, "no-such-key", op1.Claims("bob", testResource)), oidcUnknownKey},
		{"other issuer's key, its kid", op2.Sign(t, op1.Claims("bob", testResource)), oidcUnknownKey},
		{"other issuer's key, our kid", op2.SignAs(t, op1.KeyID(), op1.Claims("bob", testResource)), oidcSignature},
		{"altered claims", parts[0] + "." + enc(forged) + "." + parts[2], oidcSignature},
		{"no exp", op1.Sign(t, with(op1, func(c map[string]any) { delete(c, "exp") })), oidcMalformed},
		{"no sub", op1.Sign(t, with(op1, func(c map[string]any) { delete(c, "sub") })), oidcMalformed},
		{"aud a number", op1.Sign(t, with(op1, func(c map[string]any) { c["aud"] = 7 })), oidcMalformed},
		{"exp a string", op1.Sign(t, with(op1, func(c map[string]any) { c["exp"] = "tomorrow" })), oidcMalformed},
		{"two parts", parts[0] + "." + parts[1], oidcMalformed},
		{"not base64", parts[0] + ".!!!." + parts[2], oidcMalformed},
		{"header not an object", enc([]byte(`["alg"]`)) + "." + parts[1] + "." + parts[2], oidcMalformed},
		{"header without alg", enc([]byte(`{"typ":"JWT"}`)) + "." + parts[1] + "." + parts[2], oidcMalformed},
		{"padded signature", parts[0] + "." + parts[1] + "." + parts[2] + "=", oidcMalformed},
		{"too long", parts[0] + "." + strings.Repeat("A", oidcMaxToken) + "." + parts[2], oidcMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, perr := a.Verify(ctx, c.token, testResource)
			wantReason(t, perr, c.reason)
			t.Log(perr.Message)
		})
	}

	// A configured audience replaces the resource.
	b := newTestOIDC(t, []string{op1.Issuer()}, "api://mcpv2")
	tok := op1.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, "api://mcpv2")
	if _, perr := b.Verify(ctx, tok, "http://127.0.0.1:1/anything"); perr != nil {
		t.Errorf("token for the configured audience refused: %v", perr)
	}
	_, perr = b.Verify(ctx, cc, testResource)
	wantReason(t, perr, oidcAudience)
}

// ageOIDC moves back by d the times a's issuer iss last started a discovery
// and a key-set fetch: to a, as if d had passed since (both are compared
// with time.Since, so the test does not sleep through the retry interval).
func ageOIDC(t *testing.T, a *oidcAuth, iss string, d time.Duration) {
	t.Helper()
	is := a.issuers[iss]
	if is == nil {
		t.Fatalf("no issuer %s", iss)
	}
	is.mu.Lock()
	is.tried = is.tried.Add(-d)
	found := is.found
	is.mu.Unlock()
	if found != nil {
		found.keys.mu.Lock()
		found.keys.fetched = found.keys.fetched.Add(-d)
		found.keys.mu.Unlock()
	}
}

// TestOIDCUnknownKeyRefetch: an unknown kid refetches a stale key set
// once, then not again within the retry interval.
func TestOIDCUnknownKeyRefetch(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	// Long, so that a loaded machine cannot let it pass between the five
	// calls; ageOIDC moves the clock past it where the test wants that.
	const retry = time.Hour
	a := newTestOIDC(t, []string{p.Issuer()}, "", func(c *oidcConfig) { c.retry = retry })
	ctx := context.Background()
	if _, perr := a.Verify(ctx, p.Sign(t, p.Claims("bob", testResource)), testResource); perr != nil {
		t.Fatal(perr)
	}
	var toks []string
	for i := range 5 {
		toks = append(toks, p.SignAs(t, "rotated-"+string(rune('a'+i)), p.Claims("bob", testResource)))
	}
	ageOIDC(t, a, p.Issuer(), retry+50*time.Millisecond) // the key set fetched at discovery is now stale
	keys := p.Hits(oidctest.KeysPath)
	for _, tok := range toks {
		_, perr := a.Verify(ctx, tok, testResource)
		wantReason(t, perr, oidcUnknownKey)
	}
	if n := p.Hits(oidctest.KeysPath) - keys; n != 1 {
		t.Errorf("5 unknown kids in a row fetched the key set %d times; want 1 (at most one per retry interval)", n)
	}
}

// TestOIDCIssuerDownThenUp: the verifier is made while its issuer is down
// (nothing fails); tokens are refused as issuer_unavailable, the issuer is
// not asked again within the retry interval, and once it is up a token is
// accepted.
func TestOIDCIssuerDownThenUp(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	tok := p.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, testResource)
	p.SetDown(true)
	// Long, so that a loaded machine cannot let it pass within the test's
	// "within the retry interval" steps; ageOIDC moves the clock past it.
	const retry = time.Hour
	a := newTestOIDC(t, []string{p.Issuer()}, "", func(c *oidcConfig) { c.retry = retry })
	ctx := context.Background()
	_, perr := a.Verify(ctx, tok, testResource) // waits for the discovery started at once
	wantReason(t, perr, oidcIssuerUnavailable)
	hits := p.Hits(oidctest.DiscoveryPath)
	if hits != 1 {
		t.Errorf("discovery requests = %d, want 1 (the one at start)", hits)
	}
	for range 10 {
		_, perr = a.Verify(ctx, tok, testResource)
		wantReason(t, perr, oidcIssuerUnavailable)
	}
	if n := p.Hits(oidctest.DiscoveryPath); n != hits {
		t.Errorf("10 requests within the retry interval made %d discovery requests; want none", n-hits)
	}
	p.SetDown(false)
	// Within the retry interval, an issuer that came up is not asked yet.
	_, perr = a.Verify(ctx, tok, testResource)
	wantReason(t, perr, oidcIssuerUnavailable)
	ageOIDC(t, a, p.Issuer(), retry) // the retry interval has passed
	if _, perr = a.Verify(ctx, tok, testResource); perr != nil {
		t.Fatalf("the token is still refused a retry interval after the issuer came up: %v", perr)
	}
	if n := p.Hits(oidctest.DiscoveryPath); n > hits+2 {
		t.Errorf("discovery requests = %d; want at most %d (one per retry interval)", n, hits+2)
	}
}

// TestOIDCLazyDiscovery: without the background start, the first token
// triggers the discovery, and concurrent first tokens share it.
func TestOIDCLazyDiscovery(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	a := newTestOIDC(t, []string{p.Issuer()}, "", func(c *oidcConfig) { c.background = false })
	if n := p.Hits(oidctest.DiscoveryPath); n != 0 {
		t.Fatalf("discovery before need: %d requests", n)
	}
	tok := p.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, testResource)
	var wg sync.WaitGroup
	errs := make(chan *protocol.Error, 8)
	for range 8 {
		wg.Go(func() {
			_, perr := a.Verify(context.Background(), tok, testResource)
			errs <- perr
		})
	}
	wg.Wait()
	close(errs)
	for perr := range errs {
		if perr != nil {
			t.Errorf("refused: %v", perr)
		}
	}
	if n := p.Hits(oidctest.DiscoveryPath); n != 1 {
		t.Errorf("8 concurrent first tokens made %d discovery requests; want 1", n)
	}
}

// TestOIDCCache: a verified token is taken on trust (the issuer is not
// asked, even when down) for a while, its audience is still checked, and
// it expires when it expires.
func TestOIDCCache(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	clk := &clock{t: time.Now()}
	a := newTestOIDC(t, []string{p.Issuer()}, "", func(c *oidcConfig) { c.now = clk.Now; c.retry = time.Hour })
	ctx := context.Background()
	c := p.Claims("bob", testResource)
	c["exp"] = clk.Now().Add(90 * time.Second).Unix()
	tok := p.Sign(t, c)
	if _, perr := a.Verify(ctx, tok, testResource); perr != nil {
		t.Fatal(perr)
	}
	p.SetDown(true)
	hits := p.Hits(oidctest.KeysPath)
	clk.Add(20 * time.Second)
	if _, perr := a.Verify(ctx, tok, testResource); perr != nil {
		t.Errorf("cached token refused: %v", perr)
	}
	_, perr := a.Verify(ctx, tok, "http://127.0.0.1:9999/a2a")
	wantReason(t, perr, oidcAudience)
	clk.Add(15 * time.Second) // past the cache: verified again, with the keys held
	if _, perr := a.Verify(ctx, tok, testResource); perr != nil {
		t.Errorf("token refused after the cache: %v", perr)
	}
	clk.Add(90 * time.Second) // past exp + leeway
	_, perr = a.Verify(ctx, tok, testResource)
	wantReason(t, perr, oidcExpired)
	if n := p.Hits(oidctest.KeysPath); n != hits {
		t.Errorf("the issuer was asked %d times for a known key", n-hits)
	}
}

// TestOIDCCapsAndClose: a discovery document over the cap makes the issuer
// unavailable; Close stops a discovery that hangs, at once, and a second
// Close says net.ErrClosed.
func TestOIDCCapsAndClose(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"issuer":"`+strings.Repeat("x", oidcMaxDocument)+`"}`)
	}))
	defer big.Close()
	a := newTestOIDC(t, []string{big.URL}, "")
	tok, err := oidctest.SignJWT(jose.ES256, throwawayKey(t), "k", map[string]any{"iss": big.URL, "sub": "x", "exp": time.Now().Add(time.Minute).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	_, perr := a.Verify(context.Background(), tok, testResource)
	wantReason(t, perr, oidcIssuerUnavailable)

	// An issuer that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { _, _ = io.Copy(io.Discard, c); _ = c.Close() })
		}
	})
	defer func() { _ = ln.Close(); conns.Wait() }()
	hung, err := newOIDCWith(oidcConfig{issuers: []string{"http://" + ln.Addr().String()}, background: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, perr = hung.Verify(ctx, oidctest.Unsigned(map[string]any{"iss": "http://" + ln.Addr().String()}), testResource)
	wantReason(t, perr, oidcAlgorithm)
	tok2, _ := oidctest.SignJWT(jose.ES256, throwawayKey(t), "k", map[string]any{"iss": "http://" + ln.Addr().String(), "sub": "x"})
	_, perr = hung.Verify(ctx, tok2, testResource) // gives up with ctx
	wantReason(t, perr, oidcIssuerUnavailable)
	start := time.Now()
	if err := hung.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v with a discovery hanging", d)
	}
	if err := hung.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close = %v, want net.ErrClosed", err)
	}
	var nilAuth *oidcAuth
	if err := nilAuth.Close(); err != nil {
		t.Errorf("nil Close = %v", err)
	}
}

// throwawayKey is a signing key of no provider.
func throwawayKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestInitOIDC: New's verifier starts with the issuer down and nothing
// fails; no issuers, no verifier.
func TestInitOIDC(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	p.SetDown(true)
	e := startEdge(t, Config{OIDCIssuers: []string{p.Issuer()}})
	a, err := e.s.initOIDC()
	if err != nil || a == nil {
		t.Fatalf("initOIDC with the issuer down: %v, %v", a, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := startEdge(t, Config{})
	if a, err := e2.s.initOIDC(); a != nil || err != nil {
		t.Errorf("initOIDC without issuers = %v, %v; want nil, nil", a, err)
	}
}

// TestProtectedResource serves the metadata as the edge does and reads it
// with the MCP go-sdk, for each face's URL and for the host.
func TestProtectedResource(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	e := startEdge(t, Config{OIDCIssuers: []string{p.Issuer()}})
	srv := httptest.NewServer(http.HandlerFunc(e.s.protectedResource))
	defer srv.Close()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	ctx := context.Background()

	for _, path := range []string{"/mcp", "/a2a", "/peers/" + testPeerID + "/mcp", "/mcpv2"} {
		resource := srv.URL + path
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, srv.URL+wellKnownResource+path, resource, hc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if prm.Resource != resource || !slices.Equal(prm.AuthorizationServers, []string{p.Issuer()}) ||
			!slices.Equal(prm.BearerMethodsSupported, []string{"header"}) || prm.ResourceName != "mcpv2 node "+testPeerID {
			t.Errorf("%s: metadata = %+v", path, prm)
		}
	}
	// The host's own, where the go-sdk looks last: the resource has no path.
	if _, err := oauthex.GetProtectedResourceMetadata(ctx, srv.URL+wellKnownResource, srv.URL, hc); err != nil {
		t.Errorf("root metadata: %v", err)
	}

	resp, err := hc.Get(srv.URL + wellKnownResource + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["scopes_supported"]; ok || len(raw) != 4 {
		t.Errorf("metadata has fields %v; want resource, authorization_servers, bearer_methods_supported, resource_name", raw)
	}
	if h := resp.Header; h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Cache-Control") != "public, max-age=300" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers = %v", h)
	}

	for _, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodOptions, wellKnownResource + "/mcp", http.StatusNoContent},
		{http.MethodHead, wellKnownResource + "/mcp", http.StatusOK},
		{http.MethodPost, wellKnownResource + "/mcp", http.StatusMethodNotAllowed},
		{http.MethodGet, wellKnownResource + "x/mcp", http.StatusNotFound},
		{http.MethodGet, wellKnownResource + "/" + strings.Repeat("a", maxResourcePath), http.StatusNotFound},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s = %d, want %d", c.method, c.path, resp.StatusCode, c.status)
		}
	}

	// Over TLS the resource is https.
	tsrv := httptest.NewTLSServer(http.HandlerFunc(e.s.protectedResource))
	defer tsrv.Close()
	tc := tsrv.Client()
	resp, err = tc.Get(tsrv.URL + wellKnownResource + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	tc.CloseIdleConnections()
	var prm oauthex.ProtectedResourceMetadata
	if err := json.Unmarshal(body, &prm); err != nil || prm.Resource != tsrv.URL+"/mcp" || !strings.HasPrefix(prm.Resource, "https://") {
		t.Errorf("TLS metadata = %s (%v)", body, err)
	}

	// Without issuers, nothing is served.
	e2 := startEdge(t, Config{})
	srv2 := httptest.NewServer(http.HandlerFunc(e2.s.protectedResource))
	defer srv2.Close()
	resp, err = hc.Get(srv2.URL + wellKnownResource + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("metadata without issuers: %d, want 404", resp.StatusCode)
	}
}

// TestChallenge parses the WWW-Authenticate header with the MCP go-sdk, and
// follows its resource_metadata to metadata whose resource is the URL the
// request was for.
func TestChallenge(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	e := startEdge(t, Config{OIDCIssuers: []string{p.Issuer()}})
	srv := httptest.NewServer(http.HandlerFunc(e.s.protectedResource))
	defer srv.Close()
	tr := &http.Transport{DisableKeepAlives: true}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	for _, c := range []struct {
		path, code, desc string
		wantDesc         string
	}{
		{"/mcp", "", "", ""},
		{"/peers/" + testPeerID + "/mcp", "invalid_token", `invalid token: expired at "2026", see \docs, é`, `invalid token: expired at '2026', see /docs, ?`},
		{"/a2a", "invalid_token", strings.Repeat("x", 500), strings.Repeat("x", 300)},
	} {
		r := httptest.NewRequest(http.MethodPost, srv.URL+c.path, nil)
		rec := httptest.NewRecorder()
		e.s.challenge(rec, r, c.code, c.desc)
		hdr := rec.Header().Values("WWW-Authenticate")
		chs, err := oauthex.ParseWWWAuthenticate(hdr)
		if err != nil || len(chs) != 1 || chs[0].Scheme != "bearer" {
			t.Fatalf("%s: %q parsed as %+v, %v", c.path, hdr, chs, err)
		}
		params := chs[0].Params
		wantMeta := srv.URL + wellKnownResource + c.path
		if params["resource_metadata"] != wantMeta || params["error"] != c.code || params["error_description"] != c.wantDesc {
			t.Errorf("%s: params = %q; want resource_metadata %q, error %q, error_description %q", c.path, params, wantMeta, c.code, c.wantDesc)
		}
		if c.code == "" && (len(params) != 2 || params["realm"] != "mcpv2") {
			t.Errorf("%s: params without an error = %q", c.path, params)
		}
		prm, err := oauthex.GetProtectedResourceMetadata(context.Background(), params["resource_metadata"], e.s.resourceURL(r), hc)
		if err != nil {
			t.Errorf("%s: the challenge's metadata: %v", c.path, err)
		} else if prm.Resource != srv.URL+c.path {
			t.Errorf("%s: resource = %q", c.path, prm.Resource)
		}
	}
	tr.CloseIdleConnections()
}

// FuzzParseJWT: parseJWT never panics, and what it accepts has three
// parts, an alg, and the shape looksLikeJWT recognises.
func FuzzParseJWT(f *testing.F) {
	enc := base64.RawURLEncoding.EncodeToString
	f.Add(enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc([]byte(`{"iss":"https://i","sub":"s","aud":["a"],"exp":1e9,"scp":"a b"}`)) + ".c2ln")
	f.Add(enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(`{"aud":"a","exp":1.5}`)) + ".")
	f.Add("a.b.c")
	f.Add(enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"exp":-1}`)) + ".x")
	f.Fuzz(func(t *testing.T, raw string) {
		tok, perr := parseJWT(raw)
		if perr != nil {
			if perr.Code != protocol.CodeInvalidSession {
				t.Fatalf("code %d", perr.Code)
			}
			return
		}
		if tok.header.Alg == "" || strings.Count(raw, ".") != 2 {
			t.Fatalf("accepted %q", raw)
		}
		if head, _, _ := strings.Cut(raw, "."); len(head) <= 4096 && !looksLikeJWT(raw) {
			t.Fatalf("parseJWT accepts %q, which looksLikeJWT does not recognise", raw)
		}
	})
}
