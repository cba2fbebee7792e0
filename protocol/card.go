package protocol

import "encoding/json"

// SkillDescriptor describes a skill in tools/list, get_skill and agent cards.
type SkillDescriptor struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Tags        []string        `json:"tags"`
}

// AgentCard is a node's self-description (SPEC §4).
type AgentCard struct {
	Name             string            `json:"name"`
	Description      string            `json:"description"`
	Version          string            `json:"version"`
	PeerID           string            `json:"peer_id"`
	Addrs            []string          `json:"addrs"`
	ProtocolVersions []string          `json:"protocol_versions"`
	Skills           []SkillDescriptor `json:"skills"`
	Capabilities     Capabilities      `json:"capabilities"`
	Endpoints        Endpoints         `json:"endpoints"`
	Seq              uint64            `json:"seq"`
	IssuedAt         int64             `json:"issued_at"`
}

// Capabilities are the card's advertised capabilities.
type Capabilities struct {
	LLMMode   bool     `json:"llm_mode"`
	Providers []string `json:"providers"`
	MaxBatch  int      `json:"max_batch"`
	MTLS      bool     `json:"mtls"`
}

// Endpoints lists the ways to reach the agent other than the mesh.
type Endpoints struct {
	HTTP string `json:"http,omitempty"`
}

// Caller identifies who sent a request to a node.
type Caller struct {
	// ID is the caller's identity: its PeerID on the mesh, "ip:ADDR" on the
	// edge. Policy, rate limits, conversation keys and audit lines use it.
	ID string
	// Via names the face the request came through: "mesh", "http", "mcp".
	Via string
	// Remote is the caller's network address, for the audit log.
	Remote string
	// Trusted means a face already authenticated the caller with a session
	// minted from the node's secret: every skill is granted (the seed's model).
	Trusted bool
}

// FindResult is one ranked answer of a find by skill or tag (SPEC §4).
type FindResult struct {
	Card AgentCard `json:"card"`
	// Score is the rank: skill name match 2.0, tag match 1.5, description
	// word 0.5, reachable now 1.0, summed.
	Score float64 `json:"score"`
	// Reachable says whether the agent could be reached when ranked.
	Reachable bool `json:"reachable"`
}
