//go:build !linux

package skills

import (
	"fmt"
	"os"
)

// runCustomTestTool is the test tool of custom_command_linux_test.go;
// command handlers need Linux, so elsewhere it only reports that.
func runCustomTestTool(tool string) int {
	fmt.Fprintf(os.Stderr, "test tool %q: command handlers need Linux\n", tool)
	return 2
}
