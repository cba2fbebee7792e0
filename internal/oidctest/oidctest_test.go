package oidctest

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/oauth2"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestProvider(t *testing.T) {
	p := Start(t, Options{Scopes: []string{"mcp", "tools"}})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	resp, err := hc.Get(p.Issuer() + DiscoveryPath)
	if err != nil {
		t.Fatal(err)
	}
	var disc struct {
		Issuer     string   `json:"issuer"`
		JWKS       string   `json:"jwks_uri"`
		Token      string   `json:"token_endpoint"`
		Algs       []string `json:"id_token_signing_alg_values_supported"`
		PKCE       []string `json:"code_challenge_methods_supported"`
		Scopes     []string `json:"scopes_supported"`
		GrantTypes []string `json:"grant_types_supported"`
	}
	err = json.NewDecoder(resp.Body).Decode(&disc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if disc.Issuer != p.Issuer() || disc.JWKS != p.Issuer()+KeysPath || disc.Token != p.Issuer()+TokenPath ||
		!slices.Equal(disc.Algs, []string{"RS256"}) || !slices.Contains(disc.PKCE, "S256") ||
		!slices.Contains(disc.Scopes, "tools") || !slices.Contains(disc.GrantTypes, "client_credentials") {
		t.Errorf("discovery = %+v", disc)
	}

	const res = "http://127.0.0.1:1/mcp"
	c := ClaimsOf(t, p.ClientCredentialsToken(t, ServiceClientID, ServiceClientSecret, res, "mcp", "nope"))
	if c["iss"] != p.Issuer() || c["sub"] != ServiceClientID || c["scope"] != "mcp" || !slices.Equal(toStrings(c["aud"]), []string{res}) {
		t.Errorf("client-credentials claims = %v", c)
	}
	if _, err := p.FetchClientCredentials(context.Background(), ServiceClientID, "wrong", res); err == nil {
		t.Error("a wrong secret got a token")
	}
	if _, err := p.FetchClientCredentials(context.Background(), PublicClientID, "", res); err == nil {
		t.Error("the public client got a client-credentials token")
	}

	c = ClaimsOf(t, p.AuthCodeToken(t, res, "openid", "tools"))
	if c["sub"] != User || c["scope"] != "openid tools" || !slices.Contains(toStrings(c["aud"]), res) {
		t.Errorf("authorization-code claims = %v", c)
	}

	// The authorization URL with no scope is granted DefaultScope.
	c = ClaimsOf(t, p.AuthCodeToken(t, res))
	if c["scope"] != "openid" {
		t.Errorf("no scope asked: claims = %v", c)
	}

	hits := p.Hits(DiscoveryPath)
	p.SetDown(true)
	if resp, err := hc.Get(p.Issuer() + DiscoveryPath); err == nil {
		resp.Body.Close()
		t.Error("a request to a provider that is down was answered")
	}
	if p.Hits(DiscoveryPath) <= hits { // net/http may retry a GET on a reused connection
		t.Error("the request while down was not counted")
	}
	p.SetDown(false)
	resp, err = hc.Get(p.Issuer() + DiscoveryPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestAutoLogin: with AutoLogin, the login's GET approves, so the
// authorization URL redirects to the client's redirect URI with a code.
func TestAutoLogin(t *testing.T) {
	p := Start(t, Options{AutoLogin: true, Users: []string{"bob"}})
	cfg := oauth2.Config{ClientID: PublicClientID, RedirectURL: "http://localhost:1/cb",
		Endpoint: oauth2.Endpoint{AuthURL: p.Issuer() + AuthorizePath, TokenURL: p.Issuer() + TokenPath}}
	v := oauth2.GenerateVerifier()
	back, err := p.Authorize(context.Background(), cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(v)))
	if err != nil {
		t.Fatal(err)
	}
	if back.Host != "localhost:1" || back.Path != "/cb" || back.Query().Get("code") == "" || back.Query().Get("state") != "s" {
		t.Errorf("redirected to %s", back)
	}
	if c := ClaimsOf(t, p.AuthCodeToken(t, "")); c["sub"] != "bob" {
		t.Errorf("claims = %v", c)
	}
}

func toStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			s, _ := e.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

// TestAudience: Options.Audience is the audience of a client-credentials
// token that names no resource; a resource parameter still wins.
func TestAudience(t *testing.T) {
	p := Start(t, Options{Audience: "urn:mcpv2:api"})
	if c := ClaimsOf(t, p.ClientCredentialsToken(t, ServiceClientID, ServiceClientSecret, "")); !slices.Equal(toStrings(c["aud"]), []string{"urn:mcpv2:api"}) {
		t.Errorf("no resource: claims = %v", c)
	}
	const res = "http://127.0.0.1:1/mcp"
	if c := ClaimsOf(t, p.ClientCredentialsToken(t, ServiceClientID, ServiceClientSecret, res)); !slices.Equal(toStrings(c["aud"]), []string{res}) {
		t.Errorf("resource %s: claims = %v", res, c)
	}
	q := Start(t, Options{})
	if c := ClaimsOf(t, q.ClientCredentialsToken(t, ServiceClientID, ServiceClientSecret, "")); !slices.Equal(toStrings(c["aud"]), []string{ServiceClientID}) {
		t.Errorf("default, no resource: claims = %v", c)
	}
}
