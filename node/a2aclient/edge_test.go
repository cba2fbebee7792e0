package a2aclient

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/mcpv2/mcpv2/internal/cardsig"
)

// TestSignedByJKU: a card signed with a key published at its signature's
// jku verifies; published with another key under that kid, it does not.
func TestSignedByJKU(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	var srv *httptest.Server
	var card []byte
	jwks := func(k ed25519.PublicKey) []byte {
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k, KeyID: "k1", Algorithm: "EdDSA"}}})
		return b
	}
	served := jwks(pub)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case CardPath:
			w.Write(card)
		case "/jwks.json":
			w.Write(served)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	m := map[string]any{"name": "signed", "description": "", "skills": []any{},
		"supportedInterfaces": []any{map[string]any{"url": srv.URL + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": ""}}}
	payloads, err := cardsig.Payloads(m)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv},
		(&jose.SignerOptions{}).WithHeader("kid", "k1").WithHeader("jku", srv.URL+"/jwks.json").WithType("JOSE"))
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
	card, _ = json.Marshal(m)

	c := loopbackOK(t)
	got, err := c.Card(context.Background(), srv.URL)
	if err != nil || !got.Signed || got.Key != KeyJKU || got.Signer != srv.URL+"/jwks.json" {
		t.Fatalf("jku-signed card: %+v, %v", got, err)
	}
	served = jwks(otherPub)
	if _, err := c.Card(context.Background(), srv.URL); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("jku with another key: %v, want ErrBadSignature", err)
	}
}

// TestStreamBreaks: a stream that ends before a final state is followed
// by polls of the task; WithHeaders' key goes out on every request.
func TestStreamBreaks(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     any    `json:"id"`
			Method string `json:"method"`
		}
		if r.Header.Get("X-Api-Key") != "k-7" || r.Header.Get("A2A-Version") != "1.0" {
			http.Error(w, "want the key and A2A-Version 1.0", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &req)
		switch req.Method {
		case "SendStreamingMessage":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t1\",\"contextId\":\"c1\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n")
			// the stream ends here, the task still working
		case "GetTask":
			n := polls.Add(1)
			state := "TASK_STATE_WORKING"
			if n == 2 {
				state = "TASK_STATE_COMPLETED"
			}
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"id":"t1","contextId":"c1","status":{"state":%q},"artifacts":[{"artifactId":"a","parts":[{"text":"late"}]}]}}`, state)
		default:
			http.Error(w, "no", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	card := &Card{URL: srv.URL, Endpoint: srv.URL, ProtocolVersion: "1.0", Streaming: true}
	if _, err := loopbackOK(t).Call(context.Background(), card, "", nil); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("without the key: %v, want the 401 named", err)
	}
	c := loopbackOK(t, WithPollInterval(DefaultPollMin, DefaultPollMin), WithHeaders(http.Header{"X-Api-Key": {"k-7"}}))
	r := result(t, c, card, "", json.RawMessage(`{"text":"x"}`))
	if r.State != StateCompleted || r.Text != "late" || polls.Load() != 2 {
		t.Fatalf("after the stream broke: %+v after %d polls", r, polls.Load())
	}
}
