package protocol

import (
	"encoding/json"
	"time"
)

// ExternalAgent is an A2A agent outside the mesh that a node knows by its
// URL (issue 23): registered by the operator (mcpv2 agents add), its card
// fetched and health-checked on a schedule, or found by the REST face's
// discover route and only cached for a while (Discovered). Faces render it; only the node changes it.
type ExternalAgent struct {
	// URL is the agent's base URL, as registered.
	URL string `json:"url"`
	// Name, Description and Version are the card's.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version,omitempty"`
	// ProtocolVersion is the A2A version the node speaks to it: "1.0" or "0.3".
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// Skills are the card's skills (no input schema: A2A skills have none).
	Skills []SkillDescriptor `json:"skills"`
	// Healthy says the last health check reached the agent and read a
	// valid card; LastChecked is when it ran and LastError why it failed.
	Healthy     bool      `json:"healthy"`
	LastChecked time.Time `json:"last_checked"`
	LastError   string    `json:"last_error,omitempty"`
	// Signed says the card carried a signature and it verified; Signature
	// says what that proves (a2aclient.Card.SignatureSummary): a key the
	// card itself names only proves the card is intact, not who wrote it.
	Signed    bool   `json:"signed"`
	Signature string `json:"signature,omitempty"`
	// Bridged says this node publishes the agent into the mesh's DHT and
	// answers calls to it; BridgedBy is that node's PeerID.
	Bridged   bool   `json:"bridged"`
	BridgedBy string `json:"bridged_by,omitempty"`
	// Discovered marks an agent that the REST face's discover route found:
	// it is only cached for a TTL, neither registered nor bridged nor
	// health-checked (only the operator's mcpv2 agents add registers).
	Discovered bool `json:"discovered,omitempty"`
	// Card is the card as the agent served it. The node's list and
	// discover answers leave it out (a card may be up to 1 MiB).
	Card json.RawMessage `json:"card,omitempty"`
}
