package a2a

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/internal/cardsig"
	"github.com/mcpv2/mcpv2/protocol"
)

// LibP2PBinding is the protocolBinding of the card's interfaces for A2A
// over libp2p (A2A spec §5.8: a binding of one's own is named by a URI):
// the JSON-RPC binding over HTTP/1.1 on a libp2p stream of protocol
// LibP2PProtocol, the caller its PeerID (libp2p.go; docs/a2a.md "A2A over
// libp2p"). Its url is a multiaddr with /p2p/PeerID.
const LibP2PBinding = "https://github.com/mcpv2/mcpv2/blob/main/docs/a2a.md#a2a-over-libp2p"

// Card fields the face sets.
var (
	inputModes  = []string{"text/plain", "application/json"}
	outputModes = []string{"application/json", "text/plain"}
)

// cardV1 is the node's A2A card in v1.0 form, for an A2A URL of base
// (http://host:port; "" for a node without an edge: its libp2p interfaces
// only), signed, naming the credentials acc of the edge that serves it
// (nil: see securityOf).
func (f *Face) cardV1(base, edgeID string, acc *edge.Accepts) (map[string]any, error) {
	return f.cardV1With(base, edgeID, acc, nil)
}

// cardV1With is cardV1 listing only the skills keep keeps (nil: all).
func (f *Face) cardV1With(base, edgeID string, acc *edge.Accepts, keep func(string) bool) (map[string]any, error) {
	c := f.b.Card()
	var ifaces []any
	if base != "" {
		ifaces = append(ifaces,
			map[string]any{"url": base + Path, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
			map[string]any{"url": base + Path, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
			map[string]any{"url": base + RESTPath, "protocolBinding": RESTBinding, "protocolVersion": "1.0"},
			map[string]any{"url": base + RESTPath, "protocolBinding": RESTBinding, "protocolVersion": "0.3"})
	}
	if base != "" {
		ifaces = append(ifaces, grpcInterfaces(base)...)
	}
	for _, a := range f.p2pAddrs(c, base) {
		ifaces = append(ifaces,
			map[string]any{"url": a, "protocolBinding": LibP2PBinding, "protocolVersion": "1.0"},
			map[string]any{"url": a, "protocolBinding": LibP2PBinding, "protocolVersion": "0.3"})
	}
	caps := map[string]any{"streaming": true}
	if f.servesExtendedCard(edgeID) {
		caps["extendedAgentCard"] = true
	}
	card := map[string]any{
		"name": nonEmpty(c.Name, "mcpv2 agent"), "description": nonEmpty(c.Description, "An mcpv2 agent."), "version": nonEmpty(c.Version, "dev"),
		"supportedInterfaces": ifaces,
		"capabilities":        f.capabilities(caps, base, edgeID),
		"defaultInputModes":   inputModes, "defaultOutputModes": outputModes,
		"skills": cardSkills(c, keep),
	}
	sec := securityOf(acc)
	sec.p2pOnly = base == ""
	card["securitySchemes"], card["securityRequirements"] = sec.v1()
	return card, f.sign(card)
}

// cardV03 is the node's A2A card in v0.3 form, signed over its own JSON,
// naming the credentials acc of the edge that serves it.
func (f *Face) cardV03(base, edgeID string, acc *edge.Accepts) (map[string]any, error) {
	return f.cardV03With(base, edgeID, acc, nil)
}

// cardV03With is cardV03 listing only the skills keep keeps (nil: all).
// Without an edge (base "") its url is its first libp2p interface, which
// is never empty (p2pAddrs): a v0.3 card must name one.
func (f *Face) cardV03With(base, edgeID string, acc *edge.Accepts, keep func(string) bool) (map[string]any, error) {
	c := f.b.Card()
	url, transport := base+Path, "JSONRPC"
	more := []any{}
	if base != "" {
		more = append(more, map[string]any{"url": base + Path, "transport": "JSONRPC"}, map[string]any{"url": base + RESTPath, "transport": RESTBinding}, grpcInterfaceV03(base))
	}
	for _, a := range f.p2pAddrs(c, base) {
		more = append(more, map[string]any{"url": a, "transport": LibP2PBinding})
	}
	if base == "" {
		url, transport = more[0].(map[string]any)["url"].(string), LibP2PBinding
	}
	card := map[string]any{
		"protocolVersion": "0.3.0",
		"name":            nonEmpty(c.Name, "mcpv2 agent"), "description": nonEmpty(c.Description, "An mcpv2 agent."), "version": nonEmpty(c.Version, "dev"),
		"url": url, "preferredTransport": transport,
		"additionalInterfaces": more,
		"capabilities":         f.capabilities(map[string]any{"streaming": true, "stateTransitionHistory": false}, base, edgeID),
		"defaultInputModes":    inputModes, "defaultOutputModes": outputModes,
		"skills": cardSkills(c, keep),
	}
	if f.servesExtendedCard(edgeID) {
		card["supportsAuthenticatedExtendedCard"] = true
	}
	sec := securityOf(acc)
	sec.p2pOnly = base == ""
	card["securitySchemes"], card["security"] = sec.v03()
	return card, f.sign(card)
}

// The card's security schemes, by name: an mcpv2 edge session (every edge
// takes one: a secret holder's, or one GET /mcpv2/session issued), an API
// key, and an OpenID Connect issuer's access token (OIDCScheme), each as
// Authorization: Bearer.
const (
	SessionScheme = "mcpv2Session"
	KeyScheme     = "apiKey"
	// PeerScheme is the only scheme of a card without an edge (its
	// interfaces are A2A over libp2p only): the caller is the PeerID that
	// the libp2p connection's handshake proved, as a client certificate
	// of mutual TLS would, so the card names it a mutual TLS scheme; no
	// header carries a credential.
	PeerScheme = "libp2pPeer"
)

// OIDCScheme is the name of the security scheme of the i-th (from 0)
// OpenID Connect issuer an edge accepts: "oidc", then "oidc2", "oidc3"…
func OIDCScheme(i int) string {
	if i == 0 {
		return "oidc"
	}
	return fmt.Sprintf("oidc%d", i+1)
}

// OIDCDiscoveryURL is the OpenID Connect discovery document of issuer
// (OpenID Connect Discovery 1.0 §4): the card's openIdConnectUrl.
func OIDCDiscoveryURL(issuer string) string {
	return strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
}

// security is what a card says of the credentials of the edge that
// serves it: the schemes, each one a requirement met alone, and whether a
// caller may come with none.
type security struct {
	keys      bool
	issuers   []string
	anonymous bool
	// p2pOnly: the card lists A2A over libp2p only (no edge), where no
	// edge session, key or token is taken: its one scheme is PeerScheme.
	p2pOnly bool
}

// securityOf is the card's security for an edge that accepts acc. nil
// means the serving edge's credentials are not known here (a card this
// node signs for another edge, asked over the mesh): it names only the
// edge session, which every edge takes, and claims no access without a
// credential.
func securityOf(acc *edge.Accepts) security {
	if acc == nil {
		return security{}
	}
	return security{keys: acc.Keys, issuers: acc.OIDCIssuers, anonymous: acc.Anonymous}
}

const (
	sessionDesc = "an mcpv2 edge session as Authorization: Bearer: a secret holder's, or one GET /mcpv2/session on this host issues"
	keyDesc     = "an API key of this node (mcpv2 key add) as Authorization: Bearer"
	oidcDesc    = "an access token of the OpenID Connect issuer %s as Authorization: Bearer"
	peerDesc    = "A2A over libp2p: the caller is the PeerID its libp2p connection proved (Noise or TLS handshake); the node grants it what its policy grants that PeerID or \"*\""
)

// v1 is s in v1.0 form: securitySchemes and securityRequirements. A
// requirement names its scheme with no scopes ({} is the empty StringList
// in the schema's JSON); the empty requirement {} says that a caller may
// come with no credential. No member is at its default value (@a2a-js/sdk
// writes none).
func (s security) v1() (map[string]any, []any) {
	if s.p2pOnly {
		return map[string]any{PeerScheme: map[string]any{"mtlsSecurityScheme": map[string]any{"description": peerDesc}}},
			[]any{map[string]any{"schemes": map[string]any{PeerScheme: map[string]any{}}}}
	}
	schemes := map[string]any{SessionScheme: map[string]any{"httpAuthSecurityScheme": map[string]any{
		"scheme": "Bearer", "bearerFormat": "mcpv2 edge session", "description": sessionDesc}}}
	reqs := []any{map[string]any{"schemes": map[string]any{SessionScheme: map[string]any{}}}}
	if s.keys {
		schemes[KeyScheme] = map[string]any{"httpAuthSecurityScheme": map[string]any{
			"scheme": "Bearer", "bearerFormat": "mcpv2 API key", "description": keyDesc}}
		reqs = append(reqs, map[string]any{"schemes": map[string]any{KeyScheme: map[string]any{}}})
	}
	for i, iss := range s.issuers {
		schemes[OIDCScheme(i)] = map[string]any{"openIdConnectSecurityScheme": map[string]any{
			"openIdConnectUrl": OIDCDiscoveryURL(iss), "description": fmt.Sprintf(oidcDesc, iss)}}
		reqs = append(reqs, map[string]any{"schemes": map[string]any{OIDCScheme(i): map[string]any{}}})
	}
	if s.anonymous {
		reqs = append(reqs, map[string]any{})
	}
	return schemes, reqs
}

// v03 is s in v0.3 form (OpenAPI's): securitySchemes and security, each
// requirement a scheme with its (empty) list of scopes, and {} for no
// credential.
func (s security) v03() (map[string]any, []any) {
	if s.p2pOnly {
		return map[string]any{PeerScheme: map[string]any{"type": "mutualTLS", "description": peerDesc}}, []any{map[string]any{PeerScheme: []any{}}}
	}
	schemes := map[string]any{SessionScheme: map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "mcpv2 edge session", "description": sessionDesc}}
	reqs := []any{map[string]any{SessionScheme: []any{}}}
	if s.keys {
		schemes[KeyScheme] = map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "mcpv2 API key", "description": keyDesc}
		reqs = append(reqs, map[string]any{KeyScheme: []any{}})
	}
	for i, iss := range s.issuers {
		schemes[OIDCScheme(i)] = map[string]any{"type": "openIdConnect", "openIdConnectUrl": OIDCDiscoveryURL(iss), "description": fmt.Sprintf(oidcDesc, iss)}
		reqs = append(reqs, map[string]any{OIDCScheme(i): []any{}})
	}
	if s.anonymous {
		reqs = append(reqs, map[string]any{})
	}
	return schemes, reqs
}

// EdgeExtension is the URI of the card's capability extension that names,
// in its params {"edge": PeerID}, the edge a card was made for: a node
// signs a card for another edge's /peers/<its PeerID> face only for that
// edge, asked over the mesh (agent/a2a-card).
const EdgeExtension = "urn:mcpv2:a2a:edge:v1"

// capabilities is caps with pushNotifications, the PushExtension naming
// the JWKS at base and the issuer of the notifications' JWTs (the edge that
// serves the card sends them: edgeID, or this node) — without an edge
// (base "") nothing serves a JWKS URL, so the issuer's JWK Set is inline in
// the params ("jwks", the key its PeerID holds) — and the EdgeExtension
// naming edge, when edge is set. It writes no member at its default value
// ("required": false): a verifier that canonicalizes the card through the
// v1.0 schema (@a2a-js/sdk) drops those, and the signature would no longer
// match.
func (f *Face) capabilities(caps map[string]any, base, edgeID string) map[string]any {
	caps["pushNotifications"] = f.push != nil
	var exts []any
	if f.push != nil {
		issuer := nonEmpty(edgeID, f.b.PeerID())
		ext := map[string]any{"uri": PushExtension,
			"description": "push notifications carry Authorization: Bearer, a JWT (EdDSA) of this issuer, its key at jwksUrl, unless the config gave its own credentials",
			"params":      map[string]any{"jwksUrl": base + JWKSPath, "issuer": issuer}}
		if base == "" {
			ext["description"] = "push notifications carry Authorization: Bearer, a JWT (EdDSA) of this issuer, its key in jwks (the key its PeerID holds), unless the config gave its own credentials"
			ext["params"] = map[string]any{"jwks": inlineJWKS(issuer), "issuer": issuer}
		}
		exts = append(exts, ext)
	}
	if edgeID != "" {
		exts = append(exts, map[string]any{"uri": EdgeExtension,
			"description": "the mcpv2 edge this card was signed for: the node serves its card only to the edges that front it",
			"params":      map[string]any{"edge": edgeID}})
	}
	if len(exts) > 0 {
		caps["extensions"] = exts
	}
	return caps
}

// cardSkills are the card's skills: those of c that keep keeps (nil:
// all).
func cardSkills(c protocol.AgentCard, keep func(string) bool) []any {
	out := make([]any, 0, len(c.Skills))
	for _, s := range c.Skills {
		if keep != nil && !keep(s.Name) {
			continue
		}
		tags := s.Tags
		if len(tags) == 0 {
			tags = []string{"mcpv2"}
		}
		out = append(out, map[string]any{"id": s.Name, "name": s.Name, "description": nonEmpty(s.Description, s.Name), "tags": tags})
	}
	return out
}

// inlineJWKS is the JWK Set of the PeerID id as a JSON object for a card
// (jwks), nil when id holds no Ed25519 key (never for a node's own).
func inlineJWKS(id string) map[string]any {
	m, _ := jwks(id)
	return m
}

// p2pAddrs are the card's A2A-over-libp2p URLs: libp2pAddrs, or, for a
// card without an edge (base "") when the node has no address but
// loopback, the bare /p2p/PeerID, a multiaddr a libp2p client dials by
// peer routing (the DHT, or the connection it already has), so that the
// card names at least one interface.
func (f *Face) p2pAddrs(c protocol.AgentCard, base string) []string {
	addrs := libp2pAddrs(c)
	if len(addrs) == 0 && base == "" {
		addrs = []string{"/p2p/" + f.b.PeerID()}
	}
	return addrs
}

// libp2pAddrs are the card's multiaddrs with their /p2p/PeerID, loopback
// ones left out.
func libp2pAddrs(c protocol.AgentCard) []string {
	var out []string
	for _, a := range c.Addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			continue
		}
		if ip, err := m.ValueForProtocol(ma.P_IP4); err == nil && net.ParseIP(ip).IsLoopback() {
			continue
		}
		if ip, err := m.ValueForProtocol(ma.P_IP6); err == nil && net.ParseIP(ip).IsLoopback() {
			continue
		}
		if !strings.Contains(a, "/p2p/") {
			a += "/p2p/" + c.PeerID
		}
		out = append(out, a)
	}
	return out
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// signHeader is the JWS protected header of the node's card signatures:
// EdDSA with the node's Ed25519 key, whose PeerID is the kid, so that
// anyone verifies the card from the PeerID alone.
type signHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// sign adds the card's signature: a JWS (RFC 7515) with a detached
// payload, the JCS canonical JSON of the card's other fields.
func (f *Face) sign(card map[string]any) error {
	payloads, err := cardsig.Payloads(card)
	if err != nil {
		return fmt.Errorf("a2a: card: %w", err)
	}
	payload := payloads[0]
	h, _ := json.Marshal(signHeader{Alg: "EdDSA", Kid: f.b.PeerID(), Typ: "JOSE"})
	prot := base64.RawURLEncoding.EncodeToString(h)
	sig, err := f.b.Sign([]byte(prot + "." + base64.RawURLEncoding.EncodeToString(payload)))
	if err != nil {
		return fmt.Errorf("a2a: sign card: %w", err)
	}
	card["signatures"] = []any{map[string]any{"protected": prot, "signature": base64.RawURLEncoding.EncodeToString(sig)}}
	return nil
}

// ErrBadSignature is wrapped by VerifyCard when no signature of a card
// verifies.
var ErrBadSignature = errors.New("card signature does not verify")

// VerifyCard checks an A2A card's signatures: at least one must be an
// EdDSA JWS whose kid is a PeerID with an Ed25519 key, over the JCS
// canonical JSON of the card without its signatures and its empty members
// (canonical), or, as older nodes signed, with them. It returns the
// signer's PeerID.
func VerifyCard(card []byte) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(card, &m); err != nil {
		return "", fmt.Errorf("a2a: verify card: not a JSON object: %w", err)
	}
	sigs, _ := m["signatures"].([]any)
	if len(sigs) == 0 {
		return "", fmt.Errorf("a2a: verify card: no signatures: %w", ErrBadSignature)
	}
	payloads, err := cardsig.Payloads(m)
	if err != nil {
		return "", fmt.Errorf("a2a: verify card: %w", err)
	}
	var last error
	for _, s := range sigs {
		sm, _ := s.(map[string]any)
		prot, _ := sm["protected"].(string)
		sig, _ := sm["signature"].(string)
		for _, payload := range payloads { // the second: as older nodes signed
			id, err := verifyJWS(prot, sig, payload)
			if err == nil {
				return id, nil
			}
			last = err
		}
	}
	return "", fmt.Errorf("a2a: verify card: %w: %v", ErrBadSignature, last)
}

func verifyJWS(prot, sig string, payload []byte) (string, error) {
	hb, err := base64.RawURLEncoding.DecodeString(prot)
	if err != nil {
		return "", fmt.Errorf("protected header is not base64url")
	}
	var h signHeader
	if err := json.Unmarshal(hb, &h); err != nil || h.Alg != "EdDSA" {
		return "", fmt.Errorf("protected header: want alg EdDSA")
	}
	id, err := peer.Decode(h.Kid)
	if err != nil {
		return "", fmt.Errorf("kid %q is not a PeerID", protocol.Clip(h.Kid, 80))
	}
	pub, err := id.ExtractPublicKey()
	if err != nil || pub.Type() != crypto.Ed25519 {
		return "", fmt.Errorf("kid %s holds no Ed25519 key", id)
	}
	raw, err := pub.Raw()
	if err != nil {
		return "", err
	}
	sb, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return "", fmt.Errorf("signature is not base64url")
	}
	if !ed25519.Verify(ed25519.PublicKey(raw), []byte(prot+"."+base64.RawURLEncoding.EncodeToString(payload)), sb) {
		return "", errors.New("the signature does not match the card")
	}
	return id.String(), nil
}
