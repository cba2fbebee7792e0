// Package a2aclient is the node's client of A2A agents that are not mcpv2
// nodes (issue 23): it resolves and verifies an agent's card, speaks the
// version the agent speaks (A2A v1.0 or v0.3, JSON-RPC), sends a message,
// streams or polls the task to a terminal state, and maps parts and states
// both ways. Every request it makes keeps to the outbound address scope.
package a2aclient

import (
	"encoding/json"
	"time"
)

// Card is an external A2A agent's card as the client read it, in either
// protocol version.
type Card struct {
	// URL is the base URL the card was resolved for; CardURL is where the
	// card was found (/.well-known/agent-card.json, or the v0.3 agent.json).
	URL     string
	CardURL string
	// Name, Description and Version are the card's.
	Name, Description, Version string
	// ProtocolVersion is the version the client will speak: "1.0" or "0.3".
	ProtocolVersion string
	// Endpoint is the JSON-RPC URL messages are sent to.
	Endpoint string
	// Streaming says the agent streams (message/stream, SendStreamingMessage).
	Streaming bool
	// Skills are the card's skills.
	Skills []Skill
	// Signed says the card carried signatures and one verified; Key says
	// with what key, and so what that proves (see KeySource). Only
	// KeyPinned and KeyPeerID tie the card to someone: an embedded or a
	// jku key is whatever the card's server chose, so it proves the card
	// is intact, not who wrote it.
	Signed bool
	Key    KeySource
	// Signer names the key's owner where the signature does: the PeerID
	// (KeyPeerID) or the jku URL (KeyJKU).
	Signer string
	// Raw is the card as served (capped at the client's card limit).
	Raw json.RawMessage
	// FetchedAt is when the card was read.
	FetchedAt time.Time
}

// KeySource is where the key that verified a card's signature came from.
type KeySource string

// The key sources of a Card's signature.
const (
	// KeyNone: the card is unsigned.
	KeyNone KeySource = ""
	// KeyEmbedded: the jwk in the signature's own header. Self-asserted:
	// anyone can sign any card so.
	KeyEmbedded KeySource = "embedded"
	// KeyJKU: fetched from the jku URL the signature names (https when the
	// card came over https). Self-asserted: the card's server picks the URL.
	KeyJKU KeySource = "jku"
	// KeyPeerID: the Ed25519 key of the PeerID in the signature's kid (an
	// mcpv2 node's card). It proves the holder of that PeerID signed the
	// card, which matters when the caller knows that PeerID.
	KeyPeerID KeySource = "peer-id"
	// KeyPinned: the key the caller pinned (WithCardKey). The card is the
	// key holder's.
	KeyPinned KeySource = "pinned"
)

// SignatureSummary says in a few words what the card's signature proves:
// "unsigned"; "self-signed (key embedded in the card): intact, author
// unproven" or the same for a jku key; "signed by PeerID <id>"; "signed
// with the pinned key".
func (c *Card) SignatureSummary() string {
	switch {
	case !c.Signed:
		return "unsigned"
	case c.Key == KeyEmbedded:
		return "self-signed (key embedded in the card): intact, author unproven"
	case c.Key == KeyJKU:
		return "self-signed (key from the card's jku " + c.Signer + "): intact, author unproven"
	case c.Key == KeyPeerID:
		return "signed by PeerID " + c.Signer
	case c.Key == KeyPinned:
		return "signed with the pinned key"
	}
	return "signed (key of unknown origin)"
}

// origin is the URL the card was resolved for (the one WithHeaders'
// headers belong to): URL, else CardURL.
func (c *Card) origin() string {
	if c.URL != "" {
		return c.URL
	}
	return c.CardURL
}

// Skill is one skill of a Card.
type Skill struct {
	ID, Name, Description string
	Tags                  []string
	Examples              []string
}
