package a2a_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/net/gostream"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

// edgeless is a node without an edge, listening on loopback only, and its
// A2A face (no ServeLibP2P yet).
func edgeless(t *testing.T, wrap func(*node.Node) a2a.Backend) (*node.Node, *a2a.Face) {
	t.Helper()
	n, err := node.New(node.Config{DataDir: t.TempDir(), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Name: "edgeless"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	var b a2a.Backend = n
	if wrap != nil {
		b = wrap(n)
	}
	f, err := a2a.New(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return n, f
}

// newClientHost is a fresh libp2p host (a fresh PeerID) on loopback,
// which knows the addresses of n.
func newClientHost(t *testing.T, n *node.Node) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	h.Peerstore().AddAddrs(n.ID(), n.Host().Addrs(), peerstore.TempAddrTTL)
	return h
}

// rawStream opens a stream of A2A over libp2p from h to n and writes
// head, the request's start (its headers, maybe part of its body).
func rawStream(t *testing.T, h host.Host, n *node.Node, head string) (net.Conn, *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := gostream.Dial(ctx, h, n.ID(), a2a.LibP2PProtocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	// Only a bound on a broken test: the answers come without waiting.
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	return c, bufio.NewReader(c)
}

// slowBody is the start of a JSON-RPC POST whose body of 100 bytes never
// comes; with Expect: 100-continue, the server says "100 Continue" when
// the handler starts to read the body, that is when it holds its slot.
const slowBody = "POST " + a2a.Path + " HTTP/1.1\r\nHost: p2p\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"

// holdSlot opens a slow-body request from h and waits until the server
// reads its body (it holds a slot then).
func holdSlot(t *testing.T, h host.Host, n *node.Node) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br := rawStream(t, h, n, slowBody)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("a slow body from %s: %q %v, want 100 Continue", h.ID(), line, err)
	}
	if _, err := br.ReadString('\n'); err != nil { // the empty line after it
		t.Fatal(err)
	}
	return c, br
}

// getCard sends GET of the card from h and returns the answer.
func p2pGetCard(t *testing.T, h host.Host, n *node.Node) (*http.Response, string) {
	t.Helper()
	_, br := rawStream(t, h, n, "GET "+a2a.CardPath+" HTTP/1.1\r\nHost: p2p\r\nA2A-Version: 1.0\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("card from %s: %v", h.ID(), err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestLibP2PIPShare: PeerIDs are free, so the peers at one IP share one
// share of the slots: two PeerIDs holding 8 slow bodies each fill the
// share of 127.0.0.1, and a third, fresh PeerID from there is refused
// (503, -32000, naming the IP's share) though it holds nothing; once the
// slow streams end, it is served.
func TestLibP2PIPShare(t *testing.T) {
	n, f := edgeless(t, nil)
	srv, err := f.ServeLibP2P(n.Host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	var held []net.Conn
	for range 2 {
		h := newClientHost(t, n)
		for range 8 {
			c, _ := holdSlot(t, h, n)
			held = append(held, c)
		}
	}
	fresh := newClientHost(t, n)
	resp, body := p2pGetCard(t, fresh, n)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "-32000") || !strings.Contains(body, "one IP address (127.0.0.1)") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a fresh PeerID at a full IP share: %d %s", resp.StatusCode, body)
	}
	for _, c := range held {
		c.Close()
	}
	// The slots come back as the server sees the streams end.
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, body = p2pGetCard(t, fresh, n)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the IP share is not given back after the streams ended: %d %s", resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLibP2PSlowBody: a body that does not arrive within the read timeout
// is answered 408 (-32000) and gives its slot back: a peer that filled
// its 8 slots with slow bodies is served again once they are answered.
func TestLibP2PSlowBody(t *testing.T) {
	n, f := edgeless(t, nil)
	srv, err := f.ServeLibP2P(n.Host(), a2a.WithLibP2PReadTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := newClientHost(t, n)
	var readers []*bufio.Reader
	for range 8 {
		_, br := rawStream(t, h, n, slowBody+"{")
		readers = append(readers, br)
	}
	for i, br := range readers {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("slow body %d: %v", i, err)
		}
		if resp.StatusCode == http.StatusContinue {
			resp, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("slow body %d: %v", i, err)
			}
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "-32000") || !strings.Contains(string(b), "did not arrive") {
			t.Fatalf("slow body %d: %d %s, want 408", i, resp.StatusCode, b)
		}
	}
	if resp, body := p2pGetCard(t, h, n); resp.StatusCode != http.StatusOK {
		t.Fatalf("after its slow bodies were answered, the peer: %d %s", resp.StatusCode, body)
	}
}

// TestLibP2PRate: a PeerID's requests, card GETs among them, take tokens
// of its own bucket: past it, 429 with Retry-After and -32000; another
// PeerID is served.
func TestLibP2PRate(t *testing.T) {
	n, f := edgeless(t, nil)
	if _, err := f.ServeLibP2P(n.Host(), a2a.WithLibP2PRate(0)); err == nil {
		t.Error("WithLibP2PRate(0): no error")
	}
	srv, err := f.ServeLibP2P(n.Host(), a2a.WithLibP2PRate(0.001)) // one request, then one per 1000 s
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	a, b := newClientHost(t, n), newClientHost(t, n)
	if resp, body := p2pGetCard(t, a, n); resp.StatusCode != http.StatusOK {
		t.Fatalf("first card: %d %s", resp.StatusCode, body)
	}
	resp, body := p2pGetCard(t, a, n)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "-32000") || !strings.Contains(body, "rate limited") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second card of the same PeerID: %d %s", resp.StatusCode, body)
	}
	if resp, body := p2pGetCard(t, b, n); resp.StatusCode != http.StatusOK {
		t.Fatalf("another PeerID: %d %s", resp.StatusCode, body)
	}
}

// gatedCard is a Backend whose Card waits for gate (after saying so on
// entered) and that records the audit lines' methods.
type gatedCard struct {
	a2a.Backend
	entered, gate chan struct{}
	once          sync.Once

	mu      sync.Mutex
	audited []string
}

func (g *gatedCard) Card() protocol.AgentCard {
	g.once.Do(func() {
		close(g.entered)
		<-g.gate
	})
	return g.Backend.Card()
}

func (g *gatedCard) Audit(ctx context.Context, c protocol.Caller, method string, perr *protocol.Error, start time.Time) {
	g.mu.Lock()
	g.audited = append(g.audited, method)
	g.mu.Unlock()
	g.Backend.Audit(ctx, c, method, perr, start)
}

// TestLibP2PCloseWaits: Close returns only after the handlers of the
// streams it closed have returned (a card request still making its card
// has written its audit line), so the face may be closed after it.
func TestLibP2PCloseWaits(t *testing.T) {
	var g *gatedCard
	n, f := edgeless(t, func(n *node.Node) a2a.Backend {
		g = &gatedCard{Backend: n, entered: make(chan struct{}), gate: make(chan struct{})}
		return g
	})
	srv, err := f.ServeLibP2P(n.Host())
	if err != nil {
		t.Fatal(err)
	}
	h := newClientHost(t, n)
	rawStream(t, h, n, "GET "+a2a.CardPath+" HTTP/1.1\r\nHost: p2p\r\nA2A-Version: 1.0\r\n\r\n")
	<-g.entered
	closed := make(chan []string)
	go func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		closed <- append([]string(nil), g.audited...)
	}()
	close(g.gate)
	if audited := <-closed; !strings.Contains(fmt.Sprint(audited), "a2a card") {
		t.Errorf("Close returned before the card's handler did: audit lines %v", audited)
	}
	if err := srv.Close(); err != net.ErrClosed {
		t.Errorf("a second Close: %v, want net.ErrClosed", err)
	}
}

// TestNoEdgeCard: the card of a node without an edge (listening on
// loopback only), over libp2p, names what a caller there can use: the
// push notifications' key inline (nothing serves a jwksUrl without an
// edge), a v0.3 url that is a multiaddr of the node (/p2p/PeerID, as it
// has no address but loopback), and the libp2p PeerID as its only
// security scheme (no edge session).
func TestNoEdgeCard(t *testing.T) {
	n, f := edgeless(t, nil)
	srv, err := f.ServeLibP2P(n.Host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	client := newClientHost(t, n)
	do := p2pHTTP(t, client, n.P2PAddrs()[0])
	id := n.ID().String()
	wantJWKS, err := a2a.JWKS(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1.0", "0.3"} {
		status, b := do(http.MethodGet, a2a.CardPath, v, nil)
		if signer, err := a2a.VerifyCard(b); status != http.StatusOK || err != nil || signer != id {
			t.Fatalf("card %s: %d %v %s", v, status, err, b)
		}
		if s := string(b); strings.Contains(s, "jwksUrl") || strings.Contains(s, a2a.SessionScheme) || strings.Contains(s, "/mcpv2/session") {
			t.Errorf("card %s without an edge names a JWKS URL or the edge session: %s", v, s)
		}
		var card struct {
			URL                  *string
			PreferredTransport   string
			AdditionalInterfaces []struct{ URL, Transport string }
			SupportedInterfaces  []struct{ URL, ProtocolBinding string }
			Capabilities         struct {
				PushNotifications bool
				Extensions        []struct {
					URI    string
					Params struct {
						JWKS   json.RawMessage `json:"jwks"`
						Issuer string          `json:"issuer"`
					}
				}
			}
			SecuritySchemes      map[string]map[string]any
			Security             []map[string][]string
			SecurityRequirements []struct{ Schemes map[string]any }
		}
		if err := json.Unmarshal(b, &card); err != nil {
			t.Fatal(err)
		}
		var push bool
		for _, e := range card.Capabilities.Extensions {
			if e.URI != a2a.PushExtension {
				continue
			}
			push = true
			var got, want any
			_ = json.Unmarshal(e.Params.JWKS, &got)
			_ = json.Unmarshal(wantJWKS, &want)
			if fmt.Sprint(got) != fmt.Sprint(want) || e.Params.Issuer != id {
				t.Errorf("card %s: push extension's jwks %s issuer %s, want %s of %s", v, e.Params.JWKS, e.Params.Issuer, wantJWKS, id)
			}
		}
		if !card.Capabilities.PushNotifications || !push {
			t.Errorf("card %s: no push extension: %s", v, b)
		}
		if len(card.SecuritySchemes) != 1 || card.SecuritySchemes[a2a.PeerScheme] == nil {
			t.Errorf("card %s: securitySchemes %v, want %s only", v, card.SecuritySchemes, a2a.PeerScheme)
		}
		if v == "1.0" {
			if _, ok := card.SecuritySchemes[a2a.PeerScheme]["mtlsSecurityScheme"]; !ok || len(card.SecurityRequirements) != 1 || card.SecurityRequirements[0].Schemes[a2a.PeerScheme] == nil {
				t.Errorf("card 1.0: %v %v", card.SecuritySchemes, card.SecurityRequirements)
			}
			if len(card.SupportedInterfaces) == 0 {
				t.Errorf("card 1.0 names no interface: %s", b)
			}
			for _, i := range card.SupportedInterfaces {
				if i.ProtocolBinding != a2a.LibP2PBinding || i.URL != "/p2p/"+id {
					t.Errorf("card 1.0: interface %+v, want %s at /p2p/%s", i, a2a.LibP2PBinding, id)
				}
			}
			continue
		}
		if card.SecuritySchemes[a2a.PeerScheme]["type"] != "mutualTLS" || len(card.Security) != 1 || card.Security[0][a2a.PeerScheme] == nil {
			t.Errorf("card 0.3: %v %v", card.SecuritySchemes, card.Security)
		}
		if card.URL == nil || *card.URL != "/p2p/"+id || card.PreferredTransport != a2a.LibP2PBinding || len(card.AdditionalInterfaces) == 0 {
			t.Fatalf("card 0.3: url %v transport %s interfaces %v, want /p2p/%s", card.URL, card.PreferredTransport, card.AdditionalInterfaces, id)
		}
		if m, err := ma.NewMultiaddr(*card.URL); err != nil || m.String() != "/p2p/"+id {
			t.Errorf("card 0.3: url %q is not the node's multiaddr: %v", *card.URL, err)
		}
	}
}

// TestLibP2PHalfClose: a client that closes its side of the stream after
// its request (libp2p's HTTP does) gets its answer; one that closes it in
// the middle of its body gets 400 at once (no read timeout waited for).
func TestLibP2PHalfClose(t *testing.T) {
	n, f := edgeless(t, nil)
	srv, err := f.ServeLibP2P(n.Host(), a2a.WithLibP2PReadTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := newClientHost(t, n)
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"data":{"skill":"ping"}}]}}}`
	for _, c := range []struct {
		name, body string
		length     int
		status     int
		want       string
	}{
		{"whole", body, len(body), http.StatusOK, "TASK_STATE_COMPLETED"},
		{"cut short", body[:10], len(body), http.StatusBadRequest, "could not be read"},
	} {
		conn, br := rawStream(t, h, n, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: p2p\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", a2a.Path, c.length, c.body))
		if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
			t.Errorf("%s, then CloseWrite: %d %s", c.name, resp.StatusCode, b)
		}
	}
}
