package edge

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpv2/mcpv2/protocol"
)

// The edge is an OAuth 2.1 resource server (the MCP authorization spec):
// it accepts an OpenID Connect provider's access tokens, JWTs, as
// Authorization: Bearer, and publishes its protected-resource metadata
// (RFC 9728) so that a client finds the provider. A token is checked
// against the provider's keys and the request's resource; what its subject
// may do is the node's business, as for every caller.
//
// Discovery is lazy and retried: the node starts while a provider is down,
// fetches each provider's discovery document and keys in the background at
// start and again on first need, and tries a provider that failed at most
// once per oidcRetryEvery, so that requests do not hammer a provider that
// is down.
//
// go-oidc discovers the provider and runs the verifier (issuer, algorithm,
// one signature); the key set is the edge's own (oidcKeySet), so that an
// unknown key and a bad signature are told apart and a refetch for unknown
// keys is rate-limited (go-oidc's RemoteKeySet refetches for every unknown
// kid, and says neither which check failed). The time and audience checks
// are the edge's, with a leeway and the RFC 8707 resource.

// Limits and timings of OIDC access tokens.
const (
	// oidcRetryEvery is how often at most an issuer whose discovery failed
	// is tried again, and its key set refetched for an unknown key.
	oidcRetryEvery = 10 * time.Second
	// oidcFetchTimeout bounds one fetch of a discovery document or key set.
	oidcFetchTimeout = 10 * time.Second
	// oidcLeeway is the clock skew allowed on exp, nbf and iat.
	oidcLeeway = 30 * time.Second
	// oidcCacheFor is how long a verified token is taken on trust (never
	// past its expiry).
	oidcCacheFor = 30 * time.Second
	// oidcCacheMax bounds the verified-token cache; past it the cache
	// starts over.
	oidcCacheMax = 4096
	// oidcMaxToken caps the length of a token the edge parses.
	oidcMaxToken = 16 << 10
	// oidcMaxDocument caps the body of a discovery document or key set.
	oidcMaxDocument = 1 << 20
	// wellKnownResource is the path of the protected-resource metadata
	// (RFC 9728 §3); a resource's path follows it.
	wellKnownResource = "/.well-known/oauth-protected-resource"
	// maxResourcePath caps the resource path the metadata is served for.
	maxResourcePath = 512
)

// Refusal reasons of an OIDC access token, the "reason" of the error's data.
const (
	oidcMalformed         = "malformed"
	oidcIssuer            = "issuer"
	oidcAudience          = "audience"
	oidcExpired           = "expired"
	oidcNotYetValid       = "not_yet_valid"
	oidcAlgorithm         = "algorithm"
	oidcUnknownKey        = "unknown_key"
	oidcSignature         = "signature"
	oidcIssuerUnavailable = "issuer_unavailable"
)

// OIDCClaims is what a verified OpenID Connect access token says of its
// bearer.
type OIDCClaims struct {
	// Issuer is the token's iss: one of Config.OIDCIssuers.
	Issuer string
	// Subject is the token's sub, unique within Issuer: a user, or the
	// client itself for a client-credentials token.
	Subject string
	// ClientID is the OAuth client the token was issued to (client_id, or
	// else azp); empty when the token names none.
	ClientID string
	// Scopes are the granted scopes, from scope (a space-separated string)
	// or else scp (an array, or a string).
	Scopes []string
	// Expiry is the token's exp.
	Expiry time.Time
}

// oidcConfig configures an oidcAuth; newOIDCWith fills the defaults.
type oidcConfig struct {
	issuers  []string
	audience string       // empty: the resource of the request
	client   *http.Client // nil: an own transport, closed by Close
	log      *slog.Logger
	now      func() time.Time // the clock of exp, nbf and iat (default time.Now)
	retry    time.Duration    // default oidcRetryEvery
	leeway   time.Duration    // default oidcLeeway
	// background starts each issuer's discovery at once.
	background bool
}

// oidcAuth verifies OpenID Connect access tokens of a fixed set of
// issuers. It owns the goroutines that run discoveries (wg); Close cancels
// them and waits. Its methods are safe for concurrent use.
type oidcAuth struct {
	cfg      oidcConfig
	client   *http.Client
	own      *http.Transport // the transport of client when newOIDCWith made it; nil otherwise
	issuers  map[string]*issuerState
	verified oidcCache

	ctx    context.Context // cancelled by Close: stops fetches
	cancel context.CancelFunc
	wg     sync.WaitGroup // discovery goroutines

	mu     sync.Mutex // guards closed, and wg.Add against Close's Wait
	closed bool
}

// issuerState is one configured issuer and what discovery found of it. mu
// guards every field below it.
type issuerState struct {
	url string

	mu       sync.Mutex
	found    *oidcProvider // nil until a discovery succeeded; then fixed
	err      error         // why the last discovery failed
	tried    time.Time     // when the last discovery started (monotonic)
	fetching chan struct{} // closed when the discovery in flight ends; nil when none
}

// oidcProvider is a discovered issuer: its verifier, key set and
// algorithms. Immutable.
type oidcProvider struct {
	verifier *oidc.IDTokenVerifier
	keys     *oidcKeySet
	algs     []string
}

// newOIDCWith returns a verifier of the access tokens of cfg.issuers, whose
// audience must contain cfg.audience (empty: the resource the request is
// for). It checks the issuer URLs (https, or http on a loopback host) and,
// with cfg.background, starts each issuer's discovery in the background;
// an issuer that is down fails nothing here. cfg.client makes the fetches
// (nil: a client of its own); its response bodies are capped. Close stops
// it.
func newOIDCWith(cfg oidcConfig) (*oidcAuth, error) {
	if err := checkOIDCConfig(cfg.issuers, cfg.audience); err != nil {
		return nil, err
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.retry <= 0 {
		cfg.retry = oidcRetryEvery
	}
	if cfg.leeway <= 0 {
		cfg.leeway = oidcLeeway
	}
	a := &oidcAuth{cfg: cfg, issuers: make(map[string]*issuerState, len(cfg.issuers))}
	a.client, a.own = cappedClient(cfg.client)
	for _, iss := range cfg.issuers {
		a.issuers[iss] = &issuerState{url: iss}
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	if cfg.background {
		for _, is := range a.issuers {
			is.mu.Lock()
			a.startDiscovery(is)
			is.mu.Unlock()
		}
	}
	return a, nil
}

// checkOIDCConfig refuses issuer URLs the edge cannot trust and a blank
// audience: each issuer must be an absolute https URL (http only on a
// loopback host: 127.0.0.0/8, ::1, localhost) without user info, query or
// fragment, named once. It starts nothing, so that Check may call it.
func checkOIDCConfig(issuers []string, audience string) error {
	if len(issuers) == 0 {
		return errors.New("edge: OIDC: an audience is named but no issuer whose tokens would name it")
	}
	seen := make(map[string]bool, len(issuers))
	for _, iss := range issuers {
		if err := checkFetchURL(iss); err != nil {
			return fmt.Errorf("edge: OIDC issuer %q: %w", iss, err)
		}
		if seen[iss] {
			return fmt.Errorf("edge: OIDC issuer %q is named twice", iss)
		}
		seen[iss] = true
	}
	if audience != "" && strings.TrimSpace(audience) == "" {
		return errors.New("edge: OIDC audience is blank")
	}
	return nil
}

// checkFetchURL checks a URL the edge fetches from an issuer's say-so or
// the operator's: absolute, https or loopback http, no user info, query or
// fragment.
func checkFetchURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	switch {
	case u.Opaque != "" || u.Host == "":
		return errors.New("not an absolute URL (want https://host/…)")
	case u.User != nil:
		return errors.New("has user info")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("has a query or a fragment")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if loopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("http is allowed only on a loopback host, not %q; use https", u.Hostname())
	}
	return fmt.Errorf("scheme %q is not https", u.Scheme)
}

// loopbackHost reports whether host (no port) is localhost or a loopback IP.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}

// Close stops the discoveries in flight and waits for them, and closes the
// idle connections of the client newOIDCWith made. A second Close returns
// net.ErrClosed; Close of a nil *oidcAuth returns nil. Verify still serves
// the issuers discovered before.
func (a *oidcAuth) Close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return net.ErrClosed
	}
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
	if a.own != nil {
		a.own.CloseIdleConnections()
	}
	return nil
}

// startDiscovery starts is's discovery in a goroutine of a unless one is
// in flight, and returns the channel closed when it ends. is.mu must be
// held. After Close it starts nothing and records net.ErrClosed.
func (a *oidcAuth) startDiscovery(is *issuerState) chan struct{} {
	if is.fetching != nil {
		return is.fetching
	}
	done := make(chan struct{})
	is.tried = time.Now()
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		is.err = net.ErrClosed
		close(done)
		return done
	}
	a.wg.Add(1)
	a.mu.Unlock()
	is.fetching = done
	go func() {
		defer a.wg.Done()
		p, err := a.discover(is.url)
		is.mu.Lock()
		if err == nil {
			is.found, is.err = p, nil
		} else {
			is.err = err
		}
		is.fetching = nil
		is.mu.Unlock()
		close(done)
		if err != nil {
			if a.ctx.Err() == nil {
				a.cfg.log.Warn("OIDC issuer unavailable: its tokens are refused until it answers", "issuer", is.url, "retry_after", a.cfg.retry, "err", err)
			}
			return
		}
		a.cfg.log.Info("OIDC issuer discovered", "issuer", is.url, "algorithms", p.algs)
	}()
	return done
}

// provider returns is's discovered provider: at once when it is known,
// else after a discovery (started unless one failed less than retry ago),
// or ctx's end. The error says why the issuer is unavailable.
func (a *oidcAuth) provider(ctx context.Context, is *issuerState) (*oidcProvider, error) {
	is.mu.Lock()
	if p := is.found; p != nil {
		is.mu.Unlock()
		return p, nil
	}
	done := is.fetching
	if done == nil {
		if !is.tried.IsZero() && time.Since(is.tried) < a.cfg.retry {
			err := is.err
			is.mu.Unlock()
			return nil, fmt.Errorf("%w (next attempt within %s)", err, a.cfg.retry)
		}
		done = a.startDiscovery(is)
	}
	is.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.found != nil {
		return is.found, nil
	}
	return nil, is.err
}

// discover fetches issuer's discovery document (go-oidc, which checks that
// it names issuer) and its key set, within oidcFetchTimeout.
func (a *oidcAuth) discover(issuer string) (*oidcProvider, error) {
	ctx, cancel := context.WithTimeout(a.ctx, oidcFetchTimeout)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, a.client), issuer)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var meta struct {
		JWKS string   `json:"jwks_uri"`
		Algs []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := p.Claims(&meta); err != nil {
		return nil, fmt.Errorf("discovery document: %w", err)
	}
	if err := checkFetchURL(meta.JWKS); err != nil {
		return nil, fmt.Errorf("discovery document: jwks_uri %q: %w", meta.JWKS, err)
	}
	var algs []string
	for _, alg := range meta.Algs {
		if oidcAlgs[alg] && !slices.Contains(algs, alg) {
			algs = append(algs, alg)
		}
	}
	if len(algs) == 0 {
		// OpenID Connect Discovery §3: RS256 must be supported; go-oidc
		// falls back to it too.
		algs = []string{oidc.RS256}
	}
	ks := &oidcKeySet{url: meta.JWKS, client: a.client, base: a.ctx, every: a.cfg.retry, algs: joseAlgs(algs)}
	if err := ks.refresh(ctx); err != nil {
		return nil, err
	}
	v := oidc.NewVerifier(issuer, ks, &oidc.Config{
		SkipClientIDCheck:    true, // the audience is checked against the resource
		SkipExpiryCheck:      true, // with a leeway, and nbf and iat, by Verify
		SupportedSigningAlgs: algs,
		Now:                  a.cfg.now,
	})
	return &oidcProvider{verifier: v, keys: ks, algs: algs}, nil
}

// oidcAlgs are the signing algorithms the edge accepts (go-oidc's
// asymmetric ones): never "none", never a MAC (a client could forge it
// with a shared secret).
var oidcAlgs = map[string]bool{
	oidc.RS256: true, oidc.RS384: true, oidc.RS512: true,
	oidc.ES256: true, oidc.ES384: true, oidc.ES512: true,
	oidc.PS256: true, oidc.PS384: true, oidc.PS512: true,
	oidc.EdDSA: true,
}

func joseAlgs(algs []string) []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, len(algs))
	for i, a := range algs {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}

// oidcRefusal is the error of a refused token: -32001, "invalid token: …" and
// the reason in data.
func oidcRefusal(reason, format string, args ...any) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidSession, Message: "invalid token: " + fmt.Sprintf(format, args...),
		Data: map[string]string{"reason": reason}}
}

// Verify checks raw, an access token, for a request for resource (the URL
// of the face as the client reached it, RFC 8707) and returns its claims,
// or a refusal (-32001, data.reason one of malformed, issuer, audience,
// expired, not_yet_valid, algorithm, unknown_key, signature,
// issuer_unavailable). The token's unverified iss picks the issuer; the
// signature must be by one of that issuer's keys with one of its
// algorithms; exp and nbf (and iat) hold within the leeway; aud contains
// the configured audience, else resource. A token that verified is taken
// on trust for at most oidcCacheFor and never past its expiry. It waits
// for a discovery in flight for as long as ctx lets it.
func (a *oidcAuth) Verify(ctx context.Context, raw, resource string) (OIDCClaims, *protocol.Error) {
	now := a.cfg.now()
	want := a.cfg.audience
	if want == "" {
		want = resource
	}
	sum := sha256.Sum256([]byte(raw))
	if c, aud, ok := a.verified.get(sum, now); ok {
		if perr := checkAudience(aud, want); perr != nil {
			return OIDCClaims{}, perr
		}
		return c, nil
	}
	tok, perr := parseJWT(raw)
	if perr != nil {
		return OIDCClaims{}, perr
	}
	if !oidcAlgs[tok.header.Alg] {
		return OIDCClaims{}, oidcRefusal(oidcAlgorithm, "signed with algorithm %q, which this node never accepts (want an asymmetric one: RS256, ES256, PS256, EdDSA, …)", protocol.Clip(tok.header.Alg, 20))
	}
	is := a.issuers[tok.claims.Iss]
	if tok.claims.Iss == "" {
		return OIDCClaims{}, oidcRefusal(oidcIssuer, "names no issuer (iss); this node accepts tokens of %s", strings.Join(a.cfg.issuers, ", "))
	}
	if is == nil {
		return OIDCClaims{}, oidcRefusal(oidcIssuer, "issued by %q, which this node does not accept (it accepts tokens of %s)", protocol.Clip(tok.claims.Iss, 100), strings.Join(a.cfg.issuers, ", "))
	}
	p, err := a.provider(ctx, is)
	if err != nil {
		a.cfg.log.Debug("OIDC token refused: issuer unavailable", "issuer", is.url, "err", err)
		return OIDCClaims{}, oidcRefusal(oidcIssuerUnavailable, "its issuer %s is unavailable (its discovery document or keys could not be fetched); retry later", is.url)
	}
	if !slices.Contains(p.algs, tok.header.Alg) {
		return OIDCClaims{}, oidcRefusal(oidcAlgorithm, "signed with algorithm %s, which issuer %s does not sign with (it signs with %s)", tok.header.Alg, is.url, strings.Join(p.algs, ", "))
	}
	jws, err := jose.ParseSignedCompact(raw, p.keys.algs)
	if err != nil || len(jws.Signatures) != 1 {
		return OIDCClaims{}, oidcRefusal(oidcMalformed, "not a JWS with one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	if keys, err := p.keys.lookup(ctx, kid); len(keys) == 0 {
		a.cfg.log.Debug("OIDC token refused: unknown key", "issuer", is.url, "kid", kid, "err", err)
		return OIDCClaims{}, oidcRefusal(oidcUnknownKey, "signed with key %q, which issuer %s does not publish", protocol.Clip(kid, 80), is.url)
	}
	if _, err := p.verifier.Verify(ctx, raw); err != nil {
		a.cfg.log.Debug("OIDC token refused: signature", "issuer", is.url, "kid", kid, "err", err)
		return OIDCClaims{}, oidcRefusal(oidcSignature, "bad signature: the token was altered, or signed by another key than issuer %s's key %q", is.url, protocol.Clip(kid, 80))
	}
	c := tok.claims
	leeway := a.cfg.leeway
	switch {
	case c.Exp == nil:
		return OIDCClaims{}, oidcRefusal(oidcMalformed, "no exp (expiry) claim")
	case now.After(c.Exp.Add(leeway)):
		return OIDCClaims{}, oidcRefusal(oidcExpired, "expired at %s", c.Exp.UTC().Format(time.RFC3339))
	case c.Nbf != nil && c.Nbf.After(now.Add(leeway)):
		return OIDCClaims{}, oidcRefusal(oidcNotYetValid, "not valid before %s (this node's clock says %s)", c.Nbf.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case c.Iat != nil && c.Iat.After(now.Add(leeway)):
		return OIDCClaims{}, oidcRefusal(oidcNotYetValid, "issued in the future, at %s (this node's clock says %s)", c.Iat.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case c.Sub == "":
		return OIDCClaims{}, oidcRefusal(oidcMalformed, "no sub (subject) claim")
	}
	if perr := checkAudience(c.Aud, want); perr != nil {
		return OIDCClaims{}, perr
	}
	out := OIDCClaims{Issuer: c.Iss, Subject: c.Sub, ClientID: c.ClientID, Expiry: c.Exp.Time}
	if out.ClientID == "" {
		out.ClientID = c.Azp
	}
	if c.Scope != nil {
		out.Scopes = strings.Fields(*c.Scope)
	} else {
		out.Scopes = c.Scp
	}
	a.verified.put(sum, out, c.Aud, now)
	return out, nil
}

// checkAudience refuses aud unless it contains want.
func checkAudience(aud []string, want string) *protocol.Error {
	if want != "" && slices.Contains(aud, want) {
		return nil
	}
	shown := make([]string, 0, min(len(aud), 4))
	for _, s := range aud[:min(len(aud), 4)] {
		shown = append(shown, strconv.Quote(protocol.Clip(s, 100)))
	}
	return oidcRefusal(oidcAudience, "its audience [%s] does not name this resource %q (ask the issuer for a token with resource=%s)", strings.Join(shown, " "), want, want)
}

// jwt is a token parsed but not verified.
type jwt struct {
	header jwtHeader
	claims jwtClaims
}

type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// jwtClaims are the claims the edge reads. Their types are at least as
// strict as go-oidc's, so that a token go-oidc would refuse for its claims
// is refused here first, as malformed.
type jwtClaims struct {
	Iss      string       `json:"iss"`
	Sub      string       `json:"sub"`
	Aud      jwtAudience  `json:"aud"`
	Exp      *numericDate `json:"exp"`
	Nbf      *numericDate `json:"nbf"`
	Iat      *numericDate `json:"iat"`
	Scope    *string      `json:"scope"`
	Scp      jwtScopes    `json:"scp"`
	ClientID string       `json:"client_id"`
	Azp      string       `json:"azp"`
	Nonce    string       `json:"nonce"`
	AtHash   string       `json:"at_hash"`
}

// jwtAudience is aud: a string or an array of strings (RFC 7519 §4.1.3).
type jwtAudience []string

func (a *jwtAudience) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = jwtAudience{s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return errors.New("aud is neither a string nor an array of strings")
	}
	*a = l
	return nil
}

// jwtScopes is scp: an array of strings, or a space-separated string.
type jwtScopes []string

func (s *jwtScopes) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*s = strings.Fields(str)
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return errors.New("scp is neither a string nor an array of strings")
	}
	*s = l
	return nil
}

// numericDate is a JWT time: seconds since the epoch, an integer or not.
type numericDate struct{ time.Time }

func (d *numericDate) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("a time claim is not a number")
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1<<40 {
		return errors.New("a time claim is out of range")
	}
	sec := int64(f)
	*d = numericDate{time.Unix(sec, int64((f-float64(sec))*1e9))}
	return nil
}

// parseJWT splits a compact JWS and decodes its header and claims, without
// checking anything else.
func parseJWT(raw string) (jwt, *protocol.Error) {
	bad := func(what string) (jwt, *protocol.Error) {
		return jwt{}, oidcRefusal(oidcMalformed, "malformed: %s", what)
	}
	if len(raw) > oidcMaxToken {
		return bad(fmt.Sprintf("longer than %d bytes", oidcMaxToken))
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return bad("not a JWT (want three base64url parts joined by dots)")
	}
	var t jwt
	if err := decodeSegment(parts[0], &t.header); err != nil {
		return bad("header: " + err.Error())
	}
	if t.header.Alg == "" {
		return bad("header names no alg")
	}
	if err := decodeSegment(parts[1], &t.claims); err != nil {
		return bad("claims: " + err.Error())
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString(parts[2]); err != nil {
		return bad("signature is not base64url")
	}
	return t, nil
}

// decodeSegment decodes a base64url (unpadded) JSON object into v.
func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.Strict().DecodeString(seg)
	if err != nil {
		return errors.New("not base64url")
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not a JSON object")
	}
	if err := json.Unmarshal(b, v); err != nil {
		var ue *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &ue):
			return fmt.Errorf("%s has the wrong type", ue.Field)
		case errors.As(err, &se):
			return errors.New("not valid JSON")
		}
		return err // a claim's own decoder: it names the claim
	}
	return nil
}

// oidcCache holds tokens that verified, by their SHA-256, each with its
// audience (a hit is checked again against the request's resource) until
// oidcCacheFor has passed or it expires. mu guards m.
type oidcCache struct {
	mu sync.Mutex
	m  map[[32]byte]oidcCached
}

type oidcCached struct {
	claims OIDCClaims
	aud    []string
	until  time.Time
}

func (c *oidcCache) get(sum [32]byte, now time.Time) (OIDCClaims, []string, bool) {
	c.mu.Lock()
	e, ok := c.m[sum]
	c.mu.Unlock()
	if !ok || !now.Before(e.until) {
		return OIDCClaims{}, nil, false
	}
	e.claims.Scopes = slices.Clone(e.claims.Scopes)
	return e.claims, e.aud, true
}

func (c *oidcCache) put(sum [32]byte, claims OIDCClaims, aud []string, now time.Time) {
	until := now.Add(oidcCacheFor)
	if claims.Expiry.Before(until) {
		until = claims.Expiry
	}
	claims.Scopes = slices.Clone(claims.Scopes)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= oidcCacheMax {
		c.m = make(map[[32]byte]oidcCached)
	}
	c.m[sum] = oidcCached{claims: claims, aud: slices.Clone(aud), until: until}
}

// oidcKeySet is an issuer's JSON Web Key Set, fetched at discovery and
// again, at most once per every, when a token names a key it does not
// hold. It implements go-oidc's KeySet. mu guards keys, fetched and
// fetching.
type oidcKeySet struct {
	url    string
	client *http.Client
	base   context.Context // the oidcAuth's: Close stops a fetch
	every  time.Duration
	algs   []jose.SignatureAlgorithm // the issuer's

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	fetched  time.Time     // when the last fetch started (monotonic)
	fetching chan struct{} // closed when the fetch in flight ends; nil when none
}

// errUnknownKey is the lookup error of a kid the key set does not hold.
var errUnknownKey = errors.New("no key of the issuer has this kid")

// matching returns the held keys with kid (every signing key when kid is
// empty).
func (k *oidcKeySet) matching(kid string) []jose.JSONWebKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []jose.JSONWebKey
	for _, key := range k.keys {
		if kid == "" || key.KeyID == kid {
			out = append(out, key)
		}
	}
	return out
}

// lookup returns the keys with kid, refetching the set first when it holds
// none and its last fetch is older than every.
func (k *oidcKeySet) lookup(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	if keys := k.matching(kid); len(keys) > 0 {
		return keys, nil
	}
	k.mu.Lock()
	stale := time.Since(k.fetched) >= k.every
	k.mu.Unlock()
	if !stale {
		return nil, errUnknownKey
	}
	if err := k.refresh(ctx); err != nil {
		return nil, err
	}
	if keys := k.matching(kid); len(keys) > 0 {
		return keys, nil
	}
	return nil, errUnknownKey
}

// refresh fetches the key set, or waits for the fetch in flight (or ctx's
// end). The fetch is bounded by oidcFetchTimeout and the oidcAuth's
// context, not by ctx, so that a caller who leaves does not fail the
// others.
func (k *oidcKeySet) refresh(ctx context.Context) error {
	k.mu.Lock()
	if done := k.fetching; done != nil {
		k.mu.Unlock()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := make(chan struct{})
	k.fetching = done
	k.fetched = time.Now()
	k.mu.Unlock()

	fctx, cancel := context.WithTimeout(k.base, oidcFetchTimeout)
	defer cancel()
	keys, err := k.fetch(fctx)
	k.mu.Lock()
	if err == nil {
		k.keys = keys
	}
	k.fetching = nil
	k.mu.Unlock()
	close(done)
	return err
}

// fetch GETs the key set and decodes its signing keys; keys of a type or
// algorithm the edge does not know are skipped (RFC 7517 §5).
func (k *oidcKeySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("keys %s: %w", k.url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("keys %s: %w", k.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("keys %s: HTTP %s", k.url, resp.Status)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("keys %s: not a JWK set: %v", k.url, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(raw); err != nil || !key.Valid() || !key.IsPublic() {
			continue
		}
		if (key.Use != "" && key.Use != "sig") || (key.Algorithm != "" && !oidcAlgs[key.Algorithm]) {
			continue
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("keys %s: no signing key the edge can use", k.url)
	}
	return keys, nil
}

// VerifySignature implements oidc.KeySet: it returns the payload of jwt
// when one of the held keys of its kid verifies it. go-oidc's verifier
// calls it after its checks of the algorithm; Verify has looked the key up
// before, so it never fetches.
func (k *oidcKeySet) VerifySignature(_ context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, k.algs)
	if err != nil {
		return nil, err
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("want exactly one signature")
	}
	for _, key := range k.matching(jws.Signatures[0].Header.KeyID) {
		if payload, err := jws.Verify(&key); err == nil {
			return payload, nil
		}
	}
	return nil, errors.New("no key of the issuer verifies the signature")
}

// cappedClient returns a client like c (nil: a client on a transport of
// its own, which it also returns for Close) whose response bodies fail
// past oidcMaxDocument bytes.
func cappedClient(c *http.Client) (*http.Client, *http.Transport) {
	var own *http.Transport
	out := &http.Client{Timeout: oidcFetchTimeout}
	if c != nil {
		*out = *c
	}
	rt := out.Transport
	if rt == nil {
		if c == nil {
			own = http.DefaultTransport.(*http.Transport).Clone()
			rt = own
		} else {
			rt = http.DefaultTransport
		}
	}
	out.Transport = cappedTransport{rt: rt, max: oidcMaxDocument}
	return out, own
}

// cappedTransport caps the response bodies of rt at max bytes.
type cappedTransport struct {
	rt  http.RoundTripper
	max int64
}

// RoundTrip implements http.RoundTripper.
func (t cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, max: t.max, url: req.URL.Redacted()}
	return resp, nil
}

type cappedBody struct {
	rc  io.ReadCloser
	max int64
	n   int64
	url string
}

func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		return n, fmt.Errorf("the answer of %s is longer than %d bytes", b.url, b.max)
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// initOIDC returns the verifier of Config.OIDCIssuers for New (nil, nil
// when there are none): discovery starts in the background, and an issuer
// that is down fails nothing. Its clock is Config.Now; Close stops it.
func (s *Server) initOIDC() (*oidcAuth, error) {
	if len(s.cfg.OIDCIssuers) == 0 {
		return nil, nil
	}
	return newOIDCWith(oidcConfig{issuers: s.cfg.OIDCIssuers, audience: s.cfg.OIDCAudience,
		log: s.log.With("part", "oidc"), now: s.cfg.Now, background: true})
}

// baseURL is the scheme and host the client reached r at: https when the
// edge serves TLS. r.Host passed checkHost (DNS-rebinding protection)
// before any handler runs.
func (s *Server) baseURL(r *http.Request) string {
	scheme := "http"
	if s.tls != nil || r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// resourceURL is the RFC 8707 resource r is for: the URL of r without its
// query, as the client reached it (http://host:port/mcp). An access token
// for r must name it in its audience (unless Config.OIDCAudience is set),
// and it is the resource of the metadata challenge names for r.
func (s *Server) resourceURL(r *http.Request) string {
	return s.baseURL(r) + r.URL.EscapedPath()
}

// metadataURL is the URL of the protected-resource metadata of the
// resource r is for (RFC 9728 §3.1: the well-known path, then r's path).
func (s *Server) metadataURL(r *http.Request) string {
	p := r.URL.EscapedPath()
	if p == "" {
		return s.baseURL(r) + wellKnownResource
	}
	return s.baseURL(r) + wellKnownResource + p
}

// protectedResourceMetadata is the RFC 9728 document.
type protectedResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	ResourceName           string   `json:"resource_name"`
}

// protectedResource serves GET /.well-known/oauth-protected-resource[/path]
// (RFC 9728): the resource is the request's scheme and host followed by
// path (the bare path: the host alone, as the MCP go-sdk expects), the
// authorization servers are Config.OIDCIssuers, bearer tokens go in the
// header. The document is public: any origin may read it (CORS), caches
// may keep it 5 minutes. OPTIONS answers a CORS preflight. Without issuers
// it answers 404, as for any unknown path. Mount it on both the bare path
// and the path with a trailing slash.
func (s *Server) protectedResource(w http.ResponseWriter, r *http.Request) {
	q := requestFrom(r.Context()) // Traced's
	if q == nil {
		q = s.newRequest(r)
	}
	suffix, ok := strings.CutPrefix(r.URL.EscapedPath(), wellKnownResource)
	if !ok || (suffix != "" && suffix[0] != '/') || len(suffix) > maxResourcePath || len(s.cfg.OIDCIssuers) == 0 {
		s.notFound(w, r, q)
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "*")
		h.Set("Access-Control-Max-Age", "86400")
		h.Set("Allow", "GET, HEAD, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		s.methodNotAllowed(w, r, q, "GET, HEAD, OPTIONS")
		return
	}
	// The bare path is the host's own metadata: its resource is the host
	// with no path (the go-sdk's "at the root" candidate); a suffix /p is
	// the resource base/p.
	b, err := json.Marshal(protectedResourceMetadata{
		Resource:               s.baseURL(r) + suffix,
		AuthorizationServers:   slices.Clone(s.cfg.OIDCIssuers),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "mcpv2 node " + s.b.PeerID(),
	})
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, protocol.ErrorResponse(nil, protocol.Errorf(protocol.CodeInternal, "internal error")))
		return
	}
	s.b.Audit(r.Context(), q.caller, auditMethod(r), nil, q.start)
	h["Content-Type"] = jsonContentType
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// challenge sets the WWW-Authenticate header of a 401 (or 403) for r
// (RFC 6750 §3, RFC 9728 §5.1): a Bearer challenge of realm "mcpv2",
// naming the metadata of r's resource when the edge names an issuer, plus error and error_description when errCode is not empty
// (invalid_request, invalid_token, insufficient_scope). It only writes the
// header; the caller writes the status and body. desc is reduced to the
// characters RFC 6750 allows in it (no quote, no backslash, printable
// ASCII) and clipped.
func (s *Server) challenge(w http.ResponseWriter, r *http.Request, errCode, desc string) {
	var b strings.Builder
	b.WriteString(`Bearer realm="mcpv2"`)
	if len(s.cfg.OIDCIssuers) > 0 { // else there is no metadata to name
		b.WriteString(`, resource_metadata="`)
		b.WriteString(authParam(s.metadataURL(r), 2048))
		b.WriteByte('"')
	}
	if errCode != "" {
		b.WriteString(`, error="`)
		b.WriteString(authParam(errCode, 64))
		b.WriteByte('"')
		if desc != "" {
			b.WriteString(`, error_description="`)
			b.WriteString(authParam(desc, 300))
			b.WriteByte('"')
		}
	}
	w.Header().Set("WWW-Authenticate", b.String())
}

// authParam makes s a safe quoted-string body for a Bearer challenge: RFC
// 6750 §3 allows %x20-21 / %x23-5B / %x5D-7E, so a quote becomes an
// apostrophe, a backslash a slash, a control character a space and any
// other character a question mark; then it is clipped to max bytes.
func authParam(s string, max int) string {
	out := make([]byte, 0, min(len(s), max))
	for _, c := range s {
		if len(out) == max {
			break
		}
		switch {
		case c == '"':
			c = '\''
		case c == '\\':
			c = '/'
		case c < 0x20 || c == 0x7f:
			c = ' '
		case c > 0x7f:
			c = '?'
		}
		out = append(out, byte(c))
	}
	return string(out)
}
