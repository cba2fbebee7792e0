// Package oidctest runs a real OpenID provider (zitadel/oidc's op) on
// loopback HTTP for tests: discovery, keys, client-credentials and
// authorization-code (PKCE) grants with JWT access tokens, and a login
// that approves a user without a password. Its issuer is an
// http://127.0.0.1:port URL, which the edge accepts as a loopback issuer,
// so a test may point an in-process edge or a real mcpv2 node process at
// it. It also signs tokens of its own making (expired, for another
// audience, with a foreign key or none), for the refusals.
//
// It is imported by _test.go files only, and imports no package of the
// project.
package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2"
)

// The provider's clients and user.
const (
	// ServiceClientID is the confidential client of the client-credentials
	// grant; its tokens' subject is its ID.
	ServiceClientID = "mcpv2-service"
	// ServiceClientSecret is ServiceClientID's secret (HTTP Basic or form).
	ServiceClientSecret = "mcpv2-service-secret"
	// PublicClientID is the public client of the authorization-code grant
	// with PKCE (S256); it may redirect to any loopback URL.
	PublicClientID = "mcpv2-public"
	// User is the user the login approves by default; a token of its
	// login has it as subject.
	User = "alice"
)

// Paths of the provider (zitadel's defaults, and the login's).
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	KeysPath      = "/keys"
	TokenPath     = "/oauth/token"
	AuthorizePath = "/authorize"
	LoginPath     = "/login"
)

// Options configures a Provider; the zero value is the defaults.
type Options struct {
	// Addr is the address to listen on (default 127.0.0.1:0, a free port).
	Addr string
	// TokenLifetime is the lifetime of the access tokens it issues
	// (default 5 minutes).
	TokenLifetime time.Duration
	// Scopes are the scopes beyond OpenID's (openid, profile, …) that the
	// clients may ask and that discovery lists (default "mcp").
	Scopes []string
	// Users are the users the login approves (default User).
	Users []string
	// AutoLogin approves the login page's GET at once, as User (or the
	// first of Users), so that a client following redirects from the
	// authorization URL lands on its redirect URI without a form.
	AutoLogin bool
	// DefaultScope is granted on an authorization request that names no
	// scope (op refuses one; the MCP go-sdk sends none when the resource
	// advertises none); default "openid".
	DefaultScope string
	// Audience is the audience of a client-credentials token whose request
	// names no resource (RFC 8707), as a provider configured with an API's
	// audience gives one (Keycloak's audience mapper, Auth0's default
	// audience); default the client's ID. The MCP go-sdk's
	// client-credentials handler sends no resource parameter.
	Audience string
}

// Provider is a running OpenID provider. Its methods are safe for
// concurrent use; the t of a method is only failed, from the calling
// goroutine.
type Provider struct {
	srv     *httptest.Server
	op      *op.Provider
	store   *storage
	issuer  string
	opts    Options
	client  *http.Client // for the helpers; its transport is closed at cleanup
	down    atomic.Bool
	hitsMu  sync.Mutex
	hits    map[string]int // requests by path, counted even when down
	autoFor string
}

// Start runs a provider until t's cleanup. It fails t if it cannot.
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.TokenLifetime <= 0 {
		opts.TokenLifetime = 5 * time.Minute
	}
	if opts.Scopes == nil {
		opts.Scopes = []string{"mcp"}
	}
	if len(opts.Users) == 0 {
		opts.Users = []string{User}
	}
	if opts.DefaultScope == "" {
		opts.DefaultScope = oidc.ScopeOpenID
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		t.Fatalf("oidctest: listen on %s: %v", opts.Addr, err)
	}
	p := &Provider{opts: opts, hits: map[string]int{}, issuer: "http://" + ln.Addr().String(), autoFor: opts.Users[0]}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("oidctest: key: %v", err)
	}
	p.store = &storage{
		clients: map[string]*client{
			ServiceClientID: {id: ServiceClientID, secret: ServiceClientSecret, scopes: opts.Scopes},
			PublicClientID:  {id: PublicClientID, public: true, scopes: opts.Scopes},
		},
		users:    map[string]bool{},
		lifetime: opts.TokenLifetime,
		audience: opts.Audience,
		key:      signingKey{id: "oidctest-" + newID(), key: key},
		reqs:     map[string]*authRequest{},
		codes:    map[string]string{},
	}
	for _, u := range opts.Users {
		p.store.users[u] = true
	}
	var cryptoKey [32]byte
	_, _ = rand.Read(cryptoKey[:])
	cfg := &op.Config{
		CryptoKey:       cryptoKey,
		CodeMethodS256:  true,
		AuthMethodPost:  true,
		SupportedScopes: append([]string{oidc.ScopeOpenID, oidc.ScopeProfile, oidc.ScopeEmail}, opts.Scopes...),
	}
	p.op, err = op.NewProvider(cfg, p.store, op.StaticIssuer(p.issuer), op.WithAllowInsecure())
	if err != nil {
		_ = ln.Close()
		t.Fatalf("oidctest: provider: %v", err)
	}
	p.srv = httptest.NewUnstartedServer(p)
	_ = p.srv.Listener.Close()
	p.srv.Listener = ln
	p.srv.Start()
	tr := &http.Transport{}
	p.client = &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		p.srv.Close()
	})
	return p
}

// Issuer is the provider's issuer URL, http://127.0.0.1:port (no slash).
func (p *Provider) Issuer() string { return p.issuer }

// Close stops the provider before t's cleanup does (idempotent): its
// address then refuses connections.
func (p *Provider) Close() { p.srv.Close() }

// SetDown makes the provider abort every request (the connection is
// closed without an answer) while down is true, as a provider that is
// down; requests are still counted.
func (p *Provider) SetDown(down bool) { p.down.Store(down) }

// Hits counts the requests for path (DiscoveryPath, KeysPath, …) so far,
// those aborted while down included.
func (p *Provider) Hits(path string) int {
	p.hitsMu.Lock()
	defer p.hitsMu.Unlock()
	return p.hits[path]
}

// ServeHTTP serves the provider: it counts the request, aborts it while
// down, serves the login, puts the resource parameters (RFC 8707) where
// the storage finds them, and grants DefaultScope to an authorization
// request that names none.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.hitsMu.Lock()
	p.hits[r.URL.Path]++
	p.hitsMu.Unlock()
	if p.down.Load() {
		panic(http.ErrAbortHandler)
	}
	if r.URL.Path == LoginPath {
		p.login(w, r)
		return
	}
	if r.URL.Path == AuthorizePath || r.URL.Path == TokenPath {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err == nil {
			if res := r.Form["resource"]; len(res) > 0 {
				r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, slices.Clone(res)))
			}
			if r.URL.Path == AuthorizePath && strings.TrimSpace(r.Form.Get("scope")) == "" {
				r.Form.Set("scope", p.opts.DefaultScope)
			}
		}
	}
	p.op.ServeHTTP(w, r)
}

// login serves the login page: GET shows a form (or, with AutoLogin,
// approves at once); POST with id and username approves the auth request
// and redirects to op's callback, which redirects to the client.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	var id, user string
	switch r.Method {
	case http.MethodGet:
		id = r.URL.Query().Get("authRequestID")
		if !p.opts.AutoLogin {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><title>oidctest login</title>
<form method="post" action="%s"><input type="hidden" name="id" value="%s">
<input name="username" value="%s"><button type="submit">Sign in</button></form>`,
				LoginPath, html.EscapeString(id), html.EscapeString(p.autoFor))
			return
		}
		user = p.autoFor
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		id, user = r.PostForm.Get("id"), r.PostForm.Get("username")
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := p.store.approve(id, user); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	ctx := op.ContextWithIssuer(r.Context(), p.issuer)
	http.Redirect(w, r, op.AuthCallbackURL(p.op)(ctx, id), http.StatusFound)
}

// FetchClientCredentials asks the token endpoint for an access token of
// the client-credentials grant, for resource (RFC 8707; "" names none, and
// the token's audience is then the client) and scopes.
func (p *Provider) FetchClientCredentials(ctx context.Context, clientID, secret, resource string, scopes ...string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if resource != "" {
		form.Set("resource", resource)
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.issuer+TokenPath, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	resp, err := p.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("oidctest: token endpoint: %s: %s", resp.Status, body)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
		return "", fmt.Errorf("oidctest: token endpoint answered no access token: %s", body)
	}
	return tok.AccessToken, nil
}

// ClientCredentialsToken is FetchClientCredentials that fails t.
func (p *Provider) ClientCredentialsToken(t testing.TB, clientID, secret, resource string, scopes ...string) string {
	t.Helper()
	tok, err := p.FetchClientCredentials(context.Background(), clientID, secret, resource, scopes...)
	if err != nil {
		t.Fatalf("oidctest: client credentials: %v", err)
	}
	return tok
}

// Authorize drives a user agent through authURL (the provider's
// authorization endpoint with the client's parameters): it follows the
// provider's redirects, submits the login form as User, and returns the
// URL the provider finally redirects to, the client's redirect URI with
// code and state (or error). It does not fetch that URL.
func (p *Provider) Authorize(ctx context.Context, authURL string) (*url.URL, error) {
	next, method, form := authURL, http.MethodGet, url.Values(nil)
	for range 10 {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, next, body)
		if err != nil {
			return nil, err
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := p.client.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		u, err := req.URL.Parse(resp.Header.Get("Location"))
		switch {
		case resp.StatusCode == http.StatusOK && req.URL.Path == LoginPath && method == http.MethodGet:
			// The login form: submit it.
			next, method = p.issuer+LoginPath, http.MethodPost
			form = url.Values{"id": {req.URL.Query().Get("authRequestID")}, "username": {p.autoFor}}
			continue
		case resp.StatusCode < 300 || resp.StatusCode > 399 || err != nil || resp.Header.Get("Location") == "":
			return nil, fmt.Errorf("oidctest: authorize: %s %s answered %s", method, req.URL.Path, resp.Status)
		case u.Scheme+"://"+u.Host != p.issuer:
			return u, nil // the client's redirect URI
		}
		next, method, form = u.String(), http.MethodGet, nil
	}
	return nil, errors.New("oidctest: authorize: too many redirects")
}

// AuthCodeToken runs the authorization-code grant with PKCE as
// PublicClientID for resource and scopes, logging in as User, and returns
// the access token. It fails t if any step fails.
func (p *Provider) AuthCodeToken(t testing.TB, resource string, scopes ...string) string {
	t.Helper()
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, p.client)
	cfg := oauth2.Config{
		ClientID:    PublicClientID,
		Endpoint:    oauth2.Endpoint{AuthURL: p.issuer + AuthorizePath, TokenURL: p.issuer + TokenPath, AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: "http://127.0.0.1:1/callback",
		Scopes:      scopes,
	}
	verifier := oauth2.GenerateVerifier()
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	if resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", resource))
	}
	back, err := p.Authorize(ctx, cfg.AuthCodeURL("state-1", opts...))
	if err != nil {
		t.Fatalf("oidctest: %v", err)
	}
	if e := back.Query().Get("error"); e != "" || back.Query().Get("state") != "state-1" {
		t.Fatalf("oidctest: authorize redirected to %s", back)
	}
	xopts := []oauth2.AuthCodeOption{oauth2.VerifierOption(verifier)}
	if resource != "" {
		xopts = append(xopts, oauth2.SetAuthURLParam("resource", resource))
	}
	tok, err := cfg.Exchange(ctx, back.Query().Get("code"), xopts...)
	if err != nil {
		t.Fatalf("oidctest: code exchange: %v", err)
	}
	return tok.AccessToken
}

// KeyID is the kid of the provider's signing key.
func (p *Provider) KeyID() string { return p.store.key.id }

// PrivateKey is the provider's RSA signing key (RS256).
func (p *Provider) PrivateKey() *rsa.PrivateKey { return p.store.key.key }

// Claims returns the claims of a valid access token of this provider for
// subject and audience, issued now for TokenLifetime, with scopes in
// "scope": a map a test changes to make a bad token, then signs.
func (p *Provider) Claims(subject, audience string, scopes ...string) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": p.issuer, "sub": subject, "aud": []string{audience},
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(p.opts.TokenLifetime).Unix(),
		"jti": newID(), "client_id": ServiceClientID,
	}
	if len(scopes) > 0 {
		c["scope"] = strings.Join(scopes, " ")
	}
	return c
}

// Sign signs claims with the provider's key, kid and RS256, as its tokens
// are signed.
func (p *Provider) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return p.SignAs(t, p.KeyID(), claims)
}

// SignAs signs claims with the provider's key and RS256 but names kid in
// the header: another provider's kid, or one nobody publishes.
func (p *Provider) SignAs(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	tok, err := SignJWT(jose.RS256, p.PrivateKey(), kid, claims)
	if err != nil {
		t.Fatalf("oidctest: sign: %v", err)
	}
	return tok
}

// SignJWT signs claims as a compact JWS with key (any key go-jose signs
// with: an RSA or ECDSA private key, an ed25519 key, or []byte for HMAC)
// and alg, kid in the header.
func SignJWT(alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		return "", err
	}
	jws, err := s.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// ClaimsOf decodes a JWT's claims without checking it (for tests that
// look at what a token says).
func ClaimsOf(t testing.TB, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// Unsigned returns claims as a JWT with alg "none" and an empty
// signature, which no verifier may accept.
func Unsigned(claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + "."
}
