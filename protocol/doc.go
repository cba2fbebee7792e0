// Package protocol holds the mcpv2 wire types and rules that every face of a
// node shares: JSON-RPC slots and batches, responses, the one *Error type with
// the spec's codes, agent cards and skill descriptors, address parsing and the
// HMAC session token format.
//
// It imports the standard library only, so that the HTTP edge, the MCP and A2A
// faces and the mesh node all speak exactly the same protocol.
package protocol

// Protocol identifiers and limits of mcpv2/1.0 (SPEC §2). A wire change bumps
// the version in the ID.
const (
	// RPCProtocolID is the libp2p protocol of JSON-RPC slot batches.
	RPCProtocolID = "/mcpv2/rpc/1.0.0"
	// BlobProtocolID is the libp2p protocol of bulk file transfer.
	BlobProtocolID = "/mcpv2/blob/1.0.0"
	// BlobProtocolID11 is bulk file transfer whose sender hashes while it
	// sends, with the hash in a trailer (docs/spec.md §0). A node serves it
	// beside BlobProtocolID, for older senders; a sender offers it first.
	BlobProtocolID11 = "/mcpv2/blob/1.1.0"
	// BlobProtocolID12 is BlobProtocolID11 with BLAKE3-256 as its
	// integrity hash instead of SHA-256 (docs/spec.md §0): the hash keeps
	// up with the transfer. A node serves it beside the older two; a sender
	// offers it first.
	BlobProtocolID12 = "/mcpv2/blob/1.2.0"
	// DHTPrefix is the protocol prefix of the project's own Kademlia DHT.
	DHTPrefix = "/mcpv2"
	// Version is the protocol version that negotiate and agent cards name.
	Version = "mcpv2/1.0"
	// MaxBatchSize is the largest number of slots one batch may hold.
	MaxBatchSize = 100
	// DefaultMaxMessage is the default cap of one message (a frame or an
	// HTTP body), in bytes.
	DefaultMaxMessage = 8 << 20
)

// Providers are the provider names that context.provider, translate_history
// and /mcpv2/ai/{provider} accept.
var Providers = []string{"claude", "openai", "gemini", "deepseek"}

// ValidProvider reports whether p is one of Providers.
func ValidProvider(p string) bool {
	for _, q := range Providers {
		if p == q {
			return true
		}
	}
	return false
}
