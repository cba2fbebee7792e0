package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// runProfiles runs startProfiles, then writeHeap and stop (as runNode does)
// with args as the command line.
func runProfiles(t *testing.T, args ...string) error {
	t.Helper()
	app := &cli.App{Name: "t", Flags: profileFlags, Action: func(c *cli.Context) error {
		p, err := startProfiles(c)
		if err != nil {
			return err
		}
		if err := p.writeHeap(); err != nil {
			return err
		}
		return p.stop()
	}}
	return app.Run(append([]string{"t"}, args...))
}

// TestProfiles: both profiles are written as gzipped pprof files; a path
// that cannot be created fails before the node starts and leaves no file
// of the other profile behind.
func TestProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, heap := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "heap.pprof")
	if err := runProfiles(t, "--cpuprofile", cpu, "--heapprofile", heap); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{cpu, heap} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("%s is not a gzipped profile (%d bytes)", f, len(b))
		}
	}

	heap2 := filepath.Join(dir, "heap2.pprof")
	err := runProfiles(t, "--heapprofile", heap2, "--cpuprofile", filepath.Join(dir, "no", "such", "dir", "cpu"))
	if err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Fatalf("a bad --cpuprofile path: %v, want an error naming the flag", err)
	}
	if _, err := os.Stat(heap2); !os.IsNotExist(err) {
		t.Errorf("the --heapprofile file was left behind: %v", err)
	}
}
