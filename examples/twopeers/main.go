// Command twopeers starts two mcpv2 nodes in one process on loopback; A calls
// B's skills over libp2p and prints what happened. The two share a mesh
// secret, so B grants A every skill (SPEC §6).
//
//	go run ./examples/twopeers
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	tmp, err := os.MkdirTemp("", "mcpv2-twopeers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	secret := []byte("example-shared-secret")
	start := func(name string) (*node.Node, error) {
		return node.New(node.Config{
			DataDir: filepath.Join(tmp, name), Name: name, Secret: secret, LLMMode: true,
			ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"},
		})
	}
	a, err := start("alice")
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := start("bob")
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Printf("A = %s\nB = %s\n", a.ID(), b.ID())

	addr, err := protocol.ParseAddress(b.P2PAddrs()[0])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	call := func(skill, args string) error {
		start := time.Now()
		res, err := a.Client().CallSkill(ctx, addr, skill, json.RawMessage(args), protocol.CallOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", skill, err)
		}
		fmt.Printf("A → B %-18s %6.2f ms  %s\n", skill, float64(time.Since(start).Microseconds())/1000, res)
		return nil
	}
	steps := [][2]string{
		{"ping", `{"payload":"hello"}`},
		{"ask", `{"query":"My name is Ada and my favourite colour is teal.","conversation_id":"demo"}`},
		{"ask", `{"query":"What is my favourite colour?","conversation_id":"demo"}`},
		{"upload_file", `{"filename":"notes.md","content":"# Notes\nmcpv2 peers call each other.\n"}`},
		{"list_files", `{}`},
		{"process_instructions", `{"filename":"notes.md","instructions":"count the words"}`},
		{"translate_history", `{"from":"openai","to":"gemini","history":[{"role":"user","content":"Hi"}]}`},
		{"delete_file", `{"filename":"notes.md"}`},
	}
	for _, s := range steps {
		if err := call(s[0], s[1]); err != nil {
			return err
		}
	}
	tools, err := a.Client().CallMethod(ctx, addr, protocol.MethodToolsList, protocol.CallOptions{})
	if err != nil {
		return err
	}
	var tl struct {
		Tools []protocol.SkillDescriptor `json:"tools"`
	}
	if err := json.Unmarshal(tools, &tl); err != nil {
		return err
	}
	fmt.Printf("B has %d skills:", len(tl.Tools))
	for _, t := range tl.Tools {
		fmt.Printf(" %s", t.Name)
	}
	fmt.Println()
	return nil
}
