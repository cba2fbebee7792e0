// Command client is an MCP client of the mcpv2 mesh, on the official go-sdk:
// it starts `mcpv2 mcp` (a node of its own that joins the mesh through
// --bootstrap), lists its tools, finds the agents that offer --skill with
// mesh_find and runs the skill on the best of them with mesh_call.
//
//	go run ./examples/mcp/client --bootstrap /ip4/…/p2p/12D3KooW… --secret S --skill ping
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	bin := flag.String("mcpv2", "mcpv2", "the mcpv2 command")
	bootstrap := flag.String("bootstrap", "", "a peer of the mesh (an MCPV2_P2P_ADDRESS line)")
	skill := flag.String("skill", "ping", "the skill to find and run")
	args := flag.String("args", "{}", "the skill's arguments, a JSON object")
	secret := flag.String("secret", os.Getenv("MCPV2_SECRET"), "the mesh's shared secret, so that its agents grant every skill (default $MCPV2_SECRET)")
	flag.Parse()
	if err := run(*bin, *bootstrap, *secret, *skill, json.RawMessage(*args)); err != nil {
		log.Fatal(err)
	}
}

func run(bin, bootstrap, secret, skill string, args json.RawMessage) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "mcpv2-mcp-client-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	argv := []string{"mcp", "--data-dir", dir}
	if bootstrap != "" {
		argv = append(argv, "--bootstrap", bootstrap)
	}
	cmd := exec.Command(bin, argv...)
	cmd.Env = os.Environ()
	if secret != "" {
		cmd.Env = append(cmd.Env, "MCPV2_SECRET="+secret) // not in argv, where ps shows it
	}
	cmd.Stderr = os.Stderr // the node's banner and logs
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpv2-example-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("start mcpv2 mcp: %w", err)
	}
	defer cs.Close()
	fmt.Printf("connected: %s %s, MCP %s\n", cs.InitializeResult().ServerInfo.Name, cs.InitializeResult().ServerInfo.Version, cs.InitializeResult().ProtocolVersion)

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Printf("%d tools:", len(tools.Tools))
	for _, t := range tools.Tools {
		fmt.Printf(" %s", t.Name)
	}
	fmt.Println()

	// mesh_find may come back empty while the node is still joining: ask
	// again for a while, as a model would.
	var found struct {
		Agents []struct {
			PeerID    string  `json:"peer_id"`
			Name      string  `json:"name"`
			Score     float64 `json:"score"`
			Reachable bool    `json:"reachable"`
		} `json:"agents"`
	}
	for len(found.Agents) == 0 {
		if err := callJSON(ctx, cs, "mesh_find", map[string]any{"skill_or_tag": skill, "limit": 5}, &found); err != nil {
			return err
		}
		if len(found.Agents) == 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("no agent of the mesh offers %q", skill)
			case <-time.After(2 * time.Second):
			}
		}
	}
	for _, a := range found.Agents {
		fmt.Printf("found %s (%s) score %.1f reachable %v\n", a.PeerID, a.Name, a.Score, a.Reachable)
	}
	var result json.RawMessage
	if err := callJSON(ctx, cs, "mesh_call", map[string]any{"peer": found.Agents[0].PeerID, "skill": skill, "arguments": args}, &result); err != nil {
		return err
	}
	fmt.Printf("%s on %s: %s\n", skill, found.Agents[0].PeerID, result)
	return nil
}

// callJSON calls a tool and decodes its structured result into v; an isError
// result is returned as an error with its text.
func callJSON(ctx context.Context, cs *mcp.ClientSession, tool string, args any, v any) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	if res.IsError {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			return fmt.Errorf("%s: %s", tool, tc.Text)
		}
		return errors.New(tool + " failed")
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
