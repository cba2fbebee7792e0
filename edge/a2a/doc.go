// Package a2a is the A2A face of an mcpv2 node: its agent card at
// /.well-known/agent-card.json (signed: a JWS over the card's RFC 8785
// canonical JSON without its empty members, as the A2A SDKs verify it,
// EdDSA with the node's key, the kid its PeerID), and one JSON-RPC URL,
// /a2a, that speaks A2A v1.0 and v0.3, the version chosen by the
// A2A-Version header (none: 0.3); and the same operations over A2A's
// HTTP+JSON binding at /a2a/rest (rest.go; v0.3 under /a2a/rest/v1), whose
// v1.0 tenant is a mesh peer's PeerID.
//
// The card names what the serving edge accepts (edge.Server.Accepts) in
// securitySchemes and its requirements (v1.0 securityRequirements, v0.3
// security), each scheme a requirement alone: the edge session always, an
// API key when the node has keys, an OpenID Connect scheme per issuer, and
// the empty requirement when a caller may come with no credential.
//
// A message becomes a task that runs the node's skills through the same
// dispatch as every face (Backend.Handle, as the caller that sent it): a
// data part {"skill", "arguments"} runs that skill, file parts are stored
// (upload_file), text goes to ask. Tasks move submitted → working →
// completed, failed, rejected (not permitted), canceled, or
// input-required (a skill lacks arguments; the next message to the task
// gives them); they live in the node's store, and every event of a task has
// a sequence number (metadata "mcpv2/seq", and the SSE id), so that a
// subscriber that lost its stream resubscribes with Last-Event-ID and gets
// what it missed.
//
// GetExtendedAgentCard (v0.3 agent/getAuthenticatedExtendedCard) answers
// the card as its caller may see it: signed as the public one, its skills
// those the node lets that caller run (Backend.Permits); a caller without
// a credential gets the public card (extcard.go).
//
// Face.ServeLibP2P serves the same JSON-RPC URL and card over libp2p, on
// every node whether it has an edge or not: HTTP/1.1 on streams of
// LibP2PProtocol, the caller the stream's PeerID, named in the card by the
// binding URI LibP2PBinding (libp2p.go; docs/a2a.md "A2A over libp2p").
//
// The a2a-go SDK (v0.3.3) speaks only v0.3, and its server keeps tasks and
// events in a shape that does not replay them; this package writes both
// wire forms itself over one model of its own.
package a2a
