package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// tlsE2ESecret is the --secret of the TLS process test's node.
const tlsE2ESecret = "tls-e2e-secret"

// pemCA is a test CA (testenv.CA) with its certificate's PEM file.
type pemCA struct {
	*testenv.CA
	file string
}

// newPEMCA makes a CA and writes its certificate to dir/name.pem.
func newPEMCA(t *testing.T, dir, name string) *pemCA {
	t.Helper()
	ca := testenv.NewCA(t, name)
	return &pemCA{CA: ca, file: writeFile(t, filepath.Join(dir, name+".pem"), string(ca.PEM))}
}

// issue writes a leaf certificate and its key, signed by ca, to
// dir/name.crt and dir/name.key: a server certificate for 127.0.0.1 (and
// localhost), or a client certificate.
func (ca *pemCA) issue(t *testing.T, dir, name string, server bool) (certFile, keyFile string) {
	t.Helper()
	c, k := ca.Issue(t, name, server)
	certFile = writeFile(t, filepath.Join(dir, name+".crt"), string(c))
	keyFile = writeFile(t, filepath.Join(dir, name+".key"), string(k))
	return certFile, keyFile
}

// curlResult is one run of the curl binary.
type curlResult struct {
	exit   int    // curl's exit code (0: an HTTP answer came)
	status int    // the HTTP status, 0 when none
	body   []byte // the answer's body
	stderr string
}

func (r curlResult) String() string {
	return fmt.Sprintf("curl exit %d, HTTP %d, body %q, stderr %q", r.exit, r.status, r.body, strings.TrimSpace(r.stderr))
}

// runCurlBin runs curl with args and returns what it did.
func runCurlBin(t *testing.T, curl string, args ...string) curlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, curl, append([]string{"-sS", "--max-time", "20", "-w", "\n%{http_code}"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := curlResult{stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("curl %v: %v", args, err)
	}
	b := out.Bytes()
	i := bytes.LastIndexByte(b, '\n')
	if i >= 0 {
		r.status, _ = strconv.Atoi(string(b[i+1:]))
		r.body = b[:i]
	}
	return r
}

// TestTLSEdgeCurl runs `mcpv2 node` with --tls-cert, --tls-key,
// --tls-client-ca and --enable-mtls, and the real curl against it: with the
// right client certificate it gets health (mtls true), the card
// (capabilities.mtls), a session and ping, and with a secret holder's token
// a granted skill; without a client certificate, with one of another CA, or
// without trusting the server's CA the handshake fails; plain HTTP to the
// port gets no answer of the edge.
func TestTLSEdgeCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		testenv.SkipEnv(t, "curl is not installed (CI: add curl to .ci/run's apt packages)")
	}
	dir := t.TempDir()
	serverCA, clientCA, otherCA := newPEMCA(t, dir, "server-ca"), newPEMCA(t, dir, "client-ca"), newPEMCA(t, dir, "other-ca")
	srvCert, srvKey := serverCA.issue(t, dir, "edge", true)
	goodCert, goodKey := clientCA.issue(t, dir, "alice", false)
	wrongCert, wrongKey := otherCA.issue(t, dir, "mallory", false)

	port := testenv.FreePort(t)
	startNode(t, "", "--port", strconv.Itoa(port), "--bind-host", "127.0.0.1", "--no-mesh", "--secret", tlsE2ESecret,
		"--tls-cert", srvCert, "--tls-key", srvKey, "--tls-client-ca", clientCA.file, "--enable-mtls")
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	peerAddr := base + "/mcpv2"
	// Clipped, so that every append below makes a new slice.
	trusted := slices.Clip([]string{"--cacert", serverCA.file})
	withCert := slices.Clip(append(trusted, "--cert", goodCert, "--key", goodKey))

	t.Run("client certificate of the CA", func(t *testing.T) {
		r := runCurlBin(t, curl, append(withCert, base+"/mcpv2/health")...)
		var h struct {
			Status      string          `json:"status"`
			TLS         bool            `json:"tls"`
			MTLS        bool            `json:"mtls"`
			Flags       map[string]bool `json:"flags"`
			PeerAddress string          `json:"peer_address"`
		}
		if r.exit != 0 || r.status != http.StatusOK || json.Unmarshal(r.body, &h) != nil ||
			h.Status != "ok" || !h.TLS || !h.MTLS || !h.Flags["mtls"] || h.PeerAddress != peerAddr {
			t.Fatalf("health: %s; want ok, tls and mtls true, peer_address %s", r, peerAddr)
		}

		r = runCurlBin(t, curl, append(withCert, base+"/mcpv2/agent-card")...)
		var card protocol.AgentCard
		if r.exit != 0 || r.status != http.StatusOK || json.Unmarshal(r.body, &card) != nil ||
			!card.Capabilities.MTLS || card.Endpoints.HTTP != peerAddr {
			t.Fatalf("agent card: %s; want capabilities.mtls true and endpoints.http %s", r, peerAddr)
		}

		r = runCurlBin(t, curl, append(withCert, base+"/mcpv2/session")...)
		var s struct {
			SessionID string `json:"sessionId"`
		}
		if r.exit != 0 || r.status != http.StatusOK || json.Unmarshal(r.body, &s) != nil || s.SessionID == "" {
			t.Fatalf("session: %s", r)
		}
		ping := `{"jsonrpc":"2.0","id":"p1","method":"tools/call","params":{"name":"ping","arguments":{}}}`
		r = runCurlBin(t, curl, append(withCert, "-X", "POST", "-H", "Content-Type: application/json",
			"-H", "X-MCPV2-Session: "+s.SessionID, "--data-binary", ping, base+"/mcpv2")...)
		var resp protocol.Response
		if r.exit != 0 || r.status != http.StatusOK || json.Unmarshal(r.body, &resp) != nil || resp.Error != nil ||
			string(resp.ID) != `"p1"` || !bytes.Contains(resp.Result, []byte(`"pong":true`)) {
			t.Fatalf("ping with the session over mTLS: %s", r)
		}

		// A secret holder's token (minted with --secret for the client IP,
		// as the seed's client did) works over TLS as over plain HTTP.
		tok, _ := protocol.MintToken([]byte(tlsE2ESecret), "127.0.0.1", time.Now(), 5*time.Minute)
		list := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_files","arguments":{}}}`
		r = runCurlBin(t, curl, append(withCert, "-X", "POST", "--data-binary", list, base+"/mcpv2?sessionId="+tok)...)
		resp = protocol.Response{}
		if r.exit != 0 || r.status != http.StatusOK || json.Unmarshal(r.body, &resp) != nil || resp.Error != nil || string(resp.ID) != "2" {
			t.Fatalf("list_files as a secret holder over mTLS: %s", r)
		}
	})

	// Refused before HTTP: curl exits non-zero with no HTTP status.
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no client certificate", trusted},
		{"client certificate of another CA", append(trusted, "--cert", wrongCert, "--key", wrongKey)},
		{"server CA not trusted", []string{"--cert", goodCert, "--key", goodKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/mcpv2/health", "/mcpv2/session"} {
				r := runCurlBin(t, curl, append(tc.args, base+path)...)
				if r.exit == 0 || r.status != 0 || len(r.body) != 0 {
					t.Fatalf("GET %s: %s; want the TLS handshake to fail", path, r)
				}
				t.Logf("GET %s refused: %s", path, r)
			}
		})
	}

	t.Run("plain HTTP", func(t *testing.T) {
		r := runCurlBin(t, curl, fmt.Sprintf("http://127.0.0.1:%d/mcpv2/health", port))
		if r.status != http.StatusBadRequest || bytes.Contains(r.body, []byte(`"status"`)) {
			t.Fatalf("plain HTTP to the TLS port: %s; want 400 and no health answer", r)
		}
	})
}

// TestTLSFlagErrors: TLS flags that cannot work stop `mcpv2 node` at once
// with a message that names the flag or the file.
func TestTLSFlagErrors(t *testing.T) {
	dir := t.TempDir()
	ca := newPEMCA(t, dir, "ca")
	cert, key := ca.issue(t, dir, "edge", true)
	_, otherKey := ca.issue(t, dir, "other", true)
	missing := filepath.Join(dir, "missing.crt")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"enable-mtls without a client CA", []string{"--tls-cert", cert, "--tls-key", key, "--enable-mtls"}, []string{"--enable-mtls needs --tls-client-ca"}},
		{"TLS without --port", []string{"--tls-cert", cert, "--tls-key", key}, []string{"add --port"}},
		{"missing certificate", []string{"--tls-cert", missing, "--tls-key", key}, []string{"--tls-cert " + missing, "no such file"}},
		{"client CA without a certificate", []string{"--tls-client-ca", ca.file}, []string{"--tls-client-ca " + ca.file, "needs --tls-cert and --tls-key"}},
		{"key of another certificate", []string{"--tls-cert", cert, "--tls-key", otherKey}, []string{"do not make a key pair"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"node", "--data-dir", t.TempDir(), "--no-mesh", "--listen", "/ip4/127.0.0.1/tcp/0", "--bind-host", "127.0.0.1"}
			if tc.name != "TLS without --port" {
				args = append(args, "--port", strconv.Itoa(testenv.FreePort(t)))
			}
			out, errs, code := run(t, append(args, tc.args...)...)
			if code == 0 || strings.Contains(out, "MCPV2_PEER_ID=") {
				t.Fatalf("node started: exit %d, stdout %q", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not contain %q", errs, w)
				}
			}
		})
	}
}
