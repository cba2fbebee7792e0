package netscope

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "10.1.2.3": "private", "192.168.0.1": "private",
		"172.16.5.5": "private", "fd00::1": "private", "100.64.0.1": "shared (CGNAT)", "169.254.169.254": "link-local",
		"fe80::1": "link-local", "0.0.0.0": "unspecified", "::": "unspecified", "0.1.2.3": "unspecified",
		"224.0.0.1": "link-local", "239.1.1.1": "multicast", "ff05::1": "multicast", "255.255.255.255": "broadcast",
		"::ffff:127.0.0.1": "loopback", "8.8.8.8": "", "2606:4700::1": "", "100.128.0.1": "",
	} {
		if got := Classify(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Classify(%s) = %q, want %q", addr, got, want)
		}
	}
}

func TestCheckAllow(t *testing.T) {
	allow, err := ParseAllow([]string{"127.0.0.0/8, 10.0.0.5", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	s := New(allow)
	for _, a := range []string{"127.0.0.1", "10.0.0.5", "fd00::7", "8.8.8.8"} {
		if err := s.Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("Check(%s) = %v, want allowed", a, err)
		}
	}
	for _, a := range []string{"10.0.0.6", "192.168.1.1", "::1"} {
		err := s.Check(netip.MustParseAddr(a))
		var se *Error
		if !errors.As(err, &se) || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), Flag) {
			t.Errorf("Check(%s) = %v, want a refusal naming it and %s", a, err, Flag)
		}
	}
	if _, err := ParseAllow([]string{"nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("ParseAllow(nope) = %v, want an error naming it", err)
	}
}

// TestClientRefusesLoopback dials a real server on 127.0.0.1: refused by
// the default scope (also after a redirect from an allowed one), reached
// with the prefix allowed.
func TestClientRefusesLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	_, err := New(nil).Client(0).Get(srv.URL)
	var se *Error
	if !errors.As(err, &se) || se.Class != "loopback" || !strings.Contains(err.Error(), "--outbound-allow 127.0.0.1/32") {
		t.Fatalf("default scope: got %v, want a loopback refusal naming the flag", err)
	}
	resp, err := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).Client(0).Get(srv.URL)
	if err != nil {
		t.Fatalf("allowed 127.0.0.0/8: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("allowed: body %q", b)
	}
	// A redirect from an allowed address to a refused one (localhost ::1
	// vs 127.0.0.1) is refused by the same dial check.
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(srv.URL, "127.0.0.1", "[::1]", 1), http.StatusFound)
	}))
	defer redir.Close()
	_, err = New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}).Client(0).Get(redir.URL)
	if !errors.As(err, &se) || se.Addr != netip.MustParseAddr("::1") {
		t.Fatalf("redirect to ::1: got %v, want it refused", err)
	}
}

// TestClassifyEmbeddedAndReserved: NAT64 and 6to4 addresses are
// classified by the IPv4 address they carry (a DNS64/NAT64 gateway or a
// 6to4 relay reaches it), and the reserved IPv4 ranges are not public.
func TestClassifyEmbeddedAndReserved(t *testing.T) {
	for addr, want := range map[string]string{
		"64:ff9b::a9fe:a9fe": "link-local (NAT64 of 169.254.169.254)",
		"64:ff9b::7f00:1":    "loopback (NAT64 of 127.0.0.1)",
		"64:ff9b::a01:203":   "private (NAT64 of 10.1.2.3)",
		"64:ff9b::808:808":   "", // NAT64 of a public address is public
		"64:ff9b:1::a01:203": "private (local-use NAT64)",
		"2002:a01:203::1":    "private (6to4 of 10.1.2.3)",
		"2002:a9fe:a9fe::":   "link-local (6to4 of 169.254.169.254)",
		"2002:808:808::1":    "",
		"198.18.0.1":         "reserved (benchmarking)",
		"198.19.255.254":     "reserved (benchmarking)",
		"192.0.0.8":          "reserved (IETF protocol assignments)",
		"240.0.0.1":          "reserved",
		"254.1.2.3":          "reserved",
		"255.255.255.255":    "broadcast",
		"::ffff:198.18.0.1":  "reserved (benchmarking)",
		"198.20.0.1":         "",
		"192.0.1.1":          "",
	} {
		if got := Classify(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Classify(%s) = %q, want %q", addr, got, want)
		}
	}
	// An allow-list entry for the IPv4 address lets its NAT64 form through.
	s := New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	if err := s.Check(netip.MustParseAddr("64:ff9b::a01:203")); err != nil {
		t.Errorf("NAT64 of an allowed 10.1.2.3: %v", err)
	}
	if err := s.Check(netip.MustParseAddr("64:ff9b::c0a8:101")); err == nil {
		t.Errorf("NAT64 of 192.168.1.1 passed a 10/8 allow-list")
	}
}

// TestCheckURLAndHeader: the one validator of an outbound request's URL
// and configured headers.
func TestCheckURLAndHeader(t *testing.T) {
	for raw, want := range map[string]string{
		"https://a.example/x": "", "http://10.0.0.1:8080": "",
		"ftp://a.example": `scheme "ftp" is not allowed (want http or https)`, "http:///x": "no host",
		"https://u:p@a.example": "credentials in the URL are not allowed", "http://a b": "invalid character",
	} {
		_, err := CheckURL(raw)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckURL(%q) = %v, want %q", raw, err, want)
		}
	}
	for _, k := range []string{"Host", "host", "Content-Type", "Content-Length", "Transfer-Encoding", "Connection", "bad name", "X-Own"} {
		if err := CheckHeader(k, "x-own"); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("CheckHeader(%q) = %v, want refused naming it", k, err)
		}
	}
	if err := CheckHeader("Authorization"); err != nil {
		t.Errorf("CheckHeader(Authorization) = %v", err)
	}
}
