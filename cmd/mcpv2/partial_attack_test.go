package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// partialBytes sums the sizes of the hidden partial uploads in dataDir's
// files directory; files that vanish while it looks are skipped.
func partialBytes(dataDir string) (int64, int) {
	ents, err := os.ReadDir(filepath.Join(dataDir, "files"))
	if err != nil {
		return 0, 0
	}
	var sum int64
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".mcpv2-part-") {
			continue
		}
		if st, err := e.Info(); err == nil {
			sum += st.Size()
			n++
		}
	}
	return sum, n
}

// killedSend runs `mcpv2 send` of path to addr, paced at rate (as
// --limit-rate takes it), and kills it (SIGKILL) once it reports at least
// after bytes sent. It returns the bytes reported when it was killed.
func killedSend(t *testing.T, path, addr, client, rate string, after int64) int64 {
	t.Helper()
	cmd := exec.Command(binPath, "send", path, addr, "--limit-rate", rate, "--data-dir", client)
	cmd.Env = testenv.CleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := make(chan int64, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		done := false
		for sc.Scan() {
			var sent, total int64
			if n, _ := fmt.Sscanf(sc.Text(), "sent %d of %d", &sent, &total); n == 2 && sent >= after && !done {
				done = true
				_ = cmd.Process.Kill()
				killed <- sent
			}
		}
		close(killed)
	}()
	sent, ok := <-killed
	_ = cmd.Wait()
	if !ok {
		t.Fatalf("send of %s finished or failed before it could be killed", filepath.Base(path))
	}
	return sent
}

// TestPartialUploadAttack is issue 7's fourth defect as the attack: one
// sender starts upload after upload of 4 MiB files and kills each `mcpv2
// send` half-way. With --max-partial 8 MiB the hidden partial uploads
// never hold more than 8 MiB (the sender's oldest are dropped), list_files
// shows none of them, and with --partial-ttl 3s the running node removes
// them all soon after, without a restart.
func TestPartialUploadAttack(t *testing.T) {
	const (
		size       = 4 << 20
		maxPartial = 8 << 20
		ttl        = 3 * time.Second
		uploads    = 6
	)
	client := t.TempDir()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "policy.json"), fmt.Sprintf(`{"grants":{%q:["upload_file","list_files"]}}`, peerIDOf(t, client)))
	b := startNode(t, dir, "--max-partial", fmt.Sprint(maxPartial), "--partial-ttl", ttl.String())
	addr := b.tcpAddr(t)

	// Watch the partial uploads' bytes on disk for the whole attack.
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if n, _ := partialBytes(dir); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	var sent int64
	for i := range uploads {
		path, _ := bigFile(t, size, byte(10+i))
		named := filepath.Join(filepath.Dir(path), fmt.Sprintf("upload-%d.bin", i))
		if err := os.Rename(path, named); err != nil {
			t.Fatal(err)
		}
		sent += killedSend(t, named, addr, client, "4M", 2<<20)
	}
	held, files := partialBytes(dir)
	t.Logf("%d interrupted uploads sent %d bytes; the node holds %d bytes in %d partial uploads; peak %d", uploads, sent, held, files, peak.Load())
	if files == 0 {
		t.Fatal("no partial upload was kept: the uploads were not interrupted mid-way")
	}
	if p := peak.Load(); p > maxPartial {
		t.Fatalf("the partial uploads of one sender peaked at %d bytes, over --max-partial %d", p, maxPartial)
	}

	// Invisible to list_files.
	out, errs, code := run(t, "call", addr, "list_files", "--data-dir", client)
	if code != 0 || !strings.Contains(out, `"files":[]`) {
		t.Fatalf("list_files: %d %q %q", code, out, errs)
	}

	// Swept while the node runs: gone within the TTL and a sweep period.
	last := time.Now()
	deadline := last.Add(ttl + ttl/4 + 5*time.Second)
	for {
		n, files := partialBytes(dir)
		if files == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d partial uploads (%d bytes) still there %v after the last upload (--partial-ttl %v)", files, n, time.Since(last).Round(time.Millisecond), ttl)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-b.Exited:
		t.Fatalf("the node exited: %v\n%s", b.ExitErr, b.Log)
	default:
	}
	if out, errs, code := run(t, "call", addr, "list_files", "--data-dir", client); code != 0 || !strings.Contains(out, `"files":[]`) {
		t.Fatalf("list_files after the sweep: %d %q %q", code, out, errs)
	}
}
