// Package attacktest holds the attacks of issue 18 on the faces (edge, MCP,
// A2A, gateway, CLI), each written from the attacker's side against real
// `mcpv2 node` processes on loopback. It has no code of its own: only
// tests, in a package of their own so that they run beside the others.
//
// MCPV2_TEST_BIN=/path/to/mcpv2 go test ./cmd/mcpv2/attacktest runs them
// against another build (an earlier release, to see what they find there).
package attacktest
