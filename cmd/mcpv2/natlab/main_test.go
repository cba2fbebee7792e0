//go:build linux

package natlab

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// binPath is the mcpv2 binary the lab runs, built with the race detector
// when the tests are (the lab's few processes take it).
var binPath string

func TestMain(m *testing.M) {
	bin, remove, err := testenv.BuildMCPV2("mcpv2-natlab-bin-", raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = bin
	code := m.Run()
	remove()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
