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
	// Signed says the card carried signatures and one verified.
	Signed bool
	// Raw is the card as served (capped at the client's card limit).
	Raw json.RawMessage
	// FetchedAt is when the card was read.
	FetchedAt time.Time
}

// Skill is one skill of a Card.
type Skill struct {
	ID, Name, Description string
	Tags                  []string
	Examples              []string
}
