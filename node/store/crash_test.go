package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// The crash test re-runs this test binary as a child that starts a Write
// from a slow reader; the parent kills it with SIGKILL mid-write.
const (
	envCrashDir  = "MCPV2_STORE_CRASH_DIR"
	envCrashName = "MCPV2_STORE_CRASH_NAME"
	readyAfter   = 1 << 20 // bytes written before the child says READY
)

// slowReader yields data until readyAfter bytes have been consumed (Write
// asks for more only after writing what it had), then says READY on stdout
// and blocks, the write held open mid-way, until the parent kills the
// process. It gives up at deadline (a minute) so an orphaned child cannot
// run forever.
type slowReader struct {
	n        int
	deadline time.Time
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.n >= readyAfter {
		fmt.Println("READY")
		never := time.NewTimer(time.Until(r.deadline))
		<-never.C
		return 0, errors.New("crash child: never killed")
	}
	n := min(len(p), 64<<10)
	for i := range n {
		p[i] = 'N'
	}
	r.n += n
	return n, nil
}

func crashChild(dir, name string) {
	s, err := Open(dir, WithMaxFileSize(1<<40))
	if err != nil {
		fmt.Println("OPEN FAILED:", err)
		os.Exit(3)
	}
	_, err = s.Files().Write(name, &slowReader{deadline: time.Now().Add(time.Minute)})
	fmt.Println("WRITE RETURNED:", err)
	os.Exit(4)
}

func TestCrashMidWrite(t *testing.T) {
	if dir := os.Getenv(envCrashDir); dir != "" {
		crashChild(dir, os.Getenv(envCrashName))
		return
	}
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" || runtime.GOOS == "ios" {
		testenv.SkipEnv(t, "cannot start a subprocess here")
	}
	exe, err := os.Executable()
	if err != nil {
		testenv.SkipEnv(t, "%v", err)
	}
	for _, tc := range []struct {
		name string
		old  string // existing content, "" for a new file
	}{
		{"new.bin", ""},
		{"existing.bin", "the old content, complete\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.old != "" {
				s, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Files().Write(tc.name, strings.NewReader(tc.old)); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}

			cmd := exec.Command(exe, "-test.run=^TestCrashMidWrite$", "-test.count=1")
			cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashName+"="+tc.name)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ready := make(chan struct{})
			drained := make(chan []string)
			go func() {
				var lines []string
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines = append(lines, sc.Text())
					if sc.Text() == "READY" {
						close(ready)
					}
				}
				drained <- lines
			}()
			select {
			case <-ready:
			case lines := <-drained:
				_ = cmd.Wait()
				t.Fatalf("child ended before it was mid-write: %q", lines)
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				<-drained
				_ = cmd.Wait()
				t.Fatal("child never got mid-write")
			}

			// Prove the kill lands mid-write: a temp file with data exists.
			filesDir := filepath.Join(dir, "files")
			tmps, _ := filepath.Glob(filepath.Join(filesDir, tempPrefix+"*"))
			if len(tmps) != 1 {
				t.Errorf("want one temp file mid-write, found %q", tmps)
			} else if st, err := os.Stat(tmps[0]); err != nil || st.Size() < readyAfter {
				t.Errorf("temp file mid-write: %v, %v", st, err)
			}

			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			lines := <-drained
			if err := cmd.Wait(); err == nil {
				t.Fatalf("child exited cleanly; output %q", lines)
			}

			s, err := Open(dir)
			if err != nil {
				t.Fatalf("re-Open after the crash: %v", err)
			}
			defer s.Close()
			if tmps, _ := filepath.Glob(filepath.Join(filesDir, tempPrefix+"*")); len(tmps) != 0 {
				t.Errorf("temp files survived re-Open: %q", tmps)
			}
			got, err := os.ReadFile(filepath.Join(filesDir, tc.name))
			switch {
			case tc.old == "" && !errors.Is(err, os.ErrNotExist):
				t.Errorf("target after crash: %d bytes, %v; want no file", len(got), err)
			case tc.old != "" && string(got) != tc.old:
				t.Errorf("target after crash = %q, %v; want the old content", got, err)
			}
			list, err := s.Files().List()
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.old == ""]; len(list) != want {
				t.Errorf("List = %+v", list)
			}
		})
	}
}
