//go:build !linux

package custom

import (
	"fmt"
	"os"
)

// runTestTool is the test tool of command_linux_test.go;
// command handlers need Linux, so elsewhere it only reports that.
func runTestTool(tool string) int {
	fmt.Fprintf(os.Stderr, "test tool %q: command handlers need Linux\n", tool)
	return 2
}
