// Package edge is the HTTP compatibility edge of an mcpv2 node: the seed
// peer's endpoints and session tokens (SPEC §5), served by Go's net/http.
//
// A [Server] binds one TCP listener (to the public address of the machine by
// default, never silently to every interface), issues HMAC session tokens
// bound to the caller's observed IP, rate limits per session and per IP, caps
// request bodies, and passes slot and batch messages to the node through the
// small [Backend] interface, which *node.Node satisfies. The edge never
// imports the node: of this project it depends on package protocol (and
// protocol/translate, to read the four providers' chat formats) only.
//
// Endpoints:
//
//	GET  /mcpv2/health, /health   liveness, version, peer id, flags (no auth)
//	GET  /mcpv2/session           a new session token (rate limited per IP)
//	GET  /mcpv2/agent-card        the agent card (no auth)
//	POST /mcpv2                   a slot or a batch (session)
//	POST /mcpv2/ai/{provider}     a provider-native chat request answered by ask (session)
//	POST /mcpv2/peers/{PeerID}    the gateway: forward a slot or batch to a mesh peer (session)
//	GET  /mcpv2/find?skill=|tag=  ranked agent cards from discovery (session)
//
// Every refusal is answered with a JSON-RPC error object in the body and
// written as one audit line; requests that reach [Backend.Handle] are audited
// there, one line per slot.
//
// [Client] is the other side: the node as an HTTP client of other edges, with
// session caching and connection reuse.
package edge
