package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestExampleMCPClientSkipsRelay runs examples/mcp/client as its README
// says, with --bootstrap the relay of a mesh of two (the relay R and an
// agent B): the skill runs on B, not on R nor on the client's own node
// (issue 26, item 8: it picked the relay and stopped there).
func TestExampleMCPClientSkipsRelay(t *testing.T) {
	const secret = "example-mcp-client-secret"
	r := startNode(t, "", "--secret", secret, "--no-mdns", "--no-nat")
	b := startNode(t, "", "--secret", secret, "--no-mdns", "--no-nat", "--bootstrap", r.tcpAddr(t), "--name", "agent-b")
	client := filepath.Join(t.TempDir(), "client")
	if out, err := exec.Command("go", "build", "-o", client, "../../examples/mcp/client").CombinedOutput(); err != nil {
		t.Fatalf("build examples/mcp/client: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, client, "--mcpv2", binPath, "--bootstrap", r.tcpAddr(t), "--skill", "ping")
	cmd.Env = append(testenv.CleanEnv(), "MCPV2_SECRET="+secret, "MCPV2_NO_MDNS=1", "MCPV2_NO_NAT=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("examples/mcp/client: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "ping on "+b.peerID+": ") {
		t.Errorf("the skill did not run on agent B %s:\n%s", b.peerID, out.String())
	}
	if strings.Contains(out.String(), "ping on "+r.peerID) {
		t.Errorf("the skill ran on the relay %s:\n%s", r.peerID, out.String())
	}
}
