// Package mcptest holds the end-to-end tests of the MCP face (issue 8,
// docs/mcp.md): real mcpv2 processes driven by the go-sdk client over
// stdio (CommandTransport) and streamable HTTP in both spec eras, by the
// MCP Inspector's CLI and by the MCP conformance suite, both pinned in
// testdata/npm/package-lock.json. It has no code of its own beside its
// tests; it is a package apart from cmd/mcpv2 so that go test ./... runs it
// beside that package's long end-to-end tests.
package mcptest
