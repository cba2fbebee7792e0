package a2aclient

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParseCard: any bytes decode to a card with an http(s) endpoint and
// a known version, or to an error; never a panic.
func FuzzParseCard(f *testing.F) {
	f.Add([]byte(`{"name":"a","supportedInterfaces":[{"url":"http://x/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"streaming":true},"skills":[{"id":"echo"}]}`))
	f.Add([]byte(`{"name":"b","url":"/rpc","preferredTransport":"JSONRPC","protocolVersion":"0.3.0"}`))
	f.Add([]byte(`{"name":"c","url":"http://x","preferredTransport":"GRPC","additionalInterfaces":[{"url":"https://y/j","transport":"JSONRPC"}]}`))
	f.Add([]byte(`{"supportedInterfaces":[{"url":"ftp://x","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCard(b, "http://agent.example/.well-known/agent-card.json")
		if err != nil {
			return
		}
		if c.ProtocolVersion != "1.0" && c.ProtocolVersion != "0.3" {
			t.Fatalf("version %q", c.ProtocolVersion)
		}
		if len(c.Skills) > maxSkills {
			t.Fatalf("%d skills", len(c.Skills))
		}
		if _, err := CheckURL(c.Endpoint); err != nil {
			t.Fatalf("endpoint %q: %v", c.Endpoint, err)
		}
	})
}

// FuzzEvents: any bytes read as an event stream of JSON-RPC answers fold
// into a task whose result marshals, or fail; never a panic, and no event
// over the cap.
func FuzzEvents(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_SUBMITTED\"}}}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"artifactUpdate\":{\"taskId\":\"t\",\"artifact\":{\"artifactId\":\"a\",\"parts\":[{\"data\":{\"sum\":3}},{\"text\":\"x\"}]}}}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"taskId\":\"t\",\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}\n\n"))
	f.Add([]byte("event: x\r\nid: 1\r\ndata: {\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{\"kind\":\"status-update\",\"taskId\":\"t\",\"status\":{\"state\":\"input-required\",\"message\":{\"parts\":[{\"kind\":\"text\",\"text\":\"name?\"}]}},\"final\":true}}\r\n\r\n"))
	f.Add([]byte(": comment\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"kind\":\"artifact-update\",\"taskId\":\"t\",\"append\":true,\"artifact\":{\"artifactId\":\"a\",\"parts\":[{\"kind\":\"file\",\"file\":{\"uri\":\"http://f\"}}]}}}\ndata: \n\n"))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32001,\"message\":\"Task not found\"}}\n\n"))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"message\":{\"parts\":[{\"raw\":\"AAE=\",\"filename\":\"f\"}]}}}\n\n"))
	card := &Card{Endpoint: "http://agent.example/rpc", ProtocolVersion: "1.0"}
	const max = 1 << 12
	f.Fuzz(func(t *testing.T, b []byte) {
		var tk *task
		err := readSSE(bytes.NewReader(b), max, func(e sseEvent) error {
			if len(e.Data) > max {
				t.Fatalf("event of %d bytes over the cap", len(e.Data))
			}
			res, err := decodeRPC(e.Data, card, "SendStreamingMessage")
			if err != nil {
				return err
			}
			ev, err := decodeEvent(res)
			if err != nil {
				return err
			}
			tk = apply(tk, ev)
			return nil
		})
		if err != nil && !errors.Is(err, errSSELine) && tk == nil {
			return
		}
		if tk != nil {
			if _, err := json.Marshal(tk.result()); err != nil {
				t.Fatalf("result: %v", err)
			}
		}
	})
}

// FuzzParseCardKey: any text is a public key or an error; never a panic.
func FuzzParseCardKey(f *testing.F) {
	f.Add(`12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA`)
	f.Add(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`)
	f.Add(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}`)
	f.Add(`{}`)
	f.Add(`nope`)
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseCardKey(s)
		if err != nil {
			return
		}
		switch k.(type) {
		case nil, ed25519.PrivateKey, *ecdsa.PrivateKey, *rsa.PrivateKey:
			t.Fatalf("ParseCardKey(%q) = %T, want a public key", s, k)
		}
	})
}
