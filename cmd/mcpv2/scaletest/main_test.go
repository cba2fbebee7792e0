package scaletest

import (
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
	os.Exit(testenv.MainWithMCPV2(m, "mcpv2-scale-bin-", false, &binPath, func() error {
		return goleak.Find()
	}))
}
