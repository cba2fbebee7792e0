package a2a_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/node"
)

// noKeys is a key ring that knows no key: enough for the edge to say it
// takes API keys.
type noKeys struct{}

func (noKeys) VerifyKey(string) (string, []string, error) { return "", nil, errors.New("unknown key") }
func (noKeys) ActiveKeys() int                            { return 0 }

// cardEdge is a node with an edge of config cfg (BindHost and Secret
// set here) and the face mounted on it; it returns the edge's base URL.
func cardEdge(t *testing.T, cfg edge.Config) (string, *node.Node, *a2a.Face) {
	t.Helper()
	n, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Secret: []byte(secret), Name: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	cfg.BindHost, cfg.Secret = "127.0.0.1", []byte(secret)
	e, err := edge.New(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := a2a.New(n)
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	f.Mount(e)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		f.Close()
	})
	return "http://127.0.0.1:" + strconv.Itoa(e.BoundPort()), n, f
}

// fetchCard fetches the card at url in version v ("" for none): 200 and
// its bytes.
func fetchCard(t *testing.T, url, v string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if v != "" {
		req.Header.Set(a2a.VersionHeader, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s (%s): %d %s", url, v, resp.StatusCode, b)
	}
	return b
}

// getCard fetches a card at url in version v ("" for none) and checks its
// signature by n.
func getCard(t *testing.T, url, v string, n *node.Node) map[string]any {
	t.Helper()
	b := fetchCard(t, url, v)
	if id, err := a2a.VerifyCard(b); err != nil || id != n.ID().String() {
		t.Fatalf("%s (%s): signature: %v %s", url, v, err, id)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// wantScheme is a security scheme a card must name.
type wantScheme struct {
	name, kind, detail string // kind: bearer (detail: its bearerFormat) or oidc (detail: its openIdConnectUrl)
}

// checkSecurity checks the card's securitySchemes (exactly want) and its
// requirements: one per scheme, each alone, plus {} exactly when anon.
func checkSecurity(t *testing.T, what string, card map[string]any, v1 bool, want []wantScheme, anon bool) {
	t.Helper()
	schemes, _ := card["securitySchemes"].(map[string]any)
	if len(schemes) != len(want) {
		t.Errorf("%s: securitySchemes %v, want %d", what, schemes, len(want))
	}
	for _, w := range want {
		s, _ := schemes[w.name].(map[string]any)
		if v1 {
			switch w.kind {
			case "bearer":
				s, _ = s["httpAuthSecurityScheme"].(map[string]any)
				if s["scheme"] != "Bearer" || s["bearerFormat"] != w.detail {
					t.Errorf("%s: scheme %s %v, want an HTTP Bearer scheme of format %q", what, w.name, s, w.detail)
				}
			case "oidc":
				s, _ = s["openIdConnectSecurityScheme"].(map[string]any)
				if s["openIdConnectUrl"] != w.detail {
					t.Errorf("%s: scheme %s %v, want openIdConnectUrl %s", what, w.name, s, w.detail)
				}
			}
		} else {
			switch w.kind {
			case "bearer":
				if s["type"] != "http" || s["scheme"] != "bearer" || s["bearerFormat"] != w.detail {
					t.Errorf("%s: scheme %s %v, want type http, scheme bearer, bearerFormat %q", what, w.name, s, w.detail)
				}
			case "oidc":
				if s["type"] != "openIdConnect" || s["openIdConnectUrl"] != w.detail {
					t.Errorf("%s: scheme %s %v, want type openIdConnect, openIdConnectUrl %s", what, w.name, s, w.detail)
				}
			}
		}
		// No member at its default value: @a2a-js/sdk would drop it.
		b, _ := json.Marshal(s)
		if len(s) == 0 || strings.Contains(string(b), `""`) || strings.Contains(string(b), `[]`) || strings.Contains(string(b), `{}`) {
			t.Errorf("%s: scheme %s %s has an empty member", what, w.name, b)
		}
	}
	field, other := "security", "securityRequirements"
	if v1 {
		field, other = other, field
	}
	if _, ok := card[other]; ok {
		t.Errorf("%s: the card has %s, not a member of its version", what, other)
	}
	reqs, _ := card[field].([]any)
	var named []string
	var empty int
	for _, r := range reqs {
		m, _ := r.(map[string]any)
		if v1 && len(m) > 0 {
			if m, _ = m["schemes"].(map[string]any); len(m) == 0 {
				t.Errorf("%s: requirement %v has no schemes", what, r)
			}
		}
		if len(m) == 0 {
			empty++
			continue
		}
		for k, scopes := range m {
			named = append(named, k)
			if _, ok := schemes[k]; !ok {
				t.Errorf("%s: requirement names %s, which is no scheme", what, k)
			}
			if v1 {
				if sl, _ := scopes.(map[string]any); sl == nil || len(sl) != 0 {
					t.Errorf("%s: %s's scopes %v, want {} (no scopes)", what, k, scopes)
				}
			} else if sl, ok := scopes.([]any); !ok || len(sl) != 0 {
				t.Errorf("%s: %s's scopes %v, want []", what, k, scopes)
			}
		}
		if len(m) != 1 {
			t.Errorf("%s: requirement %v names %d schemes, want each alone", what, m, len(m))
		}
	}
	for _, w := range want {
		if !slices.Contains(named, w.name) {
			t.Errorf("%s: %s lacks a requirement of %s: %v", what, field, w.name, reqs)
		}
	}
	if wantEmpty := map[bool]int{true: 1, false: 0}[anon]; empty != wantEmpty {
		t.Errorf("%s: %d empty requirements in %v, want %d (anonymous callers served: %v)", what, empty, reqs, wantEmpty, anon)
	}
}

// TestCardSecurity: both versions of the card, at the well-known paths
// and at the edge's face of its own node (/peers/{self}), name in
// securitySchemes and their requirements what the edge accepts: the edge
// session always, API keys when the node has a key ring, an OpenID
// Connect scheme per issuer (its discovery URL), and {} (no credential)
// only when the edge serves callers without one.
func TestCardSecurity(t *testing.T) {
	session := wantScheme{a2a.SessionScheme, "bearer", "mcpv2 edge session"}
	key := wantScheme{a2a.KeyScheme, "bearer", "mcpv2 API key"}
	iss1, iss2 := "http://127.0.0.1:1/realms/mcpv2", "http://127.0.0.1:1/other/"
	for _, c := range []struct {
		name string
		cfg  edge.Config
		want []wantScheme
		anon bool
	}{
		{"default", edge.Config{}, []wantScheme{session}, true},
		{"keys only", edge.Config{Keys: noKeys{}, RequireAuth: true}, []wantScheme{session, key}, false},
		{"keys and anonymous", edge.Config{Keys: noKeys{}}, []wantScheme{session, key}, true},
		{"OIDC issuers", edge.Config{OIDCIssuers: []string{iss1, iss2}, RequireAuth: true}, []wantScheme{session,
			{a2a.OIDCScheme(0), "oidc", iss1 + "/.well-known/openid-configuration"},
			{a2a.OIDCScheme(1), "oidc", "http://127.0.0.1:1/other/.well-known/openid-configuration"}}, false},
		{"RequireAuth", edge.Config{RequireAuth: true}, []wantScheme{session}, false},
		// An issuer, and nothing granted to "http": a caller without a
		// credential is sent to log in, so the card does not offer {}.
		{"OIDC issuer, no anonymous grants", edge.Config{OIDCIssuers: []string{iss1}}, []wantScheme{session,
			{a2a.OIDCScheme(0), "oidc", iss1 + "/.well-known/openid-configuration"}}, false},
		{"OIDC issuer, anonymous grants", edge.Config{OIDCIssuers: []string{iss1}, AnonymousGrants: true}, []wantScheme{session,
			{a2a.OIDCScheme(0), "oidc", iss1 + "/.well-known/openid-configuration"}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, n, _ := cardEdge(t, c.cfg)
			for _, path := range []string{a2a.CardPath, a2a.CardAlias, "/peers/" + n.ID().String() + a2a.CardPath} {
				for _, v := range []string{"1.0", "0.3", ""} {
					card := getCard(t, base+path, v, n)
					checkSecurity(t, path+" "+v, card, v == "1.0", c.want, c.anon)
				}
			}
		})
	}
}

// TestCardSecurityForAnotherEdge: a card the node signs for another
// edge's face of it (CardFor, agent/a2a-card) names the credentials that
// edge said it takes; an edge that said nothing (an older one) gets the
// edge session, which every edge takes, and never "none is needed".
func TestCardSecurityForAnotherEdge(t *testing.T) {
	_, n, f := cardEdge(t, edge.Config{Keys: noKeys{}})
	base := "http://192.0.2.1:8080/peers/" + n.ID().String()
	for _, v := range []string{"1.0", "0.3"} {
		b, err := f.CardFor(base, v, "12D3KooWEdge", nil)
		if err != nil {
			t.Fatal(err)
		}
		var card map[string]any
		_ = json.Unmarshal(b, &card)
		checkSecurity(t, "CardFor "+v, card, v == "1.0", []wantScheme{{a2a.SessionScheme, "bearer", "mcpv2 edge session"}}, false)
		b, err = f.CardFor(base, v, "12D3KooWEdge", &edge.Accepts{Keys: true, OIDCIssuers: []string{"https://id.example.com"}, Anonymous: true})
		if err != nil {
			t.Fatal(err)
		}
		if id, err := a2a.VerifyCard(b); err != nil || id != n.ID().String() {
			t.Fatalf("CardFor %s: %v", v, err)
		}
		card = nil
		_ = json.Unmarshal(b, &card)
		checkSecurity(t, "CardFor with credentials "+v, card, v == "1.0", []wantScheme{{a2a.SessionScheme, "bearer", "mcpv2 edge session"},
			{a2a.KeyScheme, "bearer", "mcpv2 API key"}, {"oidc", "oidc", "https://id.example.com/.well-known/openid-configuration"}}, true)
	}
}

// TestCardCanonical: the signature covers the card as the A2A SDKs
// canonicalize it, without its empty members (@a2a-js/sdk verifies the
// v1.0 card so): the schemes are signed, a requirement without scopes is
// not, and a card signed with its empty members (older nodes) verifies
// too.
func TestCardCanonical(t *testing.T) {
	base, n, _ := cardEdge(t, edge.Config{OIDCIssuers: []string{"http://127.0.0.1:1/realm"}, AnonymousGrants: true})
	b, err := json.Marshal(getCard(t, base+a2a.CardPath, "1.0", n))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, c := range []struct {
		name, from, to string
		verifies       bool
	}{
		{"another OIDC discovery URL", "http://127.0.0.1:1/realm/.well-known", "http://evil.example/realm/.well-known", false},
		{"another bearer format", `"bearerFormat":"mcpv2 edge session"`, `"bearerFormat":"JWT"`, false},
		{"an empty member added", `"name":"carol"`, `"name":"carol","iconUrl":""`, true},
		{"an empty requirement dropped", `,{}]`, `]`, true},
	} {
		if !strings.Contains(s, c.from) {
			t.Fatalf("%s: the card has no %s: %s", c.name, c.from, s)
		}
		_, err := a2a.VerifyCard([]byte(strings.Replace(s, c.from, c.to, 1)))
		if (err == nil) != c.verifies {
			t.Errorf("%s: VerifyCard %v, want verified %v", c.name, err, c.verifies)
		}
	}
	// An older node signed the JCS form with the empty members in.
	var card map[string]any
	_ = json.Unmarshal(b, &card)
	delete(card, "signatures")
	card["iconUrl"] = ""
	raw, _ := json.Marshal(card)
	payload, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	prot := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":"` + n.ID().String() + `","typ":"JOSE"}`))
	sig, err := n.Sign([]byte(prot + "." + base64.RawURLEncoding.EncodeToString(payload)))
	if err != nil {
		t.Fatal(err)
	}
	card["signatures"] = []any{map[string]any{"protected": prot, "signature": base64.RawURLEncoding.EncodeToString(sig)}}
	old, _ := json.Marshal(card)
	if id, err := a2a.VerifyCard(old); err != nil || id != n.ID().String() {
		t.Fatalf("a card signed with its empty members: %v", err)
	}
	card["iconUrl"] = "x"
	old, _ = json.Marshal(card)
	if _, err := a2a.VerifyCard(old); !errors.Is(err, a2a.ErrBadSignature) {
		t.Fatalf("a changed card signed with its empty members: %v", err)
	}
}
