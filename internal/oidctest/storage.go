package oidctest

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is the provider's in-memory op.Storage (and
// op.ClientCredentialsStorage): two clients, the users of Options, one RSA
// signing key, auth requests and codes. mu guards reqs and codes.
type storage struct {
	clients  map[string]*client
	users    map[string]bool
	lifetime time.Duration
	audience string // of a client-credentials token without resource; "": the client
	key      signingKey

	mu    sync.Mutex
	reqs  map[string]*authRequest
	codes map[string]string // code → auth request ID
}

var (
	_ op.Storage                        = (*storage)(nil)
	_ op.ClientCredentialsStorage       = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest      = (*storage)(nil)
	_ op.CanGetPrivateClaimsFromRequest = (*storage)(nil)
)

// resourceKey is the context key of the RFC 8707 resource parameters of a
// request to the provider (Provider.ServeHTTP puts them there; op's
// requests do not carry them).
type resourceKey struct{}

func resourcesFrom(ctx context.Context) []string {
	r, _ := ctx.Value(resourceKey{}).([]string)
	return r
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// signingKey is an op.SigningKey and, for the key set, an op.Key.
type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

// publicKey is the op.Key of the key set.
type publicKey struct{ k *signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return &p.k.key.PublicKey }

// client is an op.Client: confidential (client credentials, a secret) or
// public (authorization code with PKCE, loopback redirects).
type client struct {
	id, secret string
	public     bool
	scopes     []string
}

var _ op.HasRedirectGlobs = (*client)(nil)

func (c *client) GetID() string { return c.id }

func (c *client) RedirectURIs() []string {
	if !c.public {
		return nil
	}
	// A native client's loopback redirect matches on any port (RFC 8252
	// §7.3); the globs let any path through too.
	return []string{"http://127.0.0.1/callback", "http://localhost/callback", "http://[::1]/callback"}
}

func (c *client) RedirectURIGlobs() []string {
	if !c.public {
		return nil
	}
	return []string{"http://127.0.0.1:*/**", "http://localhost:*/**", "http://[[]::1]:*/**"}
}

func (c *client) PostLogoutRedirectURIs() []string     { return nil }
func (c *client) PostLogoutRedirectURIGlobs() []string { return nil }

func (c *client) ApplicationType() op.ApplicationType {
	if c.public {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}

func (c *client) AuthMethod() oidc.AuthMethod {
	if c.public {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

func (c *client) ResponseTypes() []oidc.ResponseType {
	if c.public {
		return []oidc.ResponseType{oidc.ResponseTypeCode}
	}
	return nil
}

func (c *client) GrantTypes() []oidc.GrantType {
	if c.public {
		return []oidc.GrantType{oidc.GrantTypeCode}
	}
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}

func (c *client) LoginURL(id string) string            { return "/login?authRequestID=" + id }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (c *client) DevMode() bool                        { return false }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) IsScopeAllowed(scope string) bool     { return slices.Contains(c.scopes, scope) }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// authRequest is an op.AuthRequest.
type authRequest struct {
	id, clientID, redirectURI, state, nonce string
	scopes                                  []string
	audience                                []string
	responseType                            oidc.ResponseType
	responseMode                            oidc.ResponseMode
	challenge                               *oidc.CodeChallenge
	subject                                 string
	authTime                                time.Time
	done                                    bool
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return a.audience }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// tokenRequest is the op.TokenRequest of a client-credentials grant.
type tokenRequest struct {
	subject  string
	audience []string
	scopes   []string
}

func (t *tokenRequest) GetSubject() string    { return t.subject }
func (t *tokenRequest) GetAudience() []string { return t.audience }
func (t *tokenRequest) GetScopes() []string   { return t.scopes }

// CreateAuthRequest implements op.Storage. The access token's audience is
// the request's resource parameters (RFC 8707) and the client (the ID
// token's).
func (s *storage) CreateAuthRequest(ctx context.Context, r *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	if slices.Contains(r.Prompt, oidc.PromptNone) {
		return nil, oidc.ErrLoginRequired()
	}
	a := &authRequest{
		id: newID(), clientID: r.ClientID, redirectURI: r.RedirectURI, state: r.State, nonce: r.Nonce,
		scopes: r.Scopes, responseType: r.ResponseType, responseMode: r.ResponseMode, subject: userID,
		audience: append(slices.Clone(resourcesFrom(ctx)), r.ClientID),
	}
	if r.CodeChallenge != "" {
		a.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs[a.id] = a
	return a, nil
}

// approve marks the auth request id as logged in by user.
func (s *storage) approve(id, user string) error {
	if !s.users[user] {
		return fmt.Errorf("no user %q", user)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.reqs[id]
	if !ok {
		return fmt.Errorf("no auth request %q", id)
	}
	a.subject, a.done, a.authTime = user, true, time.Now()
	return nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.reqs[id]
	if !ok {
		return nil, errors.New("auth request not found")
	}
	return a, nil
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("code invalid or expired")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.reqs, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return newID(), time.Now().Add(s.lifetime), nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("refresh tokens are not supported")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error { return nil }

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return &s.key, nil }

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{&s.key}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("client not found")
	}
	return c, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	c, ok := s.clients[id]
	if !ok || c.public || c.secret != secret {
		return errors.New("wrong client or secret")
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, _ []string) error {
	info.Subject = req.GetSubject()
	info.PreferredUsername = req.GetSubject()
	return nil
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, _, subject, _ string) error {
	info.Subject = subject
	info.PreferredUsername = subject
	return nil
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("introspection is not supported")
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

// GetPrivateClaimsFromRequest implements op.CanGetPrivateClaimsFromRequest:
// the access token's scope claim (RFC 9068 §2.2.3), which op leaves out.
func (s *storage) GetPrivateClaimsFromRequest(_ context.Context, req op.TokenRequest, _ []string) (map[string]any, error) {
	if sc := req.GetScopes(); len(sc) > 0 {
		return map[string]any{"scope": oidc.SpaceDelimitedArray(sc).String()}, nil
	}
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile grants are not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("JWT profile grants are not supported")
}

func (s *storage) Health(context.Context) error { return nil }

// ClientCredentials implements op.ClientCredentialsStorage.
func (s *storage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok || c.public || c.secret != secret {
		return nil, errors.New("wrong client or secret")
	}
	return c, nil
}

// ClientCredentialsTokenRequest implements op.ClientCredentialsStorage:
// the subject is the client, the audience the resource parameters (else
// Options.Audience, else the client), the scopes those asked that the
// client may have.
func (s *storage) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("client not found")
	}
	aud := slices.Clone(resourcesFrom(ctx))
	if len(aud) == 0 {
		aud = []string{cmp.Or(s.audience, id)}
	}
	var granted []string
	for _, sc := range scopes {
		if c.IsScopeAllowed(sc) || sc == oidc.ScopeOpenID {
			granted = append(granted, sc)
		}
	}
	return &tokenRequest{subject: id, audience: aud, scopes: granted}, nil
}
