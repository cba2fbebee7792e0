package mcptest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestA2AClient runs an A2A client on @a2a-js/sdk 1.3.0 (pinned;
// testdata/npm/a2a-client.mjs) against a node's A2A face, in the SDK's
// v1.0, in its v0.3 mode, and with no A2A-Version header (answered as
// 0.3): the card's signature checked with the SDK's own verifier and the
// key of the PeerID (a forged card refused), a skill run from a data part,
// text to ask, a streamed task to its end, getTask, listTasks (v1.0),
// cancel of a finished task (-32002), an unknown task (-32001), and a
// resubscription to a running task after its stream was dropped that
// replays the event missed meanwhile. The same client, pointed at
// /peers/{B} on A's edge, uses node B, which has no edge of its own: B's
// card, signed by B, and B's skills over libp2p.
func TestA2AClient(t *testing.T) {
	needNPM(t, "mcp-inspector") // the lock file installs @a2a-js/sdk with it
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipEnv(t, "node is not installed: %v", err)
	}
	skills := filepath.Join(t.TempDir(), "custom_skills.json")
	if err := os.WriteFile(skills, []byte(`{"skills":[{"name":"nap","description":"sleeps a second and a half","handler":{"type":"command","command":["sh","-c","sleep 1.5; echo '{\"slept\":true}'"]}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// B has no edge; A's edge serves it at /peers/{B}.
	b := startNode(t, "--secret", secret, "--skills", skills)
	a := startNode(t, "--port", "0", "--secret", secret, "--skills", skills, "--bootstrap", b.first("MCPV2_P2P_ADDRESS"))
	edgeBase := strings.TrimSuffix(a.mcpURL(), "/mcp")
	want := []string{"v1.0 card signature verified", "a forged card is refused", "ping completed", "ask answered",
		"a streamed task: task,statusUpdate,artifactUpdate,statusUpdate", "getTask", "cancelTask of a finished task: -32002",
		"getTask of an unknown task: -32001", "resubscribe after a dropped stream: statusUpdate,artifactUpdate,statusUpdate"}
	for _, c := range []struct{ name, mode, base, peer string }{
		{"v1", "v1", edgeBase, a.first("MCPV2_PEER_ID")},
		{"v03", "v03", edgeBase, a.first("MCPV2_PEER_ID")},
		{"noheader", "noheader", edgeBase, a.first("MCPV2_PEER_ID")},
		{"peer-without-edge-v1", "v1", edgeBase + "/peers/" + b.first("MCPV2_PEER_ID"), b.first("MCPV2_PEER_ID")},
		{"peer-without-edge-v03", "v03", edgeBase + "/peers/" + b.first("MCPV2_PEER_ID"), b.first("MCPV2_PEER_ID")},
	} {
		mode := c.mode
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, nodeBin, "a2a-client.mjs")
			cmd.Dir = npmDir
			cmd.Env = append(testenv.CleanEnv(), "A2A_BASE_URL="+c.base, "A2A_TOKEN="+secretSession(secret),
				"A2A_PEER_ID="+c.peer, "A2A_MODE="+mode)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("a2a-client.mjs (%s): %v\n%s\n%s", mode, err, out.String(), errb.String())
			}
			w := append([]string{}, want...)
			switch mode {
			case "v1":
				w = append(w, "listTasks", "A2A-Version headers sent: 1.0")
			case "v03":
				w = append(w, "A2A-Version headers sent: 0.3")
			case "noheader":
				w = append(w, "(none)")
			}
			for _, s := range w {
				if !strings.Contains(out.String(), "ok: ") || !strings.Contains(out.String(), s) {
					t.Errorf("%s: no %q in:\n%s", mode, s, out.String())
				}
			}
		})
	}
}
