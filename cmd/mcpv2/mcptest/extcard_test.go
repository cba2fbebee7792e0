package mcptest

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestA2AExtendedCard: @a2a-js/sdk 1.3.0's client.getAgentCard()
// (testdata/npm/a2a-extcard.mjs) sees on the public card that the node
// has an extended card and asks for it, as each of two API keys the
// node's owner made with different grants, and with no credential: the
// keys get different cards (the open ping and their own grants; in v1.0
// each signature checked with the SDK's verifier and the PeerID's key),
// the caller without one the public card, every skill.
func TestA2AExtendedCard(t *testing.T) {
	needNPM(t, "mcp-inspector") // the lock file installs @a2a-js/sdk with it
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipEnv(t, "node is not installed: %v", err)
	}
	a := startNode(t, "--port", "0")
	base, id := strings.TrimSuffix(a.mcpURL(), "/mcp"), a.first("MCPV2_PEER_ID")
	alpha := a.addKey(t, "alpha", "--grant", "list_files")
	beta := a.addKey(t, "beta", "--grant", "get_skill,read_file")
	for _, mode := range []string{"v1", "v03"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, nodeBin, "a2a-extcard.mjs")
			cmd.Dir = npmDir
			cmd.Env = append(testenv.CleanEnv(), "A2A_BASE_URL="+base, "A2A_PEER_ID="+id, "A2A_MODE="+mode, "A2A_TOKENS=alpha="+alpha+",beta="+beta)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("a2a-extcard.mjs (%s): %v\n%s\n%s", mode, err, out.String(), errb.String())
			}
			lines := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if name, skills, ok := strings.Cut(strings.TrimPrefix(l, "ok: "), ": "); ok {
					lines[name] = strings.TrimSuffix(skills, " (signature verified)")
					if mode == "v1" && !strings.HasSuffix(skills, " (signature verified)") {
						t.Errorf("%s: %s's card not verified: %s", mode, name, l)
					}
				}
			}
			if lines["alpha"] != "list_files,ping" || lines["beta"] != "get_skill,ping,read_file" {
				t.Errorf("%s: the keys' extended cards: %q", mode, lines)
			}
			anon := strings.Split(lines["anonymous"], ",")
			if len(anon) <= 3 || !strings.Contains(lines["anonymous"], "list_files") || !strings.Contains(lines["anonymous"], "get_skill") || !strings.Contains(lines["anonymous"], "ask") {
				t.Errorf("%s: the public card's skills, for a caller without a credential: %q", mode, lines["anonymous"])
			}
		})
	}
}
