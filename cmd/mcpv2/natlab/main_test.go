//go:build linux

package natlab

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// binPath is the mcpv2 binary the lab runs, built with the race detector
// when the tests are (the lab's few processes take it).
var binPath string

func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithMCPV2(m, "mcpv2-natlab-bin-", raceEnabled, &binPath, func() error {
		return goleak.Find(goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"))
	}))
}
