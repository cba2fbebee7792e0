// Package natlab holds the NAT lab (docs/natlab.md): real mcpv2 processes
// behind routers that network namespaces and nftables make, endpoint-
// independent and symmetric NAT, over TCP and QUIC. It has no code of its
// own beside its tests; it is a package apart from cmd/mcpv2 so that go
// test ./... runs its eight minutes beside that package's end-to-end tests
// instead of after them.
package natlab
