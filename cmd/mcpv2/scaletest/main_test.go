package scaletest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// binPath is the mcpv2 binary the tests run: built without the race
// detector whatever the tests' own build, since a hundred race-detector
// processes would not fit the machine.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpv2-scale-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "mcpv2")
	if out, err := exec.Command("go", "build", "-o", binPath, "github.com/mcpv2/mcpv2/cmd/mcpv2").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build mcpv2: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		// Every test waits for the processes it started and their readers.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
