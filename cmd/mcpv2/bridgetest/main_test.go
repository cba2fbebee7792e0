// Package bridgetest runs issue 23's acceptance 2 with real processes: an
// external A2A agent that is not mcpv2 (cmd/mcpv2/mcptest/testdata/npm/
// a2a-agent.mjs, built only from @a2a-js/sdk 1.3.0's server side), in
// v1.0 and in v0.3, reached from a mesh of `mcpv2 node` processes through
// an a2a skill, bridged with `mcpv2 agents add --bridge`, found with
// `mcpv2 find`, used by `mcpv2 orchestrate` in a two-step plan beside a
// mesh agent running examples/orchestrate's demotools, called by an MCP
// client through mesh_call, and, once killed, shown unhealthy while the
// orchestrator fails over to another provider of its skill.
//
// It is a package of its own so that it runs beside the other process
// tests (cmd/mcpv2/mcptest).
package bridgetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// binPath is the mcpv2 binary the tests run, built without the race
// detector (the processes are the product, not the test).
var binPath string

// demo is examples/orchestrate/demotools, the program of the example's
// skills files, built once into its own directory (put on the agents'
// PATH) when a test first needs it.
var demo struct {
	sync.Once
	dir string
	err error
}

func TestMain(m *testing.M) {
	code := testenv.MainWithMCPV2(m, "mcpv2-bridgetest-bin-", false, &binPath, func() error {
		return goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
	})
	if demo.dir != "" {
		os.RemoveAll(demo.dir)
	}
	os.Exit(code)
}

// demotools returns the directory holding the built demotools.
func demotools(t *testing.T) string {
	t.Helper()
	demo.Do(func() {
		if demo.dir, demo.err = os.MkdirTemp("", "mcpv2-bridgetest-demotools-"); demo.err != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(demo.dir, "demotools"),
			"github.com/mcpv2/mcpv2/examples/orchestrate/demotools").CombinedOutput()
		if err != nil {
			demo.err = fmt.Errorf("build examples/orchestrate/demotools: %v\n%s", err, out)
		}
	})
	if demo.err != nil {
		t.Fatal(demo.err)
	}
	return demo.dir
}

// secret is the mesh's shared secret: the clients (mcpv2 call, find,
// orchestrate) are its secret holders, as the operator of a mesh is.
const secret = "bridgetest-shared-secret"

// proc is a running mcpv2 node (testenv.Proc) with this package's
// helpers.
type proc struct{ *testenv.Proc }

func (p *proc) peerID() string  { return p.First("MCPV2_PEER_ID") }
func (p *proc) p2pAddr() string { return p.First("MCPV2_P2P_ADDRESS") }
func (p *proc) dataDir() string { return p.First("MCPV2_DATA_DIR") }

// mcpURL is the node's /mcp on loopback.
func (p *proc) mcpURL() string { return "http://127.0.0.1:" + p.First("MCPV2_BOUND_PORT") + "/mcp" }

// startNode runs `mcpv2 node --name NAME` on loopback with a fresh data
// dir, the mesh's secret and args, as examples/orchestrate/run.sh starts
// its agents: through env(1), with demotools on PATH and the example's
// files as DEMOTOOLS_FILES. It waits for the banner; the node is stopped
// when the test ends.
func startNode(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	dir := demotools(t)
	files, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "orchestrate", "files"))
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"env", "PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH"), "DEMOTOOLS_FILES=" + files,
		"DEMOTOOLS_SLEEP_MS=0", binPath, "node", "--name", name, "--data-dir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0",
		"--no-mdns", "--secret", secret}, args...)
	return &proc{testenv.StartProc(t, argv...)}
}

// exampleAgent is the path of examples/orchestrate/agents/NAME.json.
func exampleAgent(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "orchestrate", "agents", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// client runs an mcpv2 client command (call, find, orchestrate) as the
// mesh's operator: the secret, the client's own data dir (its identity),
// joined through bootstrap. It returns stdout, stderr and the exit code.
func client(t *testing.T, dataDir, bootstrap string, args ...string) (string, string, int) {
	t.Helper()
	return testenv.Run(t, binPath, append(args, "--data-dir", dataDir, "--bootstrap", bootstrap, "--secret", secret)...)
}

// addKey runs `mcpv2 key add NAME --grant …` against the node's data dir
// while it runs, as its owner would, and returns the key it prints once.
func (p *proc) addKey(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, errs, code := testenv.Run(t, binPath, append([]string{"key", "add", name, "--data-dir", p.dataDir()}, args...)...)
	if code != 0 {
		t.Fatalf("mcpv2 key add %s %v: exit %d\n%s\n%s", name, args, code, out, errs)
	}
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, protocol.KeyPrefix) {
			return f
		}
	}
	t.Fatalf("mcpv2 key add %s printed no key on stdout:\n%s\nstderr: %s", name, out, errs)
	return ""
}

// ctxT is a context that ends with the test, and at most 90 s from now.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}
