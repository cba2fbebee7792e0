package scaletest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// binPath is the mcpv2 binary the tests run: built without the race
// detector whatever the tests' own build, since a hundred race-detector
// processes would not fit the machine.
var binPath string

func TestMain(m *testing.M) {
	bin, remove, err := testenv.BuildMCPV2("mcpv2-scale-bin-", false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = bin
	code := m.Run()
	remove()
	if code == 0 {
		// Every test waits for the processes it started and their readers.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
