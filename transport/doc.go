// Package transport builds the libp2p host of a node and provides the
// length-prefixed framing used on its streams.
//
// It knows nothing of mcpv2 semantics and imports no other package of the
// project: it deals in keys, multiaddrs, protocol IDs, resource limits and
// bytes. The pieces are:
//
//   - [LoadOrCreateIdentity] keeps the node's Ed25519 key in a 0600 file.
//   - [NewHost] assembles a host with TCP and QUIC, Noise and TLS, yamux, the
//     resource manager (with per-protocol caps) and the connection manager.
//   - [WriteFrame] and [FrameReader] implement the framing of SPEC §2: an
//     unsigned varint length followed by that many bytes, with a cap that is
//     enforced before anything is allocated.
package transport
