package edge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// tlsFiles is a server certificate, its key and a client CA bundle on disk,
// and the client side: the server's CA and client certificates.
type tlsFiles struct {
	dir                  string
	cert, key, clientCA  string
	serverCA             *x509.CertPool
	good, wrong          tls.Certificate // signed by the client CA / by another CA
	otherCert, otherKeyF string          // a second, unrelated key pair on disk
}

func newTLSFiles(t *testing.T) *tlsFiles {
	t.Helper()
	dir := t.TempDir()
	serverCA, clientCA, otherCA := testenv.NewCA(t, "server CA"), testenv.NewCA(t, "client CA"), testenv.NewCA(t, "other CA")
	f := &tlsFiles{dir: dir, serverCA: x509.NewCertPool()}
	f.serverCA.AddCert(serverCA.Cert)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, k := serverCA.Issue(t, "edge", true)
	f.cert, f.key = write("edge.crt", c), write("edge.key", k)
	f.clientCA = write("client-ca.pem", clientCA.PEM)
	oc, ok := serverCA.Issue(t, "other edge", true)
	f.otherCert, f.otherKeyF = write("other.crt", oc), write("other.key", ok)
	pair := func(ca *testenv.CA, name string) tls.Certificate {
		c, k := ca.Issue(t, name, false)
		p, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	f.good, f.wrong = pair(clientCA, "alice"), pair(otherCA, "mallory")
	return f
}

// client returns an HTTPS client that trusts the server CA and presents
// certs; its idle connections are closed at the end of the test.
func (f *tlsFiles) client(t *testing.T, certs ...tls.Certificate) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.serverCA, Certificates: certs, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// startTLSEdge starts an edge on 127.0.0.1 with cfg's TLS files.
func startTLSEdge(t *testing.T, cfg Config) (*Server, *fakeBackend) {
	t.Helper()
	b := &fakeBackend{}
	cfg.BindHost = "127.0.0.1"
	cfg.Secret = testSecret
	s, err := New(b, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, b
}

// httpsDo sends a request with an optional session and JSON body, and
// returns the status and body, or the transport error.
func httpsDo(c *http.Client, method, u, token, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set(SessionHeader, token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// sessionAndPing gets a session over c and calls ping with it, failing the
// test unless both work.
func sessionAndPing(t *testing.T, c *http.Client, base string) {
	t.Helper()
	status, body, err := httpsDo(c, http.MethodGet, base+"/mcpv2/session", "", "")
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /mcpv2/session: %d %s %v", status, body, err)
	}
	var sa sessionAnswer
	if err := json.Unmarshal(body, &sa); err != nil || sa.SessionID == "" {
		t.Fatalf("session answer %s: %v", body, err)
	}
	tok, _, err := protocol.ParseToken(sa.SessionID)
	if err != nil || tok.Subject != "127.0.0.1" {
		t.Fatalf("session token %q: subject %q, %v; want the client IP 127.0.0.1", sa.SessionID, tok.Subject, err)
	}
	status, body, err = httpsDo(c, http.MethodPost, base+"/mcpv2", sa.SessionID,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ping","arguments":{}}}`)
	if err != nil || status != http.StatusOK {
		t.Fatalf("POST /mcpv2 ping: %d %s %v", status, body, err)
	}
	var r protocol.Response
	if err := json.Unmarshal(body, &r); err != nil || r.Error != nil || string(r.ID) != "7" || !strings.Contains(string(r.Result), `"pong":true`) {
		t.Fatalf("ping answer %s: %v", body, err)
	}
}

func getHealth(t *testing.T, c *http.Client, base string) HealthStatus {
	t.Helper()
	status, body, err := httpsDo(c, http.MethodGet, base+"/mcpv2/health", "", "")
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /mcpv2/health: %d %s %v", status, body, err)
	}
	var h HealthStatus
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("health %s: %v", body, err)
	}
	return h
}

func TestTLSEdge(t *testing.T) {
	f := newTLSFiles(t)
	s, b := startTLSEdge(t, Config{TLSCert: f.cert, TLSKey: f.key})
	if !s.TLS() || s.MTLS() {
		t.Fatalf("TLS() = %v, MTLS() = %v; want true, false", s.TLS(), s.MTLS())
	}
	base := "https://" + s.Addr().String()
	c := f.client(t)

	h := getHealth(t, c, base)
	wantAddr := "https://127.0.0.1:" + strconv.Itoa(s.BoundPort()) + "/mcpv2"
	if h.Status != "ok" || !h.TLS || h.MTLS || !h.Flags["tls"] || h.Flags["mtls"] || h.PeerAddress != wantAddr {
		t.Fatalf("health = %+v; want tls on, mtls off, peer address %s", h, wantAddr)
	}
	if s.PeerAddress() != wantAddr {
		t.Fatalf("PeerAddress = %q, want %q", s.PeerAddress(), wantAddr)
	}
	sessionAndPing(t, c, base)
	if cs := b.callerList(); len(cs) == 0 || cs[len(cs)-1].ID != "ip:127.0.0.1" {
		t.Fatalf("callers %+v: want the last one ip:127.0.0.1 (RemoteAddr, as over plain HTTP)", cs)
	}

	// The banner's addresses say https and parse as edge addresses that
	// edge.Client reaches over TLS.
	var demo string
	for _, l := range s.Banner() {
		if v, ok := strings.CutPrefix(l, "MCPV2_PEER_ADDRESS="); ok && v != wantAddr {
			t.Errorf("banner %q, want MCPV2_PEER_ADDRESS=%s", l, wantAddr)
		}
		if v, ok := strings.CutPrefix(l, "MCPV2_DEMO_SESSION_ADDRESS="); ok {
			demo = v
		}
	}
	if !strings.HasPrefix(demo, "https://127.0.0.1:") {
		t.Fatalf("demo session address %q does not say https", demo)
	}
	addr, err := protocol.ParseAddress(demo)
	if err != nil || addr.Kind != protocol.AddrHTTP || addr.URL != wantAddr || addr.SessionID == "" {
		t.Fatalf("ParseAddress(%q) = %+v, %v", demo, addr, err)
	}
	ec := newClient(t, WithHTTPClient(c))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if eh, err := ec.Health(ctx, addr); err != nil || !eh.TLS {
		t.Fatalf("Client.Health over https: %+v, %v", eh, err)
	}
	if res, err := ec.CallSkill(ctx, addr, "ping", nil, protocol.CallOptions{}); err != nil || !strings.Contains(string(res), `"pong":true`) {
		t.Fatalf("Client.CallSkill ping over https with the demo session: %s, %v", res, err)
	}

	// Plain HTTP to the TLS port is answered 400 by net/http, never served.
	plain := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer plain.CloseIdleConnections()
	status, body, err := httpsDo(plain, http.MethodGet, "http://"+s.Addr().String()+"/mcpv2/health", "", "")
	if err != nil || status != http.StatusBadRequest || strings.Contains(string(body), `"status"`) {
		t.Fatalf("plain HTTP to the TLS port: %d %q %v; want 400 without a health answer", status, body, err)
	}
	// A client that does not trust the server's CA refuses the server.
	untrusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer untrusting.CloseIdleConnections()
	var ua x509.UnknownAuthorityError
	if _, _, err := httpsDo(untrusting, http.MethodGet, base+"/mcpv2/health", "", ""); !errors.As(err, &ua) {
		t.Fatalf("a client without the server CA: %v; want an unknown authority error", err)
	}
}

func TestMutualTLS(t *testing.T) {
	f := newTLSFiles(t)
	s, _ := startTLSEdge(t, Config{TLSCert: f.cert, TLSKey: f.key, TLSClientCA: f.clientCA})
	if !s.TLS() || !s.MTLS() {
		t.Fatalf("TLS() = %v, MTLS() = %v; want both true", s.TLS(), s.MTLS())
	}
	base := "https://" + s.Addr().String()
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		ok    bool
	}{
		{"no client certificate", nil, false},
		{"certificate of another CA", []tls.Certificate{f.wrong}, false},
		{"certificate of the client CA", []tls.Certificate{f.good}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.client(t, tc.certs...)
			if !tc.ok {
				for _, path := range []string{"/mcpv2/health", "/mcpv2/session"} {
					status, body, err := httpsDo(c, http.MethodGet, base+path, "", "")
					if err == nil {
						t.Fatalf("GET %s: %d %s; want the handshake refused", path, status, body)
					}
					if !strings.Contains(err.Error(), "certificate") {
						t.Errorf("GET %s: %v; want a certificate error", path, err)
					}
				}
				return
			}
			h := getHealth(t, c, base)
			if !h.TLS || !h.MTLS || !h.Flags["mtls"] {
				t.Fatalf("health = %+v; want tls and mtls true", h)
			}
			sessionAndPing(t, c, base)
		})
	}
}

// TestTLSConfigErrors: a bad TLS setting fails New with an error naming the
// file and the trouble, and leaves the port free.
func TestTLSConfigErrors(t *testing.T) {
	f := newTLSFiles(t)
	missing := filepath.Join(f.dir, "missing.pem")
	notPEM := filepath.Join(f.dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello, not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(f.dir, "dir.pem")
	if err := os.Mkdir(unreadable, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"cert missing", Config{TLSCert: missing, TLSKey: f.key}, []string{"--tls-cert " + missing, "no such file"}},
		{"key missing", Config{TLSCert: f.cert, TLSKey: missing}, []string{"--tls-key " + missing, "no such file"}},
		{"cert unreadable", Config{TLSCert: unreadable, TLSKey: f.key}, []string{"--tls-cert " + unreadable, "directory"}},
		{"cert not PEM", Config{TLSCert: notPEM, TLSKey: f.key}, []string{"--tls-cert " + notPEM, "no PEM certificate"}},
		{"key not PEM", Config{TLSCert: f.cert, TLSKey: notPEM}, []string{"--tls-key " + notPEM, "do not make a key pair"}},
		{"key of another cert", Config{TLSCert: f.cert, TLSKey: f.otherKeyF}, []string{f.cert, f.otherKeyF, "do not make a key pair", "does not match"}},
		{"cert without key", Config{TLSCert: f.cert}, []string{"--tls-cert " + f.cert, "without --tls-key"}},
		{"key without cert", Config{TLSKey: f.key}, []string{"--tls-key " + f.key, "without --tls-cert"}},
		{"client CA without cert and key", Config{TLSClientCA: f.clientCA}, []string{"--tls-client-ca " + f.clientCA, "needs --tls-cert and --tls-key"}},
		{"client CA with no certificate", Config{TLSCert: f.cert, TLSKey: f.key, TLSClientCA: notPEM}, []string{"--tls-client-ca " + notPEM, "no PEM certificates"}},
		{"client CA is a key", Config{TLSCert: f.cert, TLSKey: f.key, TLSClientCA: f.key}, []string{"--tls-client-ca " + f.key, "no PEM certificates"}},
		{"client CA missing", Config{TLSCert: f.cert, TLSKey: f.key, TLSClientCA: missing}, []string{"--tls-client-ca " + missing, "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freeTestPort(t)
			cfg := tc.cfg
			cfg.Port, cfg.BindHost = port, "127.0.0.1"
			s, err := New(&fakeBackend{}, cfg)
			if err == nil {
				_ = s.Close()
				t.Fatal("New succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			ln, lerr := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if lerr != nil {
				t.Fatalf("port %d not free after the failed New: %v", port, lerr)
			}
			_ = ln.Close()
		})
	}
}

// freeTestPort returns a port of 127.0.0.1 that was free a moment ago.
func freeTestPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
