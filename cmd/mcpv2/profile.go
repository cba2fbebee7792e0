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
// where a warm call's CPU goes in the real binary, and what its heap holds
// (docs/benchmarks.md).
var profileFlags = []cli.Flag{
	&cli.StringFlag{Name: "cpuprofile", EnvVars: []string{"MCPV2_CPUPROFILE"}, Usage: "write a CPU profile of the node's whole run to this file (go tool pprof)"},
	&cli.StringFlag{Name: "heapprofile", EnvVars: []string{"MCPV2_HEAPPROFILE"}, Usage: "write a heap profile of the running node to this file when it is asked to stop, before it closes (go tool pprof)"},
}

// heapProfileRate is runtime.MemProfileRate under --heapprofile: one
// sample per 4 KiB allocated instead of per 512 KiB, so that the few MiB
// of an idle node's heap show as more than a handful of samples.
const heapProfileRate = 4096

// profiles are the files of --cpuprofile and --heapprofile.
type profiles struct {
	cpu, heap *os.File
}

// startProfiles creates the files of --cpuprofile and --heapprofile
// before the node starts, so that a bad path fails at once and leaves no
// file behind, and starts the CPU profile.
func startProfiles(c *cli.Context) (_ *profiles, err error) {
	p := &profiles{}
	defer func() {
		if err != nil {
			for _, f := range []*os.File{p.cpu, p.heap} {
				if f != nil {
					_ = f.Close()
					_ = os.Remove(f.Name())
				}
			}
		}
	}()
	if name := c.String("heapprofile"); name != "" {
		if p.heap, err = os.Create(name); err != nil {
			return nil, fmt.Errorf("--heapprofile: %w", err)
		}
		runtime.MemProfileRate = heapProfileRate
	}
	if name := c.String("cpuprofile"); name != "" {
		if p.cpu, err = os.Create(name); err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err = pprof.StartCPUProfile(p.cpu); err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	return p, nil
}

// writeHeap writes the heap profile of the node as it runs: call it
// before the node closes, or the profile shows only what outlives it.
func (p *profiles) writeHeap() error {
	if p.heap == nil {
		return nil
	}
	runtime.GC() // the profile's in-use figures are as of the last GC
	err := errors.Join(pprof.Lookup("heap").WriteTo(p.heap, 0), p.heap.Close())
	p.heap = nil
	return err
}

// stop ends the CPU profile, and writes the heap profile if writeHeap
// has not.
func (p *profiles) stop() error {
	err := p.writeHeap()
	if p.cpu != nil {
		pprof.StopCPUProfile()
		err = errors.Join(err, p.cpu.Close())
		p.cpu = nil
	}
	return err
}
