// Package transport builds the libp2p host of a node and provides the
// length-prefixed framing used on its streams.
//
// It knows nothing of mcpv2 semantics and imports no other package of the
// project: it deals in keys, multiaddrs, protocol IDs, resource limits and
// bytes. The pieces are:
//
//   - [LoadOrCreateIdentity] keeps the node's Ed25519 key in a 0600 file.
//   - [NewHost] assembles a host with TCP and QUIC, Noise and TLS, yamux, the
//     resource manager (with per-protocol caps), the connection manager, and
//     a connection gater that dials an address only within the host's own
//     scope (scope.go: a host with a public address dials public addresses
//     only, plus the ranges of [AllowRoutable]; see [WithDialScope]).
//   - [WriteFrame] and [FrameReader] implement the framing of SPEC §2: an
//     unsigned varint length followed by that many bytes, with a cap that is
//     enforced before anything is allocated.
package transport
