package oauthtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpv2/mcpv2/internal/oidctest"
	"github.com/mcpv2/mcpv2/internal/testenv"
)

// wellKnown is the path of RFC 9728 protected-resource metadata.
const wellKnown = "/.well-known/oauth-protected-resource"

// connect connects a go-sdk MCP client to url over streamable HTTP with
// hc and the OAuth handler h: what a user configures is the URL and h's
// client. The session is closed when the test ends.
func connect(t *testing.T, url string, hc *http.Client, h auth.OAuthHandler) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "oauthtest", Version: "1"}, nil)
	cs, err := c.Connect(ctxT(t), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, OAuthHandler: h, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call runs the tool name with args and returns its result and the JSON of
// its structured and text content, for matching.
func call(t *testing.T, cs *sdk.ClientSession, name string, args any) (*sdk.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	s := string(b)
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			s += " " + tc.Text
		}
	}
	return res, s
}

// audited counts the node's audit lines of caller, authenticated as auth,
// for skill with outcome ("ok") or code (when code is not 0).
func audited(t *testing.T, n *proc, caller, authKind, skill, outcome string, code int) int {
	t.Helper()
	c := 0
	for _, l := range testenv.AuditLines(t, n.dataDir()) {
		if l["caller"] != caller || l["auth"] != authKind || l["skill"] != skill {
			continue
		}
		if (code == 0 && l["outcome"] == outcome) || (code != 0 && l["code"] == float64(code)) {
			c++
		}
	}
	return c
}

// waitAudited waits (polling, at most 10 s) until audited is at least
// want: the node writes its audit line as it answers, not before.
func waitAudited(t *testing.T, n *proc, caller, authKind, skill, outcome string, code, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for audited(t, n, caller, authKind, skill, outcome, code) < want {
		if time.Now().After(deadline) {
			t.Fatalf("the node's audit has no line caller %q auth %q skill %q outcome %q code %d:\n%v",
				caller, authKind, skill, outcome, code, testenv.AuditLines(t, n.dataDir()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answer is what the node answered a raw POST /mcp.
type answer struct {
	status    int
	challenge *oauthex.Challenge // the Bearer challenge of WWW-Authenticate, if any
	code      int                // the JSON-RPC error's, if any
	message   string
	reason    string // the error's data.reason
	body      string
}

// initialize is an MCP initialize request, as a client's first POST.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"oauthtest","version":"1"}}}`

// postMCP POSTs an initialize request to url, with Authorization: Bearer
// token unless token is empty, and decodes the answer.
func postMCP(t *testing.T, hc *http.Client, url, token string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, url, strings.NewReader(initialize))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", url, err)
	}
	a := answer{status: resp.StatusCode, body: string(b)}
	if h := resp.Header.Values("WWW-Authenticate"); len(h) > 0 {
		cs, err := oauthex.ParseWWWAuthenticate(h)
		if err != nil {
			t.Fatalf("WWW-Authenticate %q: %v", h, err)
		}
		for i := range cs {
			if cs[i].Scheme == "bearer" {
				a.challenge = &cs[i]
			}
		}
	}
	var e struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != nil {
		a.code, a.message, a.reason = e.Error.Code, e.Error.Message, e.Error.Data.Reason
	}
	return a
}

// TestClientCredentials: a go-sdk MCP client given only the node's URL and
// a confidential client's ID and secret (extauth's client-credentials
// handler) is answered 401, finds the authorization server from the
// node's challenge and protected-resource metadata, gets a token at the
// provider's token endpoint, and runs the skill the policy grants its
// subject, and not another.
//
// The go-sdk's client-credentials handler sends no RFC 8707 resource
// parameter, so its token's audience is what the provider is configured to
// give (oidctest's Audience), and the node names it (--oidc-audience).
func TestClientCredentials(t *testing.T) {
	const audience = "urn:mcpv2:oauthtest"
	p := oidctest.Start(t, oidctest.Options{Audience: audience})
	n := startNode(t, map[string][]string{"oidc:" + oidctest.ServiceClientID: {"upload_file"}},
		"--oidc-issuer", p.Issuer(), "--oidc-audience", audience)

	hc, rec := recordingClient(t)
	h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{
			ClientID:         oidctest.ServiceClientID,
			ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: oidctest.ServiceClientSecret},
		},
		HTTPClient: hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, n.mcpURL(), hc, h)

	if res, sc := call(t, cs, "upload_file", map[string]any{"filename": "cc.txt", "content": "client credentials\n"}); res.IsError {
		t.Fatalf("upload_file (granted to oidc:%s): %s", oidctest.ServiceClientID, sc)
	}
	if files, _ := testenv.FilesIn(t, n.dataDir()); !slices.Contains(files, "cc.txt") {
		t.Errorf("the node's files are %v, without cc.txt", files)
	}
	if res, sc := call(t, cs, "ask", map[string]any{"query": "hello?"}); !res.IsError || !strings.Contains(sc, "-32009") {
		t.Errorf("ask (not granted): isError=%v %s; want isError with -32009", res.IsError, sc)
	}

	got := checkLogin(t, rec, n, p)
	if c := strings.Count(strings.Join(got, "\n"), oidctest.TokenPath); c != 1 {
		t.Errorf("the client asked for %d tokens, want 1", c)
	}

	waitAudited(t, n, "oidc:"+oidctest.ServiceClientID, "oidc", "upload_file", "ok", 0, 1)
	waitAudited(t, n, "oidc:"+oidctest.ServiceClientID, "oidc", "ask", "", -32009, 1)
}

// TestAuthorizationCode: a go-sdk MCP client with the authorization-code
// handler (PKCE) and the provider's public client, the login driven by the
// test as a user's browser would be, runs the skill granted to the user
// (oidc:alice) and the one granted to a scope of its token; the node's
// audit names the user. The node takes the resource the client asked for
// (its /mcp URL) as the audience (no --oidc-audience).
func TestAuthorizationCode(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	n := startNode(t, map[string][]string{
		"oidc:" + oidctest.User: {"upload_file"},
		"scope:openid":          {"list_files"},
	}, "--oidc-issuer", p.Issuer())

	hc, rec := recordingClient(t)
	var mu sync.Mutex
	var authURLs []string
	fetch := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		mu.Lock()
		authURLs = append(authURLs, args.URL)
		mu.Unlock()
		back, err := p.Authorize(ctx, args.URL)
		if err != nil {
			return nil, err
		}
		q := back.Query()
		if e := q.Get("error"); e != "" {
			return nil, fmt.Errorf("the provider redirected with error %s: %s", e, q.Get("error_description"))
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient:      &oauthex.ClientCredentials{ClientID: oidctest.PublicClientID},
		RedirectURL:              "http://127.0.0.1:1/callback",
		AuthorizationCodeFetcher: fetch,
		Client:                   hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, n.mcpURL(), hc, h)

	if res, sc := call(t, cs, "upload_file", map[string]any{"filename": "alice.md", "content": "# from alice\n"}); res.IsError {
		t.Fatalf("upload_file (granted to oidc:alice): %s", sc)
	}
	if res, sc := call(t, cs, "list_files", map[string]any{}); res.IsError || !strings.Contains(sc, "alice.md") {
		t.Errorf("list_files (granted to scope:openid): isError=%v %s", res.IsError, sc)
	}
	if res, sc := call(t, cs, "ask", map[string]any{"query": "hello?"}); !res.IsError || !strings.Contains(sc, "-32009") {
		t.Errorf("ask (not granted): isError=%v %s; want isError with -32009", res.IsError, sc)
	}

	mu.Lock()
	urls := slices.Clone(authURLs)
	mu.Unlock()
	if len(urls) != 1 {
		t.Fatalf("the login ran %d times, want 1", len(urls))
	}
	// The authorization request names the node's /mcp as the resource
	// (RFC 8707) and carries a PKCE S256 challenge.
	au, err := url.Parse(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	if q := au.Query(); au.Scheme+"://"+au.Host+au.Path != p.Issuer()+oidctest.AuthorizePath ||
		q.Get("resource") != n.mcpURL() || q.Get("client_id") != oidctest.PublicClientID ||
		q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		t.Errorf("authorization URL %s; want the provider's %s with resource=%s, client_id=%s and a PKCE S256 challenge",
			urls[0], oidctest.AuthorizePath, n.mcpURL(), oidctest.PublicClientID)
	}
	checkLogin(t, rec, n, p)

	waitAudited(t, n, "oidc:"+oidctest.User, "oidc", "upload_file", "ok", 0, 1)
	waitAudited(t, n, "oidc:"+oidctest.User, "oidc", "list_files", "ok", 0, 1)
	waitAudited(t, n, "oidc:"+oidctest.User, "oidc", "ask", "", -32009, 1)
}

// TestBadTokens: a real node refuses each bad token with 401, a Bearer
// challenge with error="invalid_token" naming its metadata, and a
// JSON-RPC error -32001 "invalid token: …" whose data.reason says which
// check failed. Two good tokens show the same node accepts a token that
// passes (so that each refusal is the check's, not the setup's).
func TestBadTokens(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	other := oidctest.Start(t, oidctest.Options{}) // another issuer, not the node's
	n := startNode(t, map[string][]string{"oidc:" + oidctest.ServiceClientID: {"upload_file"}}, "--oidc-issuer", p.Issuer())
	hc := httpClient(t)
	res := n.mcpURL()
	claims := func(change func(c map[string]any)) map[string]any {
		c := p.Claims(oidctest.ServiceClientID, res, "mcp")
		if change != nil {
			change(c)
		}
		return c
	}
	now := time.Now()
	valid := p.Sign(t, claims(nil))
	// A valid token whose payload says another subject, its signature kept.
	parts := strings.Split(valid, ".")
	forged, _ := json.Marshal(claims(func(c map[string]any) { c["sub"] = oidctest.User }))
	forged64 := parts[0] + "." + base64.RawURLEncoding.EncodeToString(forged) + "." + parts[2]
	hs256, err := oidctest.SignJWT(jose.HS256, bytes.Repeat([]byte("k"), 32), p.KeyID(), claims(nil))
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, token, reason string
	}{
		{"good: the provider's token for this resource", p.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, res, "mcp"), ""},
		{"good: signed with the provider's key", valid, ""},
		{"wrong audience: a token for another resource", p.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, "http://127.0.0.1:1/mcp"), "audience"},
		{"wrong audience: a token that names no resource", p.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, ""), "audience"},
		{"wrong issuer: iss not configured", p.Sign(t, claims(func(c map[string]any) { c["iss"] = "http://127.0.0.1:1" })), "issuer"},
		{"wrong issuer: another provider's real token", other.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, res), "issuer"},
		{"expired", p.Sign(t, claims(func(c map[string]any) {
			c["iat"], c["nbf"], c["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
		})), "expired"},
		{"not yet valid", p.Sign(t, claims(func(c map[string]any) {
			c["nbf"], c["exp"] = now.Add(time.Hour).Unix(), now.Add(2*time.Hour).Unix()
		})), "not_yet_valid"},
		{"alg none", oidctest.Unsigned(claims(nil)), "algorithm"},
		{"alg HS256", hs256, "algorithm"},
		{"unknown kid", p.SignAs(t, "no-such-key", claims(nil)), "unknown_key"},
		{"another issuer's signature, with its kid", other.Sign(t, claims(nil)), "unknown_key"},
		{"another issuer's signature, with the provider's kid", other.SignAs(t, p.KeyID(), claims(nil)), "signature"},
		{"payload altered after signing", forged64, "signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := postMCP(t, hc, res, tc.token)
			if tc.reason == "" {
				if a.status != http.StatusOK {
					t.Fatalf("status %d, want 200: %s", a.status, a.body)
				}
				return
			}
			if a.status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", a.status)
			}
			if a.code != -32001 || !strings.HasPrefix(a.message, "invalid token: ") || a.reason != tc.reason {
				t.Errorf("error %d %q reason %q; want -32001 \"invalid token: …\" reason %q\n%s", a.code, a.message, a.reason, tc.reason, a.body)
			}
			if a.challenge == nil || a.challenge.Params["error"] != "invalid_token" ||
				a.challenge.Params["resource_metadata"] != n.base()+wellKnown+"/mcp" {
				t.Errorf("challenge %+v; want Bearer with error=invalid_token and resource_metadata=%s", a.challenge, n.base()+wellKnown+"/mcp")
			}
			t.Logf("401 %s", a.message)
		})
	}
}

// TestMetadata: the node serves RFC 9728 metadata for /mcp naming the
// issuer, as the go-sdk reads and checks it; a tokenless request is sent
// to log in (401 naming that metadata, with no error code) unless the
// policy grants anonymous callers skills beyond the open ones, when it is
// served; --require-auth sends it to log in even then.
func TestMetadata(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	hc := httpClient(t)
	for _, tc := range []struct {
		name   string
		grants map[string][]string
		args   []string
		status int
	}{
		{"anonymous granted nothing", map[string][]string{"oidc:" + oidctest.User: {"*"}}, nil, http.StatusUnauthorized},
		{"anonymous granted every skill", map[string][]string{"http": {"*"}}, nil, http.StatusOK},
		{"anonymous granted every skill, --require-auth", map[string][]string{"http": {"*"}}, []string{"--require-auth"}, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, tc.grants, append([]string{"--oidc-issuer", p.Issuer()}, tc.args...)...)
			meta := n.base() + wellKnown + "/mcp"
			prm, err := oauthex.GetProtectedResourceMetadata(ctxT(t), meta, n.mcpURL(), hc)
			if err != nil {
				t.Fatalf("GET %s: %v", meta, err)
			}
			if prm.Resource != n.mcpURL() || !slices.Equal(prm.AuthorizationServers, []string{p.Issuer()}) ||
				!slices.Equal(prm.BearerMethodsSupported, []string{"header"}) {
				t.Errorf("metadata %+v; want resource %s, authorization_servers [%s], bearer_methods_supported [header]", prm, n.mcpURL(), p.Issuer())
			}

			a := postMCP(t, hc, n.mcpURL(), "")
			if a.status != tc.status {
				t.Fatalf("a tokenless initialize: status %d, want %d: %s", a.status, tc.status, a.body)
			}
			if tc.status == http.StatusOK {
				if !strings.Contains(a.body, `"protocolVersion"`) {
					t.Errorf("a tokenless initialize served: %s", a.body)
				}
				return
			}
			if a.challenge == nil || a.challenge.Params["resource_metadata"] != meta || a.challenge.Params["realm"] != "mcpv2" {
				t.Errorf("challenge %+v; want Bearer realm=mcpv2 resource_metadata=%s", a.challenge, meta)
			} else if e, ok := a.challenge.Params["error"]; ok {
				t.Errorf("challenge error=%q; RFC 6750 §3.1: none when no credential was sent", e)
			}
			if a.code != -32001 {
				t.Errorf("error %d %q, want -32001", a.code, a.message)
			}
			t.Logf("401 %q", a.message)
		})
	}
}

// TestIssuerDownAtStart: a node whose issuer is down when it starts starts
// all the same; a token is then refused with reason issuer_unavailable;
// once the provider is up, a fresh token is accepted after the node's next
// discovery (at most one per 10 s), which the test waits for.
func TestIssuerDownAtStart(t *testing.T) {
	p := oidctest.Start(t, oidctest.Options{})
	p.SetDown(true)
	n := startNode(t, map[string][]string{"oidc:" + oidctest.ServiceClientID: {"upload_file"}}, "--oidc-issuer", p.Issuer())
	hc := httpClient(t)

	a := postMCP(t, hc, n.mcpURL(), p.Sign(t, p.Claims(oidctest.ServiceClientID, n.mcpURL())))
	if a.status != http.StatusUnauthorized || a.code != -32001 || a.reason != "issuer_unavailable" {
		t.Fatalf("a token while the issuer is down: status %d, error %d %q reason %q; want 401 -32001 issuer_unavailable\n%s",
			a.status, a.code, a.message, a.reason, a.body)
	}
	if a.challenge == nil || a.challenge.Params["error"] != "invalid_token" {
		t.Errorf("challenge %+v", a.challenge)
	}
	hits := p.Hits(oidctest.DiscoveryPath)
	if hits == 0 {
		t.Error("the node never asked the provider for its discovery document")
	}
	t.Logf("refused: %s (discovery requests so far: %d)", a.message, hits)

	p.SetDown(false)
	up := time.Now()
	tok := p.ClientCredentialsToken(t, oidctest.ServiceClientID, oidctest.ServiceClientSecret, n.mcpURL())
	polls := 0
	for {
		polls++
		a = postMCP(t, hc, n.mcpURL(), tok)
		if a.status == http.StatusOK {
			break
		}
		if a.reason != "issuer_unavailable" {
			t.Fatalf("a fresh token after the provider came up: status %d, reason %q, want 200 (or issuer_unavailable until the retry)\n%s", a.status, a.reason, a.body)
		}
		if time.Since(up) > 20*time.Second {
			t.Fatalf("a fresh token still refused %v after the provider came up (the node retries a failed issuer every 10 s)", time.Since(up))
		}
		time.Sleep(200 * time.Millisecond)
	}
	more := p.Hits(oidctest.DiscoveryPath) - hits
	t.Logf("accepted %v after the provider came up, at poll %d; the node fetched discovery %d more times", time.Since(up).Round(10*time.Millisecond), polls, more)
	// The node retries a failed issuer at most once per 10 s, not per
	// request (each request may be retried once by net/http on a reused
	// connection, hence 2 per retry).
	if limit := 2 * (int(time.Since(up)/(10*time.Second)) + 1); more > limit {
		t.Errorf("%d discovery requests in %v of %d refused tokens; want at most %d", more, time.Since(up), polls, limit)
	}
	claims := oidctest.ClaimsOf(t, tok)
	if claims["iss"] != p.Issuer() || claims["sub"] != oidctest.ServiceClientID {
		t.Errorf("the fresh token's claims %v", claims)
	}
}

// checkLogin checks that the client's requests went, in order, as the MCP
// authorization spec has them: the 401, the metadata the challenge names,
// the provider's discovery, the token, then the same POST with the token.
// It returns the requests.
func checkLogin(t *testing.T, rec *recorder, n *proc, p *oidctest.Provider) []string {
	t.Helper()
	got := rec.lines()
	want := []string{
		"POST " + n.mcpURL() + " 401",
		"GET " + n.base() + wellKnown + "/mcp 200",
		"GET " + p.Issuer() + oidctest.DiscoveryPath + " 200",
		"POST " + p.Issuer() + oidctest.TokenPath + " 200",
		"POST+bearer " + n.mcpURL() + " 200",
	}
	if ok, missing := inOrder(got, want); !ok {
		t.Errorf("the client's requests lack %q (in order %q):\n%s", missing, want, strings.Join(got, "\n"))
	}
	t.Logf("the client's requests:\n%s", strings.Join(got, "\n"))
	return got
}
