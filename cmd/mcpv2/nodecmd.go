package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/transport"
)

func nodeCommand() *cli.Command {
	return &cli.Command{
		Name:  "node",
		Usage: "run a peer (mesh always; HTTP edge with --port)",
		Flags: []cli.Flag{
			dataDirFlag, secretFlag, logLevelFlag, maxMessageFlag,
			&cli.StringSliceFlag{Name: "listen", EnvVars: []string{"MCPV2_LISTEN"},
				Usage: "multiaddrs to listen on (default TCP and QUIC-v1 on port 4001, every interface)"},
			&cli.IntFlag{Name: "p2p-port", EnvVars: []string{"MCPV2_P2P_PORT"}, Value: transport.DefaultPort,
				Usage: "TCP/UDP port of the default listen addresses (0: any free port)"},
			&cli.StringFlag{Name: "name", EnvVars: []string{"MCPV2_NAME"}, Usage: "agent name in the card"},
			&cli.StringFlag{Name: "description", EnvVars: []string{"MCPV2_DESCRIPTION"}, Usage: "agent description in the card"},
			&cli.BoolFlag{Name: "llm-mode", EnvVars: []string{"MCPV2_LLM_MODE"}, Usage: "ask keeps per-conversation history (persisted)"},
			&cli.StringFlag{Name: "llm", EnvVars: []string{"MCPV2_LLM"}, Value: "local",
				Usage: "LLM backend: local, openai (any OpenAI-compatible server), anthropic or gemini"},
			&cli.StringFlag{Name: "llm-url", EnvVars: []string{"MCPV2_LLM_URL"}, Usage: "backend base URL (setting it alone selects openai)"},
			&cli.StringFlag{Name: "llm-model", EnvVars: []string{"MCPV2_LLM_MODEL"}, Usage: "backend model name"},
			&cli.StringFlag{Name: "policy", EnvVars: []string{"MCPV2_POLICY"}, Usage: "policy file granting skills per PeerID (default <data-dir>/policy.json)"},
			&cli.StringFlag{Name: "skills", EnvVars: []string{"MCPV2_SKILLS"}, Usage: "custom skills file (default <data-dir>/custom_skills.json)"},
			&cli.StringFlag{Name: "file-store", EnvVars: []string{"MCPV2_FILE_STORE"}, Usage: "directory of the file skills (default <data-dir>/files)"},
			&cli.Int64Flag{Name: "max-file", EnvVars: []string{"MCPV2_MAX_FILE"}, Value: 64 << 20, Usage: "largest stored file in bytes"},
			&cli.Float64Flag{Name: "rate-limit", EnvVars: []string{"MCPV2_RATE_LIMIT"}, Value: 200, Usage: "calls per second per caller (0: unlimited)"},
		},
		Action: runNode,
	}
}

func runNode(c *cli.Context) error {
	log, err := logger(c)
	if err != nil {
		return err
	}
	dir, err := dataDir(c)
	if err != nil {
		return err
	}
	backend, err := llmBackend(c)
	if err != nil {
		return err
	}
	listen := c.StringSlice("listen")
	if len(listen) == 0 {
		for _, a := range transport.DefaultListenAddrs(c.Int("p2p-port")) {
			listen = append(listen, a.String())
		}
	}
	rl := c.Float64("rate-limit")
	if rl == 0 {
		rl = -1
	}
	n, err := node.New(node.Config{
		DataDir: dir, ListenAddrs: splitList(listen),
		Name: c.String("name"), Description: c.String("description"),
		MaxMessage: c.Int("max-message"), MaxFile: c.Int64("max-file"), FilesDir: c.String("file-store"),
		LLM: backend, LLMMode: c.Bool("llm-mode"), Secret: []byte(c.String("secret")),
		PolicyFile: c.String("policy"), SkillsFile: c.String("skills"), RateLimit: rl,
		Logger: log,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "MCPV2_PEER_ID=%s\n", n.ID())
	for _, a := range n.P2PAddrs() {
		fmt.Fprintf(c.App.Writer, "MCPV2_P2P_ADDRESS=%s\n", a)
	}
	fmt.Fprintf(c.App.Writer, "MCPV2_DATA_DIR=%s\n", n.DataDir())
	if f, ok := c.App.Writer.(*os.File); ok {
		_ = f.Sync()
	}
	<-c.Context.Done()
	log.Info("shutting down")
	return n.Close()
}

// llmBackend builds the backend of --llm/--llm-url/--llm-model; the key comes
// only from MCPV2_LLM_API_KEY or MCPV2_LLM_API_KEY_FILE.
func llmBackend(c *cli.Context) (llm.Backend, error) {
	kind := c.String("llm")
	if kind == "local" && c.String("llm-url") != "" && !c.IsSet("llm") {
		kind = "openai"
	}
	if kind == "local" {
		return llm.NewLocal(), nil
	}
	key, err := llm.KeyFromEnv()
	if err != nil {
		return nil, err
	}
	return llm.New(kind, c.String("llm-url"), c.String("llm-model"), key)
}

// identityPath is where a data dir keeps its key.
func identityPath(dir string) string { return filepath.Join(dir, "identity.key") }
