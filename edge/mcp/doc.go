// Package mcp is the MCP face of an mcpv2 node, built on the official
// go-sdk: every skill of the node is an MCP tool with its real input
// schema, beside two mesh tools (mesh_find, mesh_call); the node's stored
// files, its agent card and the cards of agents found on the mesh are
// resources; prompt templates (summarize, analyze, and a prompts file) are
// prompts.
//
// The face speaks to the node only through the small [Backend] interface,
// and every call it makes for a caller enters Backend.Handle or
// Backend.Forward, so policy, rate limits and audit lines are those of
// every other face. It serves MCP on stdio ([Face.ServeStdio], mcpv2 mcp)
// and over streamable HTTP on the edge at /mcp ([Face.Mount]), both spec
// eras the go-sdk v1.8.0 speaks: 2025-11-25 (initialize and sessions) and
// 2026-07-28 (stateless, server/discover). In every era each result that
// carries cacheScope carries public or private (private where the answer
// depends on the caller's grants: the resource list and resource reads
// other than the card), and in 2026-07-28 every tools/call result says
// resultType "complete"; there the go-sdk's transport refuses with 400
// (-32020) a request whose Mcp-Method or Mcp-Name header is missing or
// disagrees with its body, before any method runs.
//
// Resources:
//
//	mcpv2://card             this node's agent card
//	mcpv2://files            the list of stored files (list_files)
//	mcpv2://files/{name}     a stored file, whole up to 4 MiB (read_file pages larger ones)
//	mcpv2://agents/{peer_id} a mesh agent's card, asked of it now
package mcp
