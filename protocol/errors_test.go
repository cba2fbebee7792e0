package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
)

func TestAsError(t *testing.T) {
	pe := Errorf(CodeSkillNotFound, "skill %q not found", "nope")
	tests := []struct {
		name string
		err  error
		want *Error // nil: expect the generic internal error
		same bool   // expect exactly pe
	}{
		{"*Error", pe, pe, true},
		{"wrapped once", fmt.Errorf("node: call: %w", pe), pe, true},
		{"wrapped twice", fmt.Errorf("edge: %w", fmt.Errorf("node: call: %w", pe)), pe, true},
		{"joined", errors.Join(errors.New("other"), pe), pe, true},
		{"plain error", errors.New("open /home/alice/.mcpv2/identity.key: permission denied"), nil, false},
		{"path error", &fs.PathError{Op: "open", Path: "/etc/mcpv2/secret", Err: fs.ErrPermission}, nil, false},
		{"context canceled", context.Canceled, nil, false},
		{"wrapped non-protocol error", fmt.Errorf("skill: %w", os.ErrNotExist), nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AsError(tc.err)
			if got == nil {
				t.Fatal("AsError returned nil for a non-nil error")
			}
			if tc.same {
				if got != tc.want {
					t.Fatalf("got %p %v, want the same *Error %p", got, got, tc.want)
				}
				return
			}
			if got.Code != CodeInternal || got.Message != "internal error" || got.Data != nil {
				t.Fatalf("got %+v, want code -32603 \"internal error\" without data", got)
			}
			enc, _ := json.Marshal(got)
			for _, secret := range []string{"/home", "/etc", "alice", "permission", "secret", "canceled", "exist"} {
				if strings.Contains(string(enc), secret) || strings.Contains(got.Error(), secret) {
					t.Errorf("%s leaks %q of the internal error", enc, secret)
				}
			}
		})
	}
	if AsError(nil) != nil {
		t.Error("AsError(nil) != nil")
	}
}

func TestError(t *testing.T) {
	e := Errorf(CodeUnsupportedProvider, "unsupported provider %q", "x")
	if e.Code != -32010 || e.Message != `unsupported provider "x"` {
		t.Fatalf("Errorf = %+v", e)
	}
	if s := e.Error(); !strings.Contains(s, "-32010") || !strings.Contains(s, `unsupported provider "x"`) {
		t.Errorf("Error() = %q; want the code and the message", s)
	}
	var err error = e
	var back *Error
	if !errors.As(fmt.Errorf("x: %w", err), &back) || back != e {
		t.Error("*Error does not survive wrapping")
	}
}

// TestCodes pins every code to the table of SPEC §2.
func TestCodes(t *testing.T) {
	spec := map[int]int{
		-32700: CodeParseError, -32600: CodeInvalidRequest, -32601: CodeMethodNotFound,
		-32602: CodeInvalidParams, -32603: CodeInternal, -32001: CodeInvalidSession,
		-32002: CodeSkillNotFound, -32003: CodeSkillExecution, -32004: CodeToolExecution,
		-32005: CodeRateLimited, -32006: CodeVersionMismatch, -32007: CodeFileNotFound,
		-32008: CodePaymentFailed, -32009: CodeNotPermitted, -32010: CodeUnsupportedProvider,
	}
	for want, got := range spec {
		if got != want {
			t.Errorf("code constant %d, SPEC says %d", got, want)
		}
	}
	if len(spec) != 15 {
		t.Errorf("%d distinct codes, SPEC lists 15", len(spec))
	}
}

func TestConstants(t *testing.T) {
	if RPCProtocolID != "/mcpv2/rpc/1.0.0" || BlobProtocolID != "/mcpv2/blob/1.0.0" || DHTPrefix != "/mcpv2" {
		t.Errorf("protocol IDs %q %q %q differ from SPEC §2", RPCProtocolID, BlobProtocolID, DHTPrefix)
	}
	if Version != "mcpv2/1.0" {
		t.Errorf("Version = %q, SPEC §4 says mcpv2/1.0", Version)
	}
	if DefaultMaxMessage != 8*1024*1024 {
		t.Errorf("DefaultMaxMessage = %d, SPEC §2 says 8 MiB", DefaultMaxMessage)
	}
	if MethodToolsList != "tools/list" || MethodToolsCall != "tools/call" || MethodAgentCard != "agent/card" {
		t.Error("method names differ from SPEC §2")
	}
	for _, p := range []string{"claude", "openai", "gemini", "deepseek"} {
		if !ValidProvider(p) {
			t.Errorf("ValidProvider(%q) = false", p)
		}
	}
	for _, p := range []string{"", "Claude", "OPENAI", "mistral", "gemini ", "local"} {
		if ValidProvider(p) {
			t.Errorf("ValidProvider(%q) = true", p)
		}
	}
	if len(Providers) != 4 {
		t.Errorf("Providers = %v, SPEC names four", Providers)
	}
}

// TestAgentCardJSON pins the member names of the agent card (SPEC §4) and of
// a skill descriptor (the tools/list entry of SPEC §2).
func TestAgentCardJSON(t *testing.T) {
	card := AgentCard{
		Name: "alice", Description: "test agent", Version: "0.1.0", PeerID: edPeerID("a"),
		Addrs:            []string{"/ip4/127.0.0.1/tcp/4001/p2p/" + edPeerID("a")},
		ProtocolVersions: []string{Version},
		Skills: []SkillDescriptor{{Name: "ping", Description: "Round trip", Tags: []string{"core"},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"payload":{"type":"string"}}}`)}},
		Capabilities: Capabilities{LLMMode: true, Providers: []string{"claude", "openai"}, MaxBatch: MaxBatchSize},
		Endpoints:    Endpoints{HTTP: "mcpv2://127.0.0.1:8000/mcpv2"},
		Seq:          7, IssuedAt: 1_760_000_000,
	}
	got, err := json.MarshalIndent(card, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "agent_card.json", append(got, '\n'))

	var m map[string]json.RawMessage
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	assertKeys(t, "card", m, "name", "description", "version", "peer_id", "addrs", "protocol_versions", "skills", "capabilities", "endpoints", "seq", "issued_at")
	var caps, ends map[string]json.RawMessage
	_ = json.Unmarshal(m["capabilities"], &caps)
	assertKeys(t, "capabilities", caps, "llm_mode", "providers", "max_batch", "mtls")
	_ = json.Unmarshal(m["endpoints"], &ends)
	assertKeys(t, "endpoints", ends, "http")
	var skills []map[string]json.RawMessage
	_ = json.Unmarshal(m["skills"], &skills)
	assertKeys(t, "skill", skills[0], "name", "description", "inputSchema", "tags")

	// endpoints.http is optional.
	noHTTP, _ := json.Marshal(Endpoints{})
	if string(noHTTP) != `{}` {
		t.Errorf("empty endpoints = %s, want {}", noHTTP)
	}
	var back AgentCard
	if err := json.Unmarshal(got, &back); err != nil || back.PeerID != card.PeerID || back.Seq != 7 || back.Skills[0].Name != "ping" || !back.Capabilities.LLMMode {
		t.Errorf("decode = %+v, %v", back, err)
	}
}

func assertKeys(t *testing.T, what string, m map[string]json.RawMessage, keys ...string) {
	t.Helper()
	if len(m) != len(keys) {
		t.Errorf("%s has %d members, want %d: %v", what, len(m), len(keys), keys)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks member %q", what, k)
		}
	}
}
