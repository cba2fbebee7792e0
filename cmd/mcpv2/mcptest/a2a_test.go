package mcptest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// a2aWant are the "ok:" lines every full run of a2a-client.mjs prints.
var a2aWant = []string{"v1.0 card signature verified", "a forged card is refused", "ping completed", "ask answered",
	"a streamed task: task,statusUpdate,artifactUpdate,statusUpdate", "getTask", "cancelTask of a finished task: -32002",
	"getTask of an unknown task: -32001", "resubscribe after a dropped stream: statusUpdate,artifactUpdate,statusUpdate"}

// a2aTransports are the values of A2A_TRANSPORT, each with the
// protocolBinding of the card's interface that the SDK's factory for it
// picks.
var a2aTransports = []struct{ name, binding string }{{"jsonrpc", "JSONRPC"}, {"rest", "HTTP+JSON"}, {"grpc", "GRPC"}}

// a2aRun is one run of a2a-client.mjs.
type a2aRun struct {
	mode      string // A2A_MODE: v1, v03 or noheader
	transport string // A2A_TRANSPORT: jsonrpc (when empty), rest or grpc
	base      string // A2A_BASE_URL
	peer      string // A2A_PEER_ID: the PeerID whose key signs the card
	token     string // A2A_TOKEN: "" for only the base URL, or an API key
	denied    string // A2A_DENIED: a skill the credential is not granted
	probe     bool   // A2A_PROBE: the credential must be refused at once
}

// runA2AClient runs a2a-client.mjs (@a2a-js/sdk 1.3.0) as r says, fails the
// test if it fails or lacks one of want, and returns its stdout.
func runA2AClient(t *testing.T, r a2aRun, want ...string) string {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipEnv(t, "node is not installed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, "a2a-client.mjs")
	cmd.Dir = npmDir
	cmd.Env = append(testenv.CleanEnv(), "A2A_BASE_URL="+r.base, "A2A_TOKEN="+r.token, "A2A_PEER_ID="+r.peer, "A2A_MODE="+r.mode, "A2A_DENIED="+r.denied, "A2A_TRANSPORT="+r.transport)
	if r.probe {
		cmd.Env = append(cmd.Env, "A2A_PROBE=1")
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("a2a-client.mjs (%s %s at %s): %v\n%s\n%s", r.transport, r.mode, r.base, err, out.String(), errb.String())
	}
	for _, s := range want {
		if !strings.Contains(out.String(), "ok: ") || !strings.Contains(out.String(), s) {
			t.Errorf("%s %s: no %q in:\n%s", r.transport, r.mode, s, out.String())
		}
	}
	return out.String()
}

// napSkills writes a custom skills file with nap, a command that sleeps a
// second and a half (a task that runs long enough to drop its stream).
func napSkills(t *testing.T) string {
	t.Helper()
	skills := filepath.Join(t.TempDir(), "custom_skills.json")
	if err := os.WriteFile(skills, []byte(`{"skills":[{"name":"nap","description":"sleeps a second and a half","handler":{"type":"command","command":["sh","-c","sleep 1.5; echo '{\"slept\":true}'"]}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return skills
}

// a2aWantFor is what a full run without a credential prints beyond
// a2aWant: the binding and version the client speaks (and the tenant its
// calls carry, when the card names one), listTasks (v1.0 only: v0.3 has no
// ListTasks) and the A2A-Version it sent.
func a2aWantFor(mode, binding, tenant string) []string {
	w := append([]string{}, a2aWant...)
	ver := "1.0"
	if mode != "v1" {
		ver = "0.3"
	}
	over := " over " + binding + " " + ver
	if tenant != "" {
		over += " tenant " + tenant
	}
	w = append(w, "("+mode+")"+over+"\n")
	switch mode {
	case "v1":
		w = append(w, "listTasks without a credential: empty", "A2A-Version headers sent: 1.0\n")
	case "v03":
		w = append(w, "A2A-Version headers sent: 0.3\n")
	case "noheader":
		w = append(w, "(none)")
	}
	return w
}

// TestA2AClient runs an A2A client on @a2a-js/sdk 1.3.0 (pinned;
// testdata/npm/a2a-client.mjs) as a user configures it, with only the base
// URL (no Authorization header), against a node's A2A face whose policy
// grants "http" every skill, over each binding the SDK has a client for
// (JSON-RPC, HTTP+JSON, gRPC: the SDK's own transport factory, and only
// that one, so a card without the binding fails the run), each in the
// SDK's v1.0 and in its v0.3 mode, and over JSON-RPC with no A2A-Version
// header (answered as 0.3): the card's signature checked with the SDK's
// own verifier and the key of the PeerID (a forged card refused), a skill
// run from a data part, text to ask, a streamed task to its end, getTask,
// listTasks (v1.0: empty, since a caller without a credential owns nothing
// to list), cancel of a finished task (-32002), an unknown task (-32001),
// and a resubscription to a running task after its stream was dropped that
// replays the event missed meanwhile. The same client, pointed at
// /peers/{B} on A's edge, uses node B, which has no edge of its own: B's
// card, signed by B, and B's skills over libp2p; over JSON-RPC and
// HTTP+JSON the card's URLs carry /peers/{B}, over gRPC (no path) the
// card's interface names B as its tenant, which the client's calls carry
// (v1.0: the request's tenant field; v0.3: a2a-tenant metadata).
func TestA2AClient(t *testing.T) {
	needNPM(t, "mcp-inspector") // the lock file installs @a2a-js/sdk with it
	skills := napSkills(t)
	// B has no edge; A's edge serves it at /peers/{B}.
	b := startNodeWithPolicy(t, grantHTTPAll, "--secret", secret, "--skills", skills)
	// The runs share one client IP, and four of them go through the
	// gateway to B at once: its per-IP rate (50/s by default, for one
	// client) is raised so that they do not take each other's share.
	a := startNodeWithPolicy(t, grantHTTPAll, "--port", "0", "--secret", secret, "--skills", skills, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"),
		"--gateway-rate-limit", "1000")
	edgeBase := strings.TrimSuffix(a.mcpURL(), "/mcp")
	aID, bID := a.first("MCPV2_PEER_ID"), b.first("MCPV2_PEER_ID")
	// A reaches B (its bootstrap) before the runs begin: B's signed card
	// through A's edge, once, before any client asks for it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, edgeBase+"/peers/"+bID+"/.well-known/agent-card.json", nil)
		req.Header.Set("A2A-Version", "1.0")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"signatures"`) {
				break
			}
			err = fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's edge does not serve B's card in 30 s: %v", err)
		}
	}
	type run struct {
		name, mode, transport, binding, base, peer, tenant string
	}
	runs := []run{{"jsonrpc-noheader", "noheader", "jsonrpc", "JSONRPC", edgeBase, aID, ""}}
	for _, tr := range a2aTransports {
		for _, mode := range []string{"v1", "v03"} {
			tenant := ""
			if tr.name == "grpc" {
				tenant = bID
			}
			runs = append(runs,
				run{tr.name + "-" + mode, mode, tr.name, tr.binding, edgeBase, aID, ""},
				run{tr.name + "-" + mode + "-peer-without-edge", mode, tr.name, tr.binding, edgeBase + "/peers/" + bID, bID, tenant})
		}
	}
	for _, c := range runs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // the nodes are shared; each run is one node process
			runA2AClient(t, a2aRun{mode: c.mode, transport: c.transport, base: c.base, peer: c.peer}, a2aWantFor(c.mode, c.binding, c.tenant)...)
		})
	}
}

// TestA2AClientKey runs the same client with an API key, as the node's
// owner hands one out (mcpv2 key add NAME --grant ask,nap) and the user's
// agent sends it (a fetch that adds Authorization: Bearer), against a node
// whose policy grants callers without a credential nothing: the key runs
// the skills granted to it (ping is open to all), listTasks (v1.0) lists
// the key's own tasks, upload_file (not granted) is rejected with -32009;
// once the key is revoked (mcpv2 key revoke, while the node runs) its next
// request is refused with 401, and so is an expired key's.
func TestA2AClientKey(t *testing.T) {
	needNPM(t, "mcp-inspector") // the lock file installs @a2a-js/sdk with it
	a := startNode(t, "--port", "0", "--skills", napSkills(t))
	base, id := strings.TrimSuffix(a.mcpURL(), "/mcp"), a.first("MCPV2_PEER_ID")
	key := a.addKey(t, "agent", "--grant", "ask,nap")

	// The key as a user hands it to each of the SDK's bindings: the
	// Authorization header (JSON-RPC, HTTP+JSON) or gRPC metadata.
	for _, tr := range []string{"jsonrpc", "rest", "grpc"} {
		for _, mode := range []string{"v1", "v03"} {
			t.Run(tr+"-"+mode, func(t *testing.T) {
				w := append([]string{}, a2aWant...)
				w = append(w, "a skill not granted (upload_file): rejected, -32009")
				if mode == "v1" {
					w = append(w, "listTasks: ")
				}
				runA2AClient(t, a2aRun{mode: mode, transport: tr, base: base, peer: id, token: key, denied: "upload_file"}, w...)
			})
		}
	}
	t.Run("revoked", func(t *testing.T) {
		a.revokeKey(t, "agent")
		for _, mode := range []string{"v1", "v03"} {
			t.Logf("%s: %s", mode, runA2AClient(t, a2aRun{mode: mode, base: base, peer: id, token: key, probe: true}, "refused: HTTP 401, JsonRpcTransportError -32000: invalid API key: key revoked"))
		}
		for tr, want := range map[string]string{"rest": "refused: HTTP 401", "grpc": "refused: gRPC status 16"} { // 16: UNAUTHENTICATED
			t.Logf("%s: %s", tr, runA2AClient(t, a2aRun{mode: "v1", transport: tr, base: base, peer: id, token: key, probe: true}, want, "invalid API key: key revoked"))
		}
	})
	t.Run("expired", func(t *testing.T) {
		short := a.addKey(t, "brief", "--grant", "ask", "--expires", "1s")
		time.Sleep(2 * time.Second) // the one wait: the key's lifetime
		t.Logf("%s", runA2AClient(t, a2aRun{mode: "v1", base: base, peer: id, token: short, probe: true}, "refused: HTTP 401, JsonRpcTransportError -32000: invalid API key: key expired"))
	})
}
