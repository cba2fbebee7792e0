package mcptest

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

// npmDir holds the pinned third-party clients (package-lock.json); npm ci
// installs them into its node_modules when missing.
var npmDir, _ = filepath.Abs(filepath.Join("testdata", "npm"))

func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithMCPV2(m, "mcpv2-mcptest-bin-", false, &binPath, func() error {
		return goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
	}))
}

var npmOnce struct {
	sync.Once
	err error
}

// needNPM installs the pinned npm packages (npm ci from the committed lock
// file) once per run when they are missing, and returns the path of a
// package's bin. .ci/run installs them before the tests; a developer's
// first go test does it here.
func needNPM(t *testing.T, bin string) string {
	t.Helper()
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(npmDir, "node_modules", ".package-lock.json")); err == nil {
			return
		}
		if _, err := exec.LookPath("npm"); err != nil {
			npmOnce.err = fmt.Errorf("npm is not installed: %w", err)
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = npmDir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmOnce.err = fmt.Errorf("npm ci in %s: %v\n%s", npmDir, err, out)
		}
	})
	if npmOnce.err != nil {
		testenv.SkipEnv(t, "%v", npmOnce.err)
	}
	p := filepath.Join(npmDir, "node_modules", ".bin", bin)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed by the lock file: %v", bin, err)
	}
	return p
}

// proc is a running mcpv2 node (testenv.Proc) with this package's
// helpers; cmd is Proc.Cmd.
type proc struct {
	*testenv.Proc
	cmd *exec.Cmd
}

// first returns the banner's first value of key.
func (p *proc) first(key string) string { return p.First(key) }

// startNode runs `mcpv2 node` with a fresh data dir and args, as a user
// starts it (the flags they would give; a free P2P port, since several run
// on one machine), and waits for its banner (testenv.StartProc). It is
// stopped when the test ends.
func startNode(t *testing.T, args ...string) *proc {
	t.Helper()
	p := testenv.StartProc(t, append([]string{binPath, "node", "--data-dir", t.TempDir(), "--p2p-port", "0"}, args...)...)
	return &proc{Proc: p, cmd: p.Cmd}
}

// startNodeWithPolicy is startNode with a policy file (--policy) holding
// grants (testenv.PolicyFile).
func startNodeWithPolicy(t *testing.T, grants map[string][]string, args ...string) *proc {
	t.Helper()
	return startNode(t, append([]string{"--policy", testenv.PolicyFile(t, grants)}, args...)...)
}

// grantHTTPAll is the policy of a node that serves every skill to a caller
// with only its URL.
var grantHTTPAll = map[string][]string{"http": {"*"}}

// mcpv2 runs the mcpv2 CLI with args (not a node: a command that ends) and
// returns its exit code, stdout and stderr.
func mcpv2(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	out, errs, code := testenv.Run(t, binPath, args...)
	return code, out, errs
}

// addKey runs `mcpv2 key add NAME [--grant …] [--expires …]` against the
// node's data dir while the node runs, as its owner would, and returns the
// key it prints once.
func (p *proc) addKey(t *testing.T, name string, args ...string) string {
	t.Helper()
	code, out, errs := mcpv2(t, append([]string{"key", "add", name, "--data-dir", p.first("MCPV2_DATA_DIR")}, args...)...)
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

// revokeKey runs `mcpv2 key revoke NAME` against the node's data dir while
// the node runs.
func (p *proc) revokeKey(t *testing.T, name string) {
	t.Helper()
	if code, out, errs := mcpv2(t, "key", "revoke", name, "--data-dir", p.first("MCPV2_DATA_DIR")); code != 0 {
		t.Fatalf("mcpv2 key revoke %s: exit %d\n%s\n%s", name, code, out, errs)
	}
}

// mcpURL is the node's /mcp on loopback (the edge serves 127.0.0.1 beside
// its detected address).
func (p *proc) mcpURL() string { return "http://127.0.0.1:" + p.first("MCPV2_BOUND_PORT") + "/mcp" }

// secretSession is a session of a secret holder of secret for a client on
// loopback, minted as mcpv2's own client mints it.
func secretSession(secret string) string {
	tok, _ := protocol.MintToken([]byte(secret), "127.0.0.1", time.Now(), time.Hour)
	return tok
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}
