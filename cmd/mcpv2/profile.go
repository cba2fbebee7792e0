package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/urfave/cli/v2"
)

// profileFlags write Go profiles of a running node, for `go tool pprof`:
// where a warm call's CPU goes in the real binary (docs/benchmarks.md), and
// what its heap holds when it stops.
var profileFlags = []cli.Flag{
	&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the node's whole run to this file (go tool pprof)"},
	&cli.StringFlag{Name: "memprofile", Usage: "write a heap profile to this file when the node stops (go tool pprof)"},
}

// startProfiles starts --cpuprofile and returns the function that stops it
// and writes --memprofile; both files are created before the node starts,
// so a bad path fails at once.
func startProfiles(c *cli.Context) (stop func() error, err error) {
	var cpu, mem *os.File
	if p := c.String("memprofile"); p != "" {
		if mem, err = os.Create(p); err != nil {
			return nil, fmt.Errorf("--memprofile: %w", err)
		}
	}
	if p := c.String("cpuprofile"); p != "" {
		if cpu, err = os.Create(p); err == nil {
			err = pprof.StartCPUProfile(cpu)
		}
		if err != nil {
			if mem != nil {
				_ = mem.Close()
			}
			if cpu != nil {
				_ = cpu.Close()
			}
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if mem != nil {
			runtime.GC() // the profile's in-use figures are as of the last GC
			errs = append(errs, pprof.Lookup("heap").WriteTo(mem, 0), mem.Close())
		}
		return errors.Join(errs...)
	}, nil
}
