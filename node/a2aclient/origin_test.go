package a2aclient

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-jose/go-jose/v4"
	libcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/internal/cardsig"
)

// keyRecorder is a server on another origin than the agent: it records
// the key headers each path received.
type keyRecorder struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string]string
}

func newKeyRecorder(t *testing.T) *keyRecorder {
	k := &keyRecorder{got: map[string]string{}}
	k.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.got[r.URL.Path] = r.Header.Get("X-Api-Key") + "|" + r.Header.Get("Authorization")
		k.mu.Unlock()
		if r.URL.Path == "/keys" {
			io.WriteString(w, `{"keys":[]}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":"1","result":{"kind":"message","parts":[{"kind":"text","text":"hi"}]}}`)
	}))
	t.Cleanup(k.Close)
	return k
}

func (k *keyRecorder) saw(path string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.got[path]
	return v, ok
}

// TestHeadersStayAtOrigin: WithHeaders' key goes only to the origin of
// the URL the caller gave: not to a jku, an endpoint or a redirect target
// on another origin the card names (review item 3).
func TestHeadersStayAtOrigin(t *testing.T) {
	other := newKeyRecorder(t)
	h := http.Header{"X-Api-Key": {"s3cret"}, "Authorization": {"Bearer s3cret"}}

	// A signed card whose jku is on the other origin.
	prot := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","jku":"` + other.URL + `/keys","kid":"k"}`))
	signed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":"a","url":%q,"protocolVersion":"0.3","skills":[],"signatures":[{"protected":%q,"signature":"AAAA"}]}`, other.URL+"/rpc", prot)
	}))
	defer signed.Close()
	c := loopbackOK(t, WithHeaders(h))
	if _, err := c.Card(context.Background(), signed.URL); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("card with a foreign jku: %v, want ErrBadSignature", err)
	}
	if got, ok := other.saw("/keys"); !ok || got != "|" {
		t.Errorf("jku host: fetched %v, saw key headers %q; want fetched without them", ok, got)
	}

	// An unsigned card whose endpoint is on the other origin: the call
	// goes there without the key.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":"a","url":%q,"protocolVersion":"0.3","skills":[]}`, other.URL+"/rpc")
	}))
	defer plain.Close()
	card, err := c.Card(context.Background(), plain.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), card, "", []byte(`{"text":"x"}`)); err != nil {
		t.Fatalf("call of the foreign endpoint: %v", err)
	}
	if got, ok := other.saw("/rpc"); !ok || got != "|" {
		t.Errorf("endpoint host: called %v, saw key headers %q; want called without them", ok, got)
	}

	// A card request redirected to the other origin is refused there.
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/moved"+r.URL.Path, http.StatusFound)
	}))
	defer redir.Close()
	if _, err := c.Card(context.Background(), redir.URL); err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("card redirected to another origin: %v, want the redirect refused", err)
	}
	other.mu.Lock()
	for p, v := range other.got {
		if strings.HasPrefix(p, "/moved") {
			t.Errorf("redirect target %s was reached (headers %q)", p, v)
		}
	}
	other.mu.Unlock()

	// The same origin keeps the key (the endpoint and a redirect within it).
	var mu sync.Mutex
	var seen []string
	var same *httptest.Server
	same = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+"="+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		switch r.URL.Path {
		case CardPath:
			http.Redirect(w, r, "/card.json", http.StatusFound)
		case "/card.json":
			fmt.Fprintf(w, `{"name":"a","url":%q,"protocolVersion":"0.3","skills":[]}`, same.URL+"/rpc")
		default:
			io.WriteString(w, `{"jsonrpc":"2.0","id":"1","result":{"kind":"message","parts":[{"kind":"text","text":"hi"}]}}`)
		}
	}))
	defer same.Close()
	card, err = c.Card(context.Background(), same.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), card, "", []byte(`{"text":"x"}`)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if want := CardPath + "=s3cret /card.json=s3cret /rpc=s3cret"; strings.Join(seen, " ") != want {
		t.Errorf("same origin saw %q, want %q", strings.Join(seen, " "), want)
	}
	mu.Unlock()
}

// TestNoDowngrade: a card served over https may not name an http endpoint
// or jku.
func TestNoDowngrade(t *testing.T) {
	if _, err := ParseCard([]byte(`{"name":"a","url":"http://a.example/rpc","protocolVersion":"0.3"}`), "https://a.example"+CardPath); err == nil || !strings.Contains(err.Error(), "served over https") {
		t.Errorf("https card, http endpoint: %v, want refused", err)
	}
	if _, err := ParseCard([]byte(`{"name":"a","url":"https://b.example/rpc","protocolVersion":"0.3"}`), "http://a.example"+CardPath); err != nil {
		t.Errorf("http card, https endpoint: %v", err)
	}
	prot := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","jku":"http://127.0.0.1:1/keys","kid":"k"}`))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"name":"a","url":"/rpc","protocolVersion":"0.3","skills":[],"signatures":[{"protected":%q,"signature":"AAAA"}]}`, prot)
	}))
	defer srv.Close()
	c := loopbackOK(t)
	c.hc.Transport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	_, err := c.Card(context.Background(), srv.URL)
	if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "jku http://127.0.0.1:1/keys is not https") {
		t.Errorf("https card, http jku: %v, want refused naming the jku", err)
	}
}

// TestOwnHeaders: the client's own headers are refused in WithHeaders
// whatever their case (A2A-Version was let through: review item 23).
func TestOwnHeaders(t *testing.T) {
	for _, k := range []string{"A2A-Version", "a2a-version", "Accept", "content-type", "Host", "Connection", "Transfer-Encoding"} {
		if _, err := New(WithHeaders(http.Header{k: {"x"}})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("WithHeaders(%s): %v, want refused naming it", k, err)
		}
		if err := CheckHeader(k); err == nil {
			t.Errorf("CheckHeader(%s) = nil", k)
		}
	}
	if _, err := New(WithHeaders(http.Header{"X-Api-Key": {"x"}})); err != nil {
		t.Errorf("WithHeaders(X-Api-Key): %v", err)
	}
}

// signedCard is a card at url signed by priv with the header fields hdr.
func signedCard(t *testing.T, url string, priv ed25519.PrivateKey, hdr map[jose.HeaderKey]any) []byte {
	t.Helper()
	m := map[string]any{"name": "s", "url": url + "/rpc", "protocolVersion": "0.3", "skills": []any{}}
	payloads, err := cardsig.Payloads(m)
	if err != nil {
		t.Fatal(err)
	}
	opts := &jose.SignerOptions{}
	for k, v := range hdr {
		opts = opts.WithHeader(k, v)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payloads[0])
	if err != nil {
		t.Fatal(err)
	}
	compact, _ := jws.DetachedCompactSerialize()
	prot, sig, _ := strings.Cut(compact, "..")
	m["signatures"] = []any{map[string]any{"protected": prot, "signature": sig}}
	b, _ := json.Marshal(m)
	return b
}

// TestKeySource: Card says where the verifying key came from; a key the
// card carries is self-signed; a pinned key (WithCardKey, ParseCardKey of
// a PeerID or a JWK) must verify, and an unsigned card fails it (review
// item 15).
func TestKeySource(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	lpub, err := libcrypto.UnmarshalEd25519PublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := peer.IDFromPublicKey(lpub)
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	embedded := signedCard(t, srv.URL, priv, map[jose.HeaderKey]any{"jwk": jose.JSONWebKey{Key: pub}})
	byPeer := signedCard(t, srv.URL, priv, map[jose.HeaderKey]any{"kid": pid.String()})
	forged := signedCard(t, srv.URL, otherPriv, map[jose.HeaderKey]any{"jwk": jose.JSONWebKey{Key: otherPriv.Public()}})
	unsigned := []byte(`{"name":"u","url":"` + srv.URL + `/rpc","protocolVersion":"0.3"}`)
	jwk, _ := json.Marshal(jose.JSONWebKey{Key: pub})
	pinPeer, err := ParseCardKey(pid.String())
	if err != nil {
		t.Fatal(err)
	}
	pinJWK, err := ParseCardKey(string(jwk))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCardKey("nope"); err == nil {
		t.Error("ParseCardKey(nope) = nil error")
	}
	for _, tc := range []struct {
		name    string
		card    []byte
		pin     any
		key     KeySource
		summary string
	}{
		{"embedded", embedded, nil, KeyEmbedded, "self-signed (key embedded in the card)"},
		{"forged embedded", forged, nil, KeyEmbedded, "self-signed"},
		{"peer", byPeer, nil, KeyPeerID, "signed by PeerID " + pid.String()},
		{"unsigned", unsigned, nil, KeyNone, "unsigned"},
		{"pinned peer", embedded, pinPeer, KeyPinned, "signed with the pinned key"},
		{"pinned jwk", byPeer, pinJWK, KeyPinned, "signed with the pinned key"},
		{"forged, pinned", forged, pinPeer, "", "ErrBadSignature"},
		{"unsigned, pinned", unsigned, pinJWK, "", "ErrBadSignature"},
	} {
		body = tc.card
		var opts []Option
		if tc.pin != nil {
			opts = append(opts, WithCardKey(tc.pin))
		}
		card, err := loopbackOK(t, opts...).Card(context.Background(), srv.URL)
		if tc.summary == "ErrBadSignature" {
			if !errors.Is(err, ErrBadSignature) {
				t.Errorf("%s: %v, want ErrBadSignature", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if card.Key != tc.key || card.Signed != (tc.key != KeyNone) || !strings.HasPrefix(card.SignatureSummary(), tc.summary) {
			t.Errorf("%s: key %q signed %v summary %q; want %q, %q", tc.name, card.Key, card.Signed, card.SignatureSummary(), tc.key, tc.summary)
		}
	}
}

// TestStreamTotalCap: a stream's events, each under the cap, may not add
// up to more than it (review item 12).
func TestStreamTotalCap(t *testing.T) {
	chunk := strings.Repeat("x", 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 100 {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"artifactUpdate\":{\"taskId\":\"t\",\"contextId\":\"c\",\"append\":%v,\"artifact\":{\"artifactId\":\"a\",\"parts\":[{\"text\":%q}]}}}}\n\n", i > 0, chunk)
		}
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"taskId\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}\n\n")
	}))
	defer srv.Close()
	card := &Card{URL: srv.URL, Endpoint: srv.URL, ProtocolVersion: "1.0", Streaming: true}
	if r := result(t, loopbackOK(t), card, "", json.RawMessage(`{"text":"x"}`)); strings.Count(r.Text, "x") != 100*len(chunk) {
		t.Fatalf("under the cap: text of %d bytes", len(r.Text))
	}
	_, err := loopbackOK(t, WithMaxResponse(64<<10)).Call(context.Background(), card, "", json.RawMessage(`{"text":"x"}`))
	if err == nil || !strings.Contains(err.Error(), "65536 bytes") {
		t.Fatalf("events over the cap in total: %v, want refused naming the cap", err)
	}
}
