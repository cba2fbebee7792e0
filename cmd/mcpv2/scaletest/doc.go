// Package scaletest holds the discovery tests at scale (issue 12,
// docs/discovery.md "At scale"): a hundred and more real `mcpv2 node`
// processes, finds from fresh `mcpv2 find` processes, churn, and a private
// LAN of network namespaces. It has no code of its own beside its tests;
// it is a package apart from cmd/mcpv2 so that `go test ./...` runs it
// beside that package's long end-to-end tests instead of after them.
package scaletest
