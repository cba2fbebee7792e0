package protocol

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// SkillDescriptor describes a skill in tools/list, get_skill and agent cards.
type SkillDescriptor struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Tags        []string        `json:"tags"`
	// ReadOnly says the skill has no side effect: running it twice does
	// what running it once does, so a client may retry or repeat it (the
	// MCP face's readOnlyHint). Absent means unknown, assumed not.
	ReadOnly bool `json:"read_only,omitempty"`
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
	// Bridged lists the A2A agents outside the mesh that this node
	// publishes into it and answers calls to (mcpv2 agents add --bridge,
	// issue 23). It is signed with the card, by this node's key: the card
	// says who bridges each one. Their skills are also in Skills, under the
	// names this node serves them by.
	Bridged []BridgedAgent `json:"bridged,omitempty"`
}

// BridgedAgent is an external A2A agent as the card of the node that
// bridges it lists it.
type BridgedAgent struct {
	// Name and Description are the agent card's; URL is its base URL.
	Name        string `json:"name"`
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	// Skills name the agent's skills as the bridging node serves them (their
	// descriptors are in the card's Skills): the agent's skill id, or
	// "<agent>.<skill>" when that name was taken by a skill of the node's
	// own.
	Skills []string `json:"skills"`
	// Healthy says the bridging node's last health check reached the agent.
	Healthy bool `json:"healthy"`
}

// BridgedSkill returns the bridged agent of card that skill is served
// for, if skill is one of a bridged agent's skills.
func (c AgentCard) BridgedSkill(skill string) (BridgedAgent, bool) {
	for _, b := range c.Bridged {
		if slices.Contains(b.Skills, skill) {
			return b, true
		}
	}
	return BridgedAgent{}, false
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

// CallerKind says how a face authenticated a caller; with the policy it
// decides what the caller may run (SPEC §6). The zero value is the least
// trusted kind, so a face that forgets to set it grants nothing extra.
type CallerKind int

const (
	// CallerAnonymous is an edge session issued by GET /mcpv2/session to
	// anyone who asked: the open methods, plus the policy's grants to "http"
	// and "*".
	CallerAnonymous CallerKind = iota
	// CallerPeer is a mesh peer, authenticated by the libp2p handshake: the
	// open methods, the policy's grants to its PeerID and "*", and every
	// skill when a slot carries a valid mesh session.
	CallerPeer
	// CallerSecretHolder presented an edge token minted with the node's
	// --secret (as the seed's client did): every skill.
	CallerSecretHolder
	// CallerForwarded is a slot a mesh peer forwarded for a caller of its
	// own who is not a secret holder (SlotContext.Forwarded): the open
	// methods, and what the policy grants "via:<forwarder PeerID>", "http"
	// or "*" — never the forwarder's own grants.
	CallerForwarded
	// CallerKey presented an API key (`mcpv2 key add`) as Authorization:
	// Bearer: the open methods, the key's own grants (Caller.Grants), and
	// what the policy grants "key:<NAME>" or "*" — not the "http" grants.
	CallerKey
	// CallerOIDC presented an OpenID Connect access token of a configured
	// issuer: the open methods and what the policy grants "oidc:<sub>",
	// each "scope:<name>" of the token (Caller.Principals), or "*".
	CallerOIDC
)

// String names the kind as the audit log writes it.
func (k CallerKind) String() string {
	switch k {
	case CallerPeer:
		return "peer"
	case CallerSecretHolder:
		return "secret"
	case CallerAnonymous:
		return "anonymous"
	case CallerForwarded:
		return "forwarded"
	case CallerKey:
		return "key"
	case CallerOIDC:
		return "oidc"
	}
	return fmt.Sprintf("CallerKind(%d)", int(k))
}

// PolicyHTTP is the policy key that grants skills to every anonymous edge
// session (SPEC §6).
const PolicyHTTP = "http"

// Caller identifies who sent a request to a node. Faces fill it in; only
// the node's dispatch decides what the caller may do.
type Caller struct {
	// ID is the caller's identity: its PeerID on the mesh, "ip:ADDR" on the
	// edge. Policy, rate limits, conversation keys and audit lines use it.
	ID string
	// Via names the face the request came through: "mesh", "http", "mcp".
	Via string
	// Remote is the caller's network address, for the audit log.
	Remote string
	// Kind is how the face authenticated the caller.
	Kind CallerKind
	// Owner is the handle of what the caller owns on this node (A2A tasks,
	// MCP sessions, subscriptions): one per credential, so that callers who
	// share an IP share nothing. "secret" for secret holders, "session:"
	// and a digest of the token's nonce for an anonymous edge session,
	// "peer:<PeerID>" for a mesh peer, "local:stdio" for the stdio owner;
	// empty for a caller that presented no credential, who owns nothing it
	// could list (an unguessable task or session id is its only handle).
	Owner string
	// Principals are further policy keys the caller's credential proves
	// beside ID: an OpenID Connect token's "scope:<name>" for each scope.
	Principals []string
	// Grants are the skills the credential itself grants on top of the
	// policy's ("*" for every skill): an API key's --grant list.
	Grants []string
}

// Policy key prefixes of the credentials of docs/spec.md §0: an API key
// "key:<NAME>", an OpenID Connect subject "oidc:<sub>" and scope
// "scope:<name>".
const (
	// PolicyKey prefixes an API key's name: "key:<NAME>".
	PolicyKey = "key:"
	// PolicyOIDC prefixes an OpenID Connect subject: "oidc:<sub>".
	PolicyOIDC = "oidc:"
	// PolicyScope prefixes a scope of an access token: "scope:<name>".
	PolicyScope = "scope:"
)

// KeyPrefix starts every API key, so that a face tells a key from a session
// token or a JWT by its shape.
const KeyPrefix = "mcpv2_"

// ValidKeyName reports whether name may name an API key: 1 to 64 of
// A-Z, a-z, 0-9, '.', '_' and '-'.
func ValidKeyName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Holder is the key under which what c holds is kept and counted (MCP
// sessions, A2A tasks and their bytes): its Owner, or for a caller without
// a credential "anonymous:" and its ID ("ip:<addr>"), so that such callers
// share nothing across addresses. It is not an Owner: a caller without a
// credential still lists nothing.
func (c Caller) Holder() string {
	if c.Owner != "" {
		return c.Owner
	}
	return "anonymous:" + c.ID
}

// OwnerSecret is the Owner of every secret holder: the node's owners.
const OwnerSecret = "secret"

// PolicyVia is the prefix of the policy key that grants skills to the
// callers a peer forwards (CallerForwarded): "via:<PeerID>".
const PolicyVia = "via:"

// FindResult is one ranked answer of a find by skill or tag (SPEC §4).
type FindResult struct {
	Card AgentCard `json:"card"`
	// Score is the rank: skill name match 2.0, tag match 1.5, description
	// word 0.5, reachable now 1.0, summed.
	Score float64 `json:"score"`
	// Reachable says whether the agent could be reached when ranked.
	Reachable bool `json:"reachable"`
	// Bridged, when set, says the result is an external A2A agent that the
	// node of Card bridges into the mesh: its skills are called through
	// that node (Card.PeerID), and Reachable needs both the node reachable
	// and the agent healthy.
	Bridged *BridgedAgent `json:"bridged,omitempty"`
}

// TaskMatch is one agent ranked for a free-text task (mcpv2 find --task,
// the seed's find_agents_for_task): a mesh agent, an external agent a mesh
// node bridges, or an external agent registered on this node.
type TaskMatch struct {
	// Kind is "mesh", "bridged" or "external".
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// PeerID is the mesh agent's, or the bridging node's ("" for an
	// external agent that no node bridges).
	PeerID string `json:"peer_id,omitempty"`
	// URL is the external agent's base URL ("" for a mesh agent).
	URL string `json:"url,omitempty"`
	// Skills are the agent's skill names (as the mesh calls them).
	Skills []string `json:"skills"`
	// Score is the rank: capability name match 2.0, skill name match 2.0,
	// skill tag match 1.5, description word match 0.5, healthy 1.0, summed.
	Score float64 `json:"score"`
	// Healthy says the agent was reachable (a bridged or external agent:
	// its last health check passed).
	Healthy bool `json:"healthy"`
}

// AuditQuery selects lines of a node's audit log (the edge's GET
// /mcpv2/audit): the last Limit lines that match every field that is set.
type AuditQuery struct {
	// Since keeps lines of calls that started at or after it.
	Since time.Time
	// Caller keeps lines whose caller (PeerID, "ip:ADDR") starts with it.
	Caller string
	// Skill keeps lines of that skill.
	Skill string
	// Outcome keeps "ok", "error" or "blocked" lines, or "flagged" ones
	// (the guard found something and let the call through).
	Outcome string
	// Trace keeps lines of that trace id (32 lowercase hex digits: the
	// trace-id of a W3C traceparent).
	Trace string
	// Limit is how many lines at most, the newest.
	Limit int
}
