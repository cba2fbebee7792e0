package custom

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The command-handler tests run this test binary as the program; the
	// switch makes it act as a tiny JSON tool instead of running tests.
	if tool := os.Getenv(testToolEnv); tool != "" {
		os.Exit(runTestTool(tool))
	}
	// The mcp-handler tests run it as a local MCP server.
	if os.Getenv(mcpTestServerEnv) != "" {
		os.Exit(runMCPTestServer())
	}
	goleak.VerifyTestMain(m)
}
