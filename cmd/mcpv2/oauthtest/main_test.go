// Package oauthtest runs a real `mcpv2 node` process as an OAuth 2.1
// resource server (--oidc-issuer) against a real OpenID provider
// (zitadel/oidc's op, internal/oidctest) on loopback, and drives it with
// the MCP go-sdk's own auth support, as a client configured with only the
// node's URL and its OAuth client would: issue 19, acceptance 3.
//
// It is a package of its own so that it runs beside the other process
// tests (cmd/mcpv2/mcptest).
package oauthtest

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// binPath is the mcpv2 binary the tests run, built without the race
// detector (the processes are the product, not the test).
var binPath string

func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithMCPV2(m, "mcpv2-oauthtest-bin-", false, &binPath, func() error {
		return goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
	}))
}

// proc is a running mcpv2 node (testenv.Proc) with this package's
// helpers.
type proc struct{ *testenv.Proc }

// base is the node's edge on loopback, http://127.0.0.1:PORT.
func (p *proc) base() string { return "http://127.0.0.1:" + p.First("MCPV2_BOUND_PORT") }

// mcpURL is the node's /mcp on loopback: the URL a user gives an MCP
// client, and so the resource (RFC 8707) its tokens are for.
func (p *proc) mcpURL() string { return p.base() + "/mcp" }

// dataDir is the node's data dir (its audit.jsonl is there).
func (p *proc) dataDir() string { return p.First("MCPV2_DATA_DIR") }

// startNode runs `mcpv2 node` with an edge on a free port, a fresh data
// dir, a policy file holding grants (testenv.PolicyFile), and args, and
// waits for its banner (testenv.StartProc). It is stopped (SIGTERM, then
// killed after 10 s) when the test ends.
func startNode(t *testing.T, grants map[string][]string, args ...string) *proc {
	t.Helper()
	return &proc{testenv.StartProc(t, append([]string{binPath, "node", "--data-dir", t.TempDir(), "--p2p-port", "0", "--port", "0",
		"--policy", testenv.PolicyFile(t, grants)}, args...)...)}
}

// httpClient is a client of the test's own, whose idle connections are
// closed when the test ends.
func httpClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// recorder is an http.RoundTripper that logs each request it carries as
// "METHOD URL STATUS" (no query; "+bearer" after the method when it
// carries an Authorization: Bearer header), to show what a client did.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []string
}

// recordingClient is httpClient with a recorder.
func recordingClient(t *testing.T) (*http.Client, *recorder) {
	t.Helper()
	hc := httpClient(t)
	rec := &recorder{next: hc.Transport}
	hc.Transport = rec
	return hc, rec
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	u := *req.URL
	u.RawQuery = ""
	m := req.Method
	if strings.HasPrefix(req.Header.Get("Authorization"), "Bearer ") {
		m += "+bearer"
	}
	status := "error"
	if err == nil {
		status = strconv.Itoa(resp.StatusCode)
	}
	r.mu.Lock()
	r.log = append(r.log, m+" "+u.String()+" "+status)
	r.mu.Unlock()
	return resp, err
}

// lines returns the requests so far.
func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// inOrder reports whether want are among got, in this order (others
// between them allowed); else the first of want not found.
func inOrder(got, want []string) (bool, string) {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	if i == len(want) {
		return true, ""
	}
	return false, want[i]
}

// ctxT is a context that ends with the test, and at most 50 s from now.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	return ctx
}
