package a2aclient

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/internal/cardsig"
	"github.com/mcpv2/mcpv2/internal/netscope"
)

// Well-known card paths: v1.0's (also v0.3.x's later releases) and the
// older v0.3 one.
const (
	CardPath    = "/.well-known/agent-card.json"
	CardPathV03 = "/.well-known/agent.json"
)

// Caps of what the client decodes.
const (
	// DefaultMaxCard caps a card's body (WithMaxCard).
	DefaultMaxCard = 1 << 20
	// maxJWKS caps a JWK set fetched from a signature's jku.
	maxJWKS = 64 << 10
	// maxSkills caps the skills read from a card.
	maxSkills = 256
	// maxSignatures caps the signatures tried on a card.
	maxSignatures = 8
	// maxCardKey caps a pinned key's text (ParseCardKey).
	maxCardKey = 16 << 10
)

// ErrBadSignature is wrapped when a card carries signatures and none
// verifies.
var ErrBadSignature = errors.New("card signature does not verify")

// wireCard is the part of a card (either version) the client reads.
type wireCard struct {
	Name                string `json:"name"`
	Description         string `json:"description"`
	Version             string `json:"version"`
	SupportedInterfaces []struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"supportedInterfaces"`
	// v0.3
	URL                  string `json:"url"`
	PreferredTransport   string `json:"preferredTransport"`
	ProtocolVersion      string `json:"protocolVersion"`
	AdditionalInterfaces []struct {
		URL       string `json:"url"`
		Transport string `json:"transport"`
	} `json:"additionalInterfaces"`
	Capabilities struct {
		Streaming bool `json:"streaming"`
	} `json:"capabilities"`
	Skills []struct {
		ID          string   `json:"id"`
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Tags        []string `json:"tags"`
		Examples    []string `json:"examples"`
	} `json:"skills"`
	Signatures []json.RawMessage `json:"signatures"`
}

// ParseCard decodes an agent card (either version) read from cardURL and
// decides the version the client will speak: v1.0 when
// supportedInterfaces has a JSONRPC interface of protocolVersion 1.x,
// else v0.3 when it has one of 0.3.x, or when the card has a url whose
// preferredTransport is JSONRPC (or unset) and a protocolVersion of 0.3.x
// (or none). The endpoint is resolved against cardURL and must be http or
// https. It does not verify signatures (Client.Card does). Errors name
// what was wrong.
func ParseCard(raw []byte, cardURL string) (*Card, error) {
	if len(raw) > DefaultMaxCard {
		return nil, fmt.Errorf("card is larger than %d bytes", DefaultMaxCard)
	}
	var w wireCard
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("card is not a JSON object of an A2A agent card: %w", err)
	}
	base, err := url.Parse(cardURL)
	if err != nil {
		return nil, fmt.Errorf("card URL %q: %w", cardURL, err)
	}
	c := &Card{CardURL: cardURL, Name: w.Name, Description: w.Description, Version: w.Version, Streaming: w.Capabilities.Streaming,
		Raw: append(json.RawMessage(nil), raw...)}
	var seen []string
	endpoint := ""
	for _, want := range []string{"1.", "0.3"} {
		for _, i := range w.SupportedInterfaces {
			seen = append(seen, i.ProtocolBinding+" "+i.ProtocolVersion)
			if strings.EqualFold(i.ProtocolBinding, "JSONRPC") && (i.ProtocolVersion == strings.TrimSuffix(want, ".") || strings.HasPrefix(i.ProtocolVersion, want)) && i.URL != "" {
				endpoint, c.ProtocolVersion = i.URL, map[string]string{"1.": "1.0", "0.3": "0.3"}[want]
				break
			}
		}
		if endpoint != "" {
			break
		}
	}
	if endpoint == "" && w.URL != "" && (w.ProtocolVersion == "" || strings.HasPrefix(w.ProtocolVersion, "0.3")) {
		if w.PreferredTransport == "" || strings.EqualFold(w.PreferredTransport, "JSONRPC") {
			endpoint, c.ProtocolVersion = w.URL, "0.3"
		} else {
			for _, ai := range w.AdditionalInterfaces {
				if strings.EqualFold(ai.Transport, "JSONRPC") && ai.URL != "" {
					endpoint, c.ProtocolVersion = ai.URL, "0.3"
					break
				}
			}
		}
		if endpoint == "" {
			seen = append(seen, "url with preferredTransport "+w.PreferredTransport)
		}
	} else if endpoint == "" && w.URL != "" {
		seen = append(seen, "url with protocolVersion "+w.ProtocolVersion)
	}
	if endpoint == "" {
		if len(seen) == 0 {
			return nil, errors.New("card names no interface (neither supportedInterfaces nor url)")
		}
		return nil, fmt.Errorf("card offers no JSON-RPC interface of A2A 1.0 or 0.3 (it offers: %s)", clip(strings.Join(seen, "; "), 200))
	}
	eu, err := base.Parse(endpoint)
	if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
		return nil, fmt.Errorf("card's JSON-RPC endpoint %q is not an http(s) URL", clip(endpoint, 200))
	}
	if base.Scheme == "https" && eu.Scheme != "https" {
		return nil, fmt.Errorf("card served over https names the plain-http endpoint %q: refused", clip(endpoint, 200))
	}
	c.Endpoint = eu.String()
	for i, s := range w.Skills {
		if i == maxSkills {
			break
		}
		c.Skills = append(c.Skills, Skill{ID: s.ID, Name: s.Name, Description: s.Description, Tags: s.Tags, Examples: s.Examples})
	}
	return c, nil
}

// cardCandidates are the URLs a card is looked for at, for a user's URL:
// the URL itself when it names a .json file, else the well-known paths
// under its path (when it has one) and under its origin.
func cardCandidates(u *url.URL) []string {
	if strings.HasSuffix(u.Path, ".json") {
		return []string{u.String()}
	}
	origin := u.Scheme + "://" + u.Host
	var out []string
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		out = append(out, origin+p+CardPath, origin+p+CardPathV03)
	}
	return append(out, origin+CardPath, origin+CardPathV03)
}

// Card resolves the card of the agent at rawURL: the URL itself when it
// names a .json card, else /.well-known/agent-card.json (asked for with
// A2A-Version 1.0, then without, which a v0.3 agent answers), then the
// v0.3 /.well-known/agent.json. When the card carries signatures, one must
// verify (JWS over the JCS canonical card without its signatures, A2A
// §8.4), with the key pinned by WithCardKey, else with the key in its
// header's jwk, from its jku (fetched through the same client, without
// WithHeaders' headers; https when the card came over https), or, for an
// mcpv2 node's card, the Ed25519 key of the PeerID its kid names; else
// Card fails with ErrBadSignature. Card.Key says which: only a pinned key
// or a PeerID the caller knows says who wrote the card. The card's
// requests carry WithHeaders' headers (the card is at rawURL's origin);
// a redirect to another origin is refused.
func (c *Client) Card(ctx context.Context, rawURL string) (*Card, error) {
	u, err := CheckURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("a2a agent %w", err)
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	var errs []string
	for _, cu := range cardCandidates(u) {
		versions := []string{""}
		if strings.HasSuffix(cu, CardPath) {
			versions = []string{"1.0", ""}
		}
		for _, v := range versions {
			raw, status, err := c.get(ctx, cu, v, c.cfg.maxCard, true)
			if err != nil {
				if ctx.Err() != nil || status == 0 {
					return nil, fmt.Errorf("a2a agent %s: card: %w", rawURL, err)
				}
				errs = append(errs, fmt.Sprintf("%s: %v", cu, err))
				continue
			}
			card, err := ParseCard(raw, cu)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", cu, err))
				continue
			}
			card.URL, card.FetchedAt = rawURL, time.Now()
			if err := c.verify(ctx, card); err != nil {
				return nil, fmt.Errorf("a2a agent %s: card %s: %w", rawURL, cu, err)
			}
			return card, nil
		}
	}
	return nil, fmt.Errorf("a2a agent %s: no A2A agent card found (%s)", rawURL, strings.Join(errs, "; "))
}

// CheckURL parses an agent's URL (netscope.CheckURL: http or https, a
// host, no credentials). Errors name the URL.
func CheckURL(rawURL string) (*url.URL, error) {
	u, err := netscope.CheckURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("URL %q: %w", redacted(rawURL), err)
	}
	return u, nil
}

// redacted is raw without a password, clipped.
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return clip(u.Redacted(), 200)
	}
	return clip(raw, 200)
}

// get GETs u (with A2A-Version: version when set) and returns its body,
// capped at limit; status is the HTTP status (0: no answer). The
// WithHeaders headers go along only with keys (a card at the origin the
// caller named).
func (c *Client) get(ctx context.Context, u, version string, limit int64, keys bool) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header = http.Header{}
	if keys {
		req.Header = c.cfg.headers.Clone()
	}
	req.Header.Set("Accept", "application/json")
	if version != "" {
		req.Header.Set(versionHeader, version)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, fmt.Errorf("HTTP status %s", resp.Status)
	}
	if int64(len(body)) > limit {
		return nil, resp.StatusCode, fmt.Errorf("answer is larger than %d bytes", limit)
	}
	return body, resp.StatusCode, nil
}

// wireSignature is one of a card's signatures (a JWS, JSON serialization,
// detached payload).
type wireSignature struct {
	Protected string          `json:"protected"`
	Signature string          `json:"signature"`
	Header    json.RawMessage `json:"header"`
}

// sigHeader is what the client reads of a signature's headers.
type sigHeader struct {
	Alg string           `json:"alg"`
	Kid string           `json:"kid"`
	JKU string           `json:"jku"`
	JWK *jose.JSONWebKey `json:"jwk"`
}

// signatureAlgs are the JWS algorithms accepted on a card.
var signatureAlgs = []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512}

// verify checks card's signatures, if it has any: one must verify. It sets
// card.Signed and card.Key. With a pinned key (WithCardKey) the card must
// be signed, and one signature must verify with that key.
func (c *Client) verify(ctx context.Context, card *Card) error {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(card.Raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("card is not a JSON object: %w", err)
	}
	sigs, _ := m["signatures"].([]any)
	if len(sigs) == 0 {
		if c.cfg.cardKey != nil {
			return fmt.Errorf("%w: the card is unsigned, and a key is pinned for it", ErrBadSignature)
		}
		return nil
	}
	payloads, err := cardsig.Payloads(m)
	if err != nil {
		return err
	}
	var w struct {
		Signatures []wireSignature `json:"signatures"`
	}
	if err := json.Unmarshal(card.Raw, &w); err != nil {
		return fmt.Errorf("card's signatures: %w: %v", ErrBadSignature, err)
	}
	var why []string
	for i, s := range w.Signatures {
		if i == maxSignatures {
			break
		}
		src, signer, err := c.verifyOne(ctx, card, s, payloads)
		if err == nil {
			card.Signed, card.Key, card.Signer = true, src, signer
			return nil
		}
		why = append(why, fmt.Sprintf("signatures[%d]: %v", i, err))
	}
	return fmt.Errorf("%w: %s", ErrBadSignature, strings.Join(why, "; "))
}

// verifyOne checks one signature over either payload and says where its
// key came from, and whose it is (the PeerID, the jku).
func (c *Client) verifyOne(ctx context.Context, card *Card, s wireSignature, payloads [][]byte) (KeySource, string, error) {
	hb, err := base64.RawURLEncoding.DecodeString(s.Protected)
	if err != nil {
		return KeyNone, "", errors.New("protected header is not base64url")
	}
	var h sigHeader
	if err := json.Unmarshal(hb, &h); err != nil {
		return KeyNone, "", fmt.Errorf("protected header: %v", err)
	}
	if h.JWK == nil && h.JKU == "" && len(s.Header) > 0 {
		var uh sigHeader // the unprotected header may name the key
		if json.Unmarshal(s.Header, &uh) == nil {
			h.JWK, h.JKU = uh.JWK, uh.JKU
			if h.Kid == "" {
				h.Kid = uh.Kid
			}
		}
	}
	key, src := c.cfg.cardKey, KeyPinned
	if key == nil {
		if key, src, err = c.signingKey(ctx, card, h); err != nil {
			return KeyNone, "", err
		}
	}
	var last error
	for _, p := range payloads {
		obj, err := jose.ParseDetached(s.Protected+".."+s.Signature, p, signatureAlgs)
		if err != nil {
			return KeyNone, "", fmt.Errorf("not a JWS of an accepted algorithm (%s): %v", clip(h.Alg, 20), err)
		}
		if _, err := obj.Verify(key); err == nil {
			signer := map[KeySource]string{KeyPeerID: h.Kid, KeyJKU: h.JKU}[src]
			return src, clip(signer, 200), nil
		} else {
			last = err
		}
	}
	if src == KeyPinned {
		return KeyNone, "", fmt.Errorf("the signature does not verify with the pinned key: %v", last)
	}
	return KeyNone, "", fmt.Errorf("the signature does not match the card: %v", last)
}

// signingKey is the key a signature names: its jwk, the key of its kid in
// the JWK set at its jku (https when the card came over https; fetched
// without WithHeaders' headers), or the Ed25519 key of the PeerID its kid
// is.
func (c *Client) signingKey(ctx context.Context, card *Card, h sigHeader) (any, KeySource, error) {
	switch {
	case h.JWK != nil:
		if !h.JWK.IsPublic() {
			return nil, KeyNone, errors.New("the jwk in the header is not a public key")
		}
		return h.JWK.Key, KeyEmbedded, nil
	case h.JKU != "":
		u, err := CheckURL(h.JKU)
		if err != nil {
			return nil, KeyNone, fmt.Errorf("jku: %w", err)
		}
		if cu, err := url.Parse(card.CardURL); err == nil && cu.Scheme == "https" && u.Scheme != "https" {
			return nil, KeyNone, fmt.Errorf("jku %s is not https, though the card came over https", u.Redacted())
		}
		body, _, err := c.get(ctx, u.String(), "", maxJWKS, false)
		if err != nil {
			return nil, KeyNone, fmt.Errorf("jku %s: %w", u.Redacted(), err)
		}
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(body, &set); err != nil {
			return nil, KeyNone, fmt.Errorf("jku %s: not a JWK set: %v", u.Redacted(), err)
		}
		keys := set.Key(h.Kid)
		if h.Kid == "" && len(set.Keys) == 1 {
			keys = set.Keys
		}
		if len(keys) == 0 {
			return nil, KeyNone, fmt.Errorf("jku %s has no key %q", u.Redacted(), clip(h.Kid, 80))
		}
		return keys[0].Key, KeyJKU, nil
	}
	id, err := peer.Decode(h.Kid)
	if err != nil {
		return nil, KeyNone, fmt.Errorf("no key to verify with: the header has no jwk or jku, and kid %q is not a PeerID", clip(h.Kid, 80))
	}
	key, err := peerKey(id)
	if err != nil {
		return nil, KeyNone, err
	}
	return key, KeyPeerID, nil
}

// peerKey is the Ed25519 public key a PeerID holds.
func peerKey(id peer.ID) (ed25519.PublicKey, error) {
	pub, err := id.ExtractPublicKey()
	if err != nil || pub.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("PeerID %s holds no Ed25519 key", id)
	}
	raw, err := pub.Raw()
	if err != nil {
		return nil, err
	}
	return ed25519.PublicKey(raw), nil
}

// ParseCardKey reads a key pinned for an agent's card (WithCardKey): a
// PeerID holding an Ed25519 key (an mcpv2 node's), or a public JWK as
// JSON. Errors name what was wrong.
func ParseCardKey(s string) (any, error) {
	if len(s) > maxCardKey {
		return nil, fmt.Errorf("card key is larger than %d bytes", maxCardKey)
	}
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON([]byte(s)); err != nil {
			return nil, fmt.Errorf("card key: not a JWK: %v", err)
		}
		if !k.IsPublic() {
			return nil, errors.New("card key: the JWK is not a public key")
		}
		return k.Key, nil
	}
	id, err := peer.Decode(s)
	if err != nil {
		return nil, fmt.Errorf("card key %q: neither a PeerID nor a JWK (JSON)", clip(s, 80))
	}
	key, err := peerKey(id)
	if err != nil {
		return nil, fmt.Errorf("card key: %w", err)
	}
	return key, nil
}
