package a2a

import (
	"encoding/json"
	"net"
	"net/url"

	"github.com/mcpv2/mcpv2/protocol"
)

// codeExtendedCardNotConfigured is A2A's
// ExtendedAgentCardNotConfiguredError.
const codeExtendedCardNotConfigured = -32007

// servesExtendedCard says whether a card signed for the edge edgeID ("":
// the node's own) may claim an extended card: only the node's own face
// serves one. A peer's face on another edge answers -32007 (extendedCard).
func (f *Face) servesExtendedCard(edgeID string) bool {
	return edgeID == "" || edgeID == f.b.PeerID()
}

// extendedCard answers GetExtendedAgentCard (v1.0) and
// agent/getAuthenticatedExtendedCard (v0.3): the node's card in the
// request's version as its caller may see it, signed as the public card
// is, its skills only those the node's policy lets the caller run
// (Backend.Permits); an anonymous caller gets the public card. The face of
// a mesh peer has none: what a caller may run there is the peer's to say.
func (f *Face) extendedCard(q *req, params json.RawMessage) {
	var p struct {
		Tenant   string `json:"tenant"`
		Metadata any    `json:"metadata"`
	}
	if e := decodeParams(params, &p); e != nil {
		q.fail(e)
		return
	}
	if f.ownerPrefix != "" {
		q.fail(rpcErrf(codeExtendedCardNotConfigured, "extended agent card not configured: a mesh peer's face on this edge has none; "+
			"its public card is at %s on this path", CardPath))
		return
	}
	var keep func(string) bool
	if q.c.Kind != protocol.CallerAnonymous {
		c := q.c
		keep = func(skill string) bool { return f.b.Permits(c, skill) }
	}
	base := q.base
	if base == "" {
		base = f.advertisedBase()
	}
	acc := f.accepts()
	var card map[string]any
	var err error
	if q.v == "1.0" {
		card, err = f.cardV1With(base, "", acc, keep)
	} else {
		card, err = f.cardV03With(base, "", acc, keep)
	}
	if err != nil {
		f.log.Error("a2a extended card", "err", err)
		q.fail(rpcErrf(protocol.CodeInternal, "internal error: the extended card could not be signed"))
		return
	}
	q.reply(card)
}

// advertisedBase is the http(s)://host:port of the edge's advertised
// address, "" without an edge.
func (f *Face) advertisedBase() string {
	if f.e == nil {
		return ""
	}
	u, err := url.Parse(f.e.URLs()[0])
	if err != nil {
		return "http://" + f.e.Addr().String()
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), u.Port())
}
