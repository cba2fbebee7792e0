//go:build linux

package natlab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/node/store"
)

// natlabA2ASkills is B's custom skill for the A2A client: nap runs long
// enough (1.5 s) for the client to drop its stream and resubscribe.
const natlabA2ASkills = `{"skills":[{"name":"nap","description":"sleeps a second and a half","handler":{"type":"command","command":["sh","-c","sleep 1.5; echo '{\"slept\":true}'"]}}]}`

// natlabA2AWant are "ok:" lines every full run of a2a-client.mjs prints
// (the same as mcptest's a2aWant; the script itself fails on any check).
var natlabA2AWant = []string{"v1.0 card signature verified", "ping completed", "ask answered",
	"a streamed task: task,statusUpdate,artifactUpdate,statusUpdate", "getTask", "cancelTask of a finished task: -32002",
	"getTask of an unknown task: -32001", "resubscribe after a dropped stream: statusUpdate,artifactUpdate,statusUpdate"}

// natlabA2AClient returns the node binary and the directory of
// a2a-client.mjs (mcptest's pinned npm install of @a2a-js/sdk), skipping
// (failing where tests must run) when either is missing.
func natlabA2AClient(t *testing.T) (nodeBin, dir string) {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipEnv(t, "skipped: node (the A2A client's runtime) is not installed (apt-get install -y nodejs npm; CI's .ci/run installs it): %v", err)
	}
	dir, err = filepath.Abs(filepath.Join("..", "mcptest", "testdata", "npm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"@a2a-js/sdk", "@grpc/grpc-js"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			testenv.SkipEnv(t, "skipped: %s is not installed in %s (npm ci there installs the lock file; CI's .ci/run does): %v", pkg, dir, err)
		}
	}
	return nodeBin, dir
}

// TestNATLabA2A (issue 24, acceptance 1): an agent B behind a NAT, with no
// edge of its own, is used by an A2A client on @a2a-js/sdk 1.3.0
// (mcptest's a2a-client.mjs, unchanged in what it checks) through the edge
// of node A, behind another NAT: A finds B through the DHT and reaches it
// through the relay (then directly, when hole punching succeeds). The
// client, in A's private network with only the edge's URL, runs over each
// binding and version the SDK has a client for: JSON-RPC and HTTP+JSON at
// /peers/{B} on the edge, gRPC at the edge's address with B as the card's
// tenant. B's card is signed by B, its tasks run on B (its audit log shows
// A's calls arriving over the mesh).
func TestNATLabA2A(t *testing.T) {
	ipBin, nftBin := natlabTools(t)
	nodeBin, npmDir := natlabA2AClient(t)
	natlabRemoveStale(t, ipBin)
	skills := filepath.Join(t.TempDir(), "skills.json")
	if err := os.WriteFile(skills, []byte(natlabA2ASkills), 0o600); err != nil {
		t.Fatal(err)
	}
	lab := newNATLab(t, ipBin, nftBin, "a", false)
	relay := natlabRelay(t, lab)
	relayAddr := relay.addr(t, natlabRelayIP, "/tcp/")
	// Both policies serve every skill to an HTTP caller with only the URL:
	// A's to the client at its edge, B's to that caller forwarded by A.
	policy := testenv.PolicyFile(t, map[string][]string{"http": {"*"}})
	b := lab.startNode("peerB", "B", t.TempDir(), "--bootstrap", relayAddr, "--skills", skills, "--secret", natlabSecret, "--name", "bob",
		"--policy", policy)
	a := lab.startNode("peerA", "A", t.TempDir(), "--bootstrap", relayAddr, "--secret", natlabSecret, "--port", "8000", "--policy", policy)
	base := fmt.Sprintf("http://%s:8000/peers/%s", natlabAIP, b.peerID)

	// B is usable through A's edge once A finds it (the DHT) and reaches
	// it (the relay): its card, which the edge asks B for, is served.
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := lab.exec("peerA", 20*time.Second, "curl", "-sS", "--fail", "--max-time", "15", "-H", "A2A-Version: 1.0", base+"/.well-known/agent-card.json")
		if r.code == 0 && strings.Contains(r.stdout, b.peerID) {
			t.Logf("B's card served by A's edge %.1fs after B's banner", time.Since(b.bannerAt).Seconds())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's edge serves no card of B within 60 s: %s\nA's log:\n%s\nB's log:\n%s", r, a.logTail(30), b.logTail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("clients", func(t *testing.T) {
		for _, tr := range []struct{ name, binding string }{{"jsonrpc", "JSONRPC"}, {"rest", "HTTP+JSON"}, {"grpc", "GRPC"}} {
			for _, mode := range []string{"v1", "v03"} {
				t.Run(tr.name+"-"+mode, func(t *testing.T) {
					t.Parallel() // the lab is shared; each run is one node process
					ver, tenant := "1.0", ""
					if mode == "v03" {
						ver = "0.3"
					}
					if tr.name == "grpc" {
						tenant = " tenant " + b.peerID
					}
					want := append([]string{fmt.Sprintf("(%s) over %s %s%s\n", mode, tr.binding, ver, tenant), "A2A-Version headers sent: " + ver + "\n"}, natlabA2AWant...)
					if mode == "v1" {
						want = append(want, "listTasks without a credential: empty")
					}
					out := natlabRunA2AClient(t, lab, nodeBin, npmDir, "A2A_BASE_URL="+base, "A2A_PEER_ID="+b.peerID, "A2A_MODE="+mode, "A2A_TRANSPORT="+tr.name)
					for _, w := range want {
						if !strings.Contains(out, w) {
							t.Errorf("%s %s: no %q in:\n%s", tr.name, mode, w, out)
						}
					}
				})
			}
		}
	})

	// The tasks ran on B, behind natB: its audit log has the calls A's edge
	// forwarded, arriving from across the NATs (through the relay, or
	// directly from natA's public address after a hole punch).
	remotes := natlabA2ARemotes(t, b, a.peerID)
	calls := 0
	for r, n := range remotes {
		if strings.HasSuffix(r, "(tools/call)") {
			calls += n
		}
	}
	if calls == 0 {
		t.Errorf("B's audit log has no skill call (tools/call) forwarded by A (%s): %v", a.peerID, remotes)
	}
	for r, n := range remotes {
		if !strings.Contains(r, "/p2p-circuit") && !strings.Contains(r, "/"+natlabAWan+"/") {
			t.Errorf("B saw %d calls forwarded by A from %q: want the relay (/p2p-circuit) or natA's public address %s", n, r, natlabAWan)
		}
	}
	t.Logf("B saw the calls forwarded by A's edge from: %v", remotes)
}

// natlabA2ARemotes counts the lines of B's audit log of node via's calls
// and the calls it forwarded (its edge's callers), by "remote (method)".
func natlabA2ARemotes(t *testing.T, b *natProc, via string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.dataDir, "audit.jsonl"))
	if err != nil {
		t.Fatalf("B's audit log: %v", err)
	}
	remotes := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		var rec store.AuditRecord
		if json.Unmarshal([]byte(line), &rec) == nil && (rec.Caller == via || rec.Caller == "via:"+via) {
			remotes[rec.Remote+" ("+rec.Method+")"]++
		}
	}
	return remotes
}

// natlabRunA2AClient runs a2a-client.mjs in A's namespace with env and
// returns its stdout, failing the test when it fails.
func natlabRunA2AClient(t *testing.T, lab *natLab, nodeBin, dir string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, lab.ip, "netns", "exec", lab.ns["peerA"], nodeBin, "a2a-client.mjs")
	cmd.Dir = dir
	cmd.Env = append(natlabEnv(), append([]string{"A2A_TOKEN="}, env...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("a2a-client.mjs %v: %v\n%s\n%s", env, err, out.String(), natlabTail(errb.String(), 30))
	}
	return out.String()
}
