package custom

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// TestHTTPRedirects attacks the http handler's custom headers with
// redirects: a service (or whoever controls its answer) that redirects to
// another host must not receive them there. A redirect within the same
// scheme and host is followed, up to maxRedirects of them.
func TestHTTPRedirects(t *testing.T) {
	t.Setenv("MCPV2_TEST_API_KEY", "k-secret-42")
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		otherHits.Add(1)
		fmt.Fprintf(w, `{"stolen":%q}`, req.Header.Get("X-Api-Key"))
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/cross": // 307 keeps the method, the body and every custom header
			http.Redirect(w, req, other.URL+"/collect", http.StatusTemporaryRedirect)
		case "/cross-localhost": // the same machine, named differently
			http.Redirect(w, req, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/collect", http.StatusTemporaryRedirect)
		case "/same":
			http.Redirect(w, req, "/final", http.StatusTemporaryRedirect)
		case "/hop": // n more hops, then /final
			n, _ := strconv.Atoi(req.URL.Query().Get("n"))
			if n <= 0 {
				http.Redirect(w, req, "/final", http.StatusTemporaryRedirect)
				return
			}
			http.Redirect(w, req, fmt.Sprintf("/hop?n=%d", n-1), http.StatusTemporaryRedirect)
		case "/final":
			fmt.Fprintf(w, `{"key":%q,"method":%q}`, req.Header.Get("X-Api-Key"), req.Method)
		case "/bighead":
			w.Header().Set("X-Pad", strings.Repeat("x", 2*maxHeaderBytes))
			fmt.Fprint(w, `{}`)
		}
	}))
	defer srv.Close()
	skill := func(name, path string) map[string]any {
		return map[string]any{"name": name, "handler": map[string]any{
			"type": "http", "url": srv.URL + path, "timeout_s": 10,
			"headers": map[string]string{"X-Api-Key": "${ENV:MCPV2_TEST_API_KEY}"},
		}}
	}
	file := writeFile(t,
		skill("cross", "/cross"), skill("cross_localhost", "/cross-localhost"), skill("same", "/same"),
		skill("hops5", "/hop?n=4"), skill("hops6", "/hop?n=5"), skill("bighead", "/bighead"),
	)
	for _, tc := range []struct {
		name   string
		client *http.Client
	}{
		{"built-in client", nil},
		{"caller's client", &http.Client{Transport: srv.Client().Transport}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := loadFile(t, file, WithHTTPClient(tc.client))
			ctx := t.Context()
			for _, s := range []string{"cross", "cross_localhost"} {
				_, pe := callSkill(t, ctx, r, s, `{"q":1}`)
				wantError(t, pe, protocol.CodeToolExecution, fmt.Sprintf("http skill %q: redirect to another host refused", s))
				if pe != nil && (strings.Contains(pe.Message, other.URL) || strings.Contains(pe.Message, "k-secret")) {
					t.Errorf("%s: the message names the target or the key: %q", s, pe.Message)
				}
			}
			if n := otherHits.Load(); n != 0 {
				t.Fatalf("the other host received %d requests; want none", n)
			}
			out, pe := callSkill(t, ctx, r, "same", `{}`)
			if pe != nil || string(out) != `{"key":"k-secret-42","method":"POST"}` {
				t.Errorf("same-host redirect = %s, %v", out, pe)
			}
			// Five redirects are followed (hop 4..0, then /final), a sixth is not.
			if out, pe := callSkill(t, ctx, r, "hops5", `{}`); pe != nil || !strings.Contains(string(out), `"key":"k-secret-42"`) {
				t.Errorf("5 redirects = %s, %v", out, pe)
			}
			_, pe = callSkill(t, ctx, r, "hops6", `{}`)
			wantError(t, pe, protocol.CodeToolExecution, `http skill "hops6": stopped after 5 redirects`)
			if tc.client == nil {
				_, pe = callSkill(t, ctx, r, "bighead", `{}`)
				wantError(t, pe, protocol.CodeToolExecution, `http skill "bighead": request failed`)
			}
		})
	}
}

// TestHTTPClientBounds checks the timeouts of the built-in client,
// which a test cannot provoke on loopback (dial, TLS handshake).
func TestHTTPClientBounds(t *testing.T) {
	c := newHTTPClient(nil, 7*time.Second)
	tr, ok := c.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T; want *http.Transport", c.Transport)
	}
	if tr.DialContext == nil || tr.TLSHandshakeTimeout != tlsTimeout || tr.ResponseHeaderTimeout != 7*time.Second ||
		tr.MaxResponseHeaderBytes != maxHeaderBytes || c.CheckRedirect == nil {
		t.Errorf("client bounds: dial %v, TLS %v, header %v, header bytes %d, redirect check %v",
			tr.DialContext != nil, tr.TLSHandshakeTimeout, tr.ResponseHeaderTimeout, tr.MaxResponseHeaderBytes, c.CheckRedirect != nil)
	}
	base := &http.Client{Timeout: time.Hour}
	if c := newHTTPClient(base, time.Second); c == base || c.CheckRedirect == nil || base.CheckRedirect != nil {
		t.Error("a caller's client must be copied, not changed, and get the redirect check")
	}
}

// TestOptionsRefused checks options that fail New, and so the load.
func TestOptionsRefused(t *testing.T) {
	file := writeFile(t, greetSkill)
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"negative cap", []Option{WithMaxCommandRuns(-1)}, "max command runs: -1 is negative"},
		{"unknown user", []Option{WithRunAs("mcpv2-no-such-user")}, `run-as "mcpv2-no-such-user": no such user`},
		{"unknown uid", []Option{WithRunAs("4000000000")}, `run-as "4000000000": no such user`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRegistry(t)
			_, err := loadInto(t, r, file, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want it to contain %q", err, tc.want)
			}
			if len(r.Names()) != 1 {
				t.Errorf("registered %q after a failed load", r.Names())
			}
		})
	}
	l, err := New(newTestRegistry(t), WithMaxCommandRuns(0))
	if err != nil || l.cfg.maxCommandRuns != DefaultMaxCommandRuns || cap(l.runs) != DefaultMaxCommandRuns {
		t.Errorf("default cap: %v, %d, %d", err, l.cfg.maxCommandRuns, cap(l.runs))
	}
}
