package node

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

func TestPolicyDeniesUngrantedSkill(t *testing.T) {
	a := newTestNode(t, nil)
	b := newTestNode(t, func(c *Config) {
		c.PolicyFile = writePolicy(t, map[string][]string{a.ID().String(): {"list_files"}})
	})
	addr := addrOf(t, b)
	before := len(readAudit(t, b))
	_, err := a.Client().CallSkill(ctxT(t), addr, "ask", json.RawMessage(`{"query":"hi"}`), protocol.CallOptions{})
	if codeOf(err) != protocol.CodeNotPermitted {
		t.Fatalf("want -32009, got %v", err)
	}
	lines := readAudit(t, b)[before:]
	if len(lines) != 1 || lines[0]["skill"] != "ask" || lines[0]["outcome"] != "error" || lines[0]["code"] != float64(protocol.CodeNotPermitted) ||
		lines[0]["caller"] != a.ID().String() || lines[0]["method"] != "tools/call" {
		t.Fatalf("audit lines %v", lines)
	}
	for _, k := range []string{"time", "duration_ms"} {
		if _, ok := lines[0][k]; !ok {
			t.Errorf("audit line lacks %s", k)
		}
	}
	// Granted and open skills work.
	if _, err := a.Client().CallSkill(ctxT(t), addr, "list_files", nil, protocol.CallOptions{}); err != nil {
		t.Fatalf("granted skill: %v", err)
	}
	if _, err := a.Client().CallSkill(ctxT(t), addr, "ping", nil, protocol.CallOptions{}); err != nil {
		t.Fatalf("open skill: %v", err)
	}
	// A third peer with no grant gets nothing but the open ones.
	c := newTestNode(t, nil)
	if _, err := c.Client().CallSkill(ctxT(t), addr, "list_files", nil, protocol.CallOptions{}); codeOf(err) != protocol.CodeNotPermitted {
		t.Fatalf("stranger: want -32009, got %v", err)
	}
	if _, err := c.Client().CallMethod(ctxT(t), addr, protocol.MethodToolsList, protocol.CallOptions{}); err != nil {
		t.Fatalf("tools/list must be open: %v", err)
	}
}

func TestMeshSessions(t *testing.T) {
	secret := []byte("mesh-secret")
	a := newTestNode(t, func(c *Config) { c.Secret = secret })
	b := newTestNode(t, func(c *Config) { c.Secret = secret })
	addr := addrOf(t, b)
	// A holds the secret: its calls carry a valid session and are served.
	if _, err := a.Client().CallSkill(ctxT(t), addr, "ask", json.RawMessage(`{"query":"hi"}`), protocol.CallOptions{}); err != nil {
		t.Fatalf("valid session refused: %v", err)
	}
	aid, bid := a.ID().String(), b.ID().String()
	now := time.Now()
	good := protocol.MintMeshToken(secret, aid, bid, protocol.PurposeRPC, now, 300*time.Second)
	payload, mac, _ := strings.Cut(good, ".")
	tampered := payload + "." + strings.Repeat("0", len(mac))
	cases := map[string]struct{ tok, want string }{
		"tampered":      {tampered, "bad signature"},
		"other secret":  {protocol.MintMeshToken([]byte("other"), aid, bid, protocol.PurposeRPC, now, 300*time.Second), "minted by a node with another secret"},
		"expired":       {protocol.MintMeshToken(secret, aid, bid, protocol.PurposeRPC, now.Add(-time.Hour), 60*time.Second), "expired"},
		"future":        {protocol.MintMeshToken(secret, aid, bid, protocol.PurposeRPC, now.Add(time.Hour), 60*time.Second), "future"},
		"other sender":  {protocol.MintMeshToken(secret, bid, bid, protocol.PurposeRPC, now, 300*time.Second), "another caller"},
		"other peer":    {protocol.MintMeshToken(secret, aid, aid, protocol.PurposeRPC, now, 300*time.Second), "another peer or purpose"},
		"other purpose": {protocol.MintMeshToken(secret, aid, bid, protocol.PurposeBlob, now, 300*time.Second), "another peer or purpose"},
		"version 1":     {protocol.EncodeToken(secret, protocol.Token{Subject: aid, Nonce: "n1", IssuedAt: now.Unix(), TTL: 300}), "version 1 mesh session"},
		"garbage":       {"not-a-token", "malformed"},
	}
	for name, c := range cases {
		_, err := a.Client().CallSkill(ctxT(t), addr, "ask", json.RawMessage(`{"query":"hi"}`), protocol.CallOptions{Session: c.tok})
		if codeOf(err) != protocol.CodeInvalidSession || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want -32001 saying %q, got %v", name, c.want, err)
		}
	}
	if _, err := a.Client().CallSkill(ctxT(t), addr, "ask", json.RawMessage(`{"query":"hi"}`), protocol.CallOptions{Session: good}); err != nil {
		t.Errorf("hand-made valid token refused: %v", err)
	}
	// A peer without the secret is not granted.
	c := newTestNode(t, nil)
	if _, err := c.Client().CallSkill(ctxT(t), addr, "ask", json.RawMessage(`{"query":"hi"}`), protocol.CallOptions{}); codeOf(err) != protocol.CodeNotPermitted {
		t.Errorf("no session: want -32009, got %v", err)
	}
}

func TestRateLimitPerPeer(t *testing.T) {
	a, b := pair(t, func(c *Config) { c.RateLimit = 5 })
	addr := addrOf(t, b)
	limited := 0
	for i := 0; i < 150; i++ {
		_, err := a.Client().CallSkill(ctxT(t), addr, "ping", nil, protocol.CallOptions{})
		if codeOf(err) == protocol.CodeRateLimited {
			limited++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if limited == 0 {
		t.Fatal("150 calls at 5/s (burst 100) were never rate limited")
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, bad := range []string{`{"grants":{"bob":["ask"]}}`, `{"grant":{}}`, `{"grants":{"*":[""]}}`, `[`} {
		if _, err := ParsePolicy("p.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "p.json") {
			t.Errorf("%s: want an error naming the file, got %v", bad, err)
		}
	}
}

// TestDocumentedPolicyExamplesParse: every policy example in the README and
// the spec twin works as written.
func TestDocumentedPolicyExamplesParse(t *testing.T) {
	found := 0
	for _, doc := range []string{"../README.md", "../docs/spec.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(b), "```json\n")[1:] {
			block = block[:strings.Index(block, "```")]
			if !strings.Contains(block, `"grants"`) {
				continue
			}
			found++
			p, err := ParsePolicy(doc, []byte(block))
			if err != nil {
				t.Errorf("%s: %v\n%s", doc, err, block)
				continue
			}
			if !p.Allows(protocol.PolicyHTTP, "translate_history") || p.Allows(protocol.PolicyHTTP, "upload_file") {
				t.Errorf("%s: the example does not grant what its text says", doc)
			}
			if strings.Contains(block, `"limits"`) && (p.limits["ask"] == nil || p.limits["*"] == nil) {
				t.Errorf("%s: the example's limits did not load: %v", doc, p.limits)
			}
		}
	}
	if found < 2 {
		t.Fatalf("found %d policy examples, want the README's and the spec's", found)
	}
}

// TestPerSkillLimits: a policy limit binds one caller on one skill, not the
// caller's other skills nor other callers, and "*" gives each other skill
// its own bucket.
func TestPerSkillLimits(t *testing.T) {
	secret := []byte("s")
	a := newTestNode(t, func(c *Config) { c.Secret = secret })
	other := newTestNode(t, func(c *Config) { c.Secret = secret })
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"limits": {"ask": "3/m", "*": "5/h"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newTestNode(t, func(c *Config) { c.Secret = secret; c.PolicyFile = pol })
	addr := addrOf(t, b)
	ask := json.RawMessage(`{"query":"hi"}`)
	for i := range 3 {
		if _, err := a.Client().CallSkill(ctxT(t), addr, "ask", ask, protocol.CallOptions{}); err != nil {
			t.Fatalf("ask %d within the limit: %v", i+1, err)
		}
	}
	_, err := a.Client().CallSkill(ctxT(t), addr, "ask", ask, protocol.CallOptions{})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeRateLimited || !strings.Contains(pe.Message, `"ask"`) {
		t.Fatalf("4th ask in a minute: want -32005 naming the skill, got %v", err)
	}
	if d, _ := pe.Data.(map[string]any); d["skill"] != "ask" || d["retry_after_ms"] == nil {
		t.Errorf("error data %v: want skill and retry_after_ms", pe.Data)
	}
	// Another caller has buckets of its own.
	if _, err := other.Client().CallSkill(ctxT(t), addr, "ask", ask, protocol.CallOptions{}); err != nil {
		t.Fatalf("another caller's first ask: %v", err)
	}
	// "*": 5 per hour for each other skill, each in its own bucket.
	for _, skill := range []string{"ping", "list_files"} {
		for i := range 5 {
			if _, err := a.Client().CallSkill(ctxT(t), addr, skill, nil, protocol.CallOptions{}); err != nil {
				t.Fatalf("%s %d within the \"*\" limit: %v", skill, i+1, err)
			}
		}
		if _, err := a.Client().CallSkill(ctxT(t), addr, skill, nil, protocol.CallOptions{}); codeOf(err) != protocol.CodeRateLimited {
			t.Fatalf("6th %s in an hour: want -32005, got %v", skill, err)
		}
	}
	lines := readAudit(t, b)
	last := lines[len(lines)-1]
	if last["outcome"] != "error" || last["code"] != float64(protocol.CodeRateLimited) || last["skill"] != "list_files" {
		t.Errorf("audit line of a limited call: %v", last)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"10/m": 10.0 / 60, "2/s": 2, "3600/h": 1, " 5 / min ": 5.0 / 60, "1/hour": 1.0 / 3600} {
		got, _, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "10", "10/d", "0/m", "-1/s", "x/m", "1.5/s", "99999999/s"} {
		if _, _, err := ParseRate(bad); err == nil || !strings.Contains(err.Error(), "rate") {
			t.Errorf("ParseRate(%q): want an error, got %v", bad, err)
		}
	}
	for _, bad := range []string{`{"limits":{"ask":"10"}}`, `{"limits":{"":"1/s"}}`, `{"limits":{"ask":5}}`} {
		if _, err := ParsePolicy("p.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "p.json") {
			t.Errorf("%s: want an error naming the file, got %v", bad, err)
		}
	}
}

// TestParsePolicyWords: the policy file's mistakes are worded as the
// custom skills file's are (review 26 §4): JSON fields and types, where
// in the file, and a did-you-mean for an unknown top-level field; no Go
// struct or type names.
func TestParsePolicyWords(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{`{"grnts": {"*": ["ping"]}}`, `policy file p.json: unknown field "grnts" at line 1, column 2 (did you mean "grants"?)`},
		{"{\"grants\": {},\n \"limts\": {}}", `policy file p.json: unknown field "limts" at line 2, column 2 (did you mean "limits"?)`},
		{`{"colour": 1}`, `policy file p.json: unknown field "colour" at line 1, column 2`},
		{`{"grants":{"*":"ping"}}`, `policy file p.json: grants: got a JSON string, want an array of strings at line 1, column`},
		{`{"limits":{"ask":10}}`, `policy file p.json: limits: got a JSON number, want a string at line 1, column`},
		{`[]`, `policy file p.json: got a JSON array, want an object at line 1, column`},
	} {
		_, err := ParsePolicy("p.json", []byte(tc.file))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.file, err, tc.want)
			continue
		}
		for _, gowords := range []string{"Go struct", "policyFile", "[]string", ": json:"} {
			if strings.Contains(err.Error(), gowords) {
				t.Errorf("%s: %q speaks Go (%s)", tc.file, err, gowords)
			}
		}
		if strings.Contains(tc.want, "colour") && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%s: a suggestion for a field near nothing: %v", tc.file, err)
		}
	}
}

// TestUnknownGrantsLimits: a limit of a skill the node lacks is listed
// after the grants, with a did-you-mean; a limit of a known skill or "*"
// is not.
func TestUnknownGrantsLimits(t *testing.T) {
	p, err := ParsePolicy("p.json", []byte(`{"grants":{"*":["pnig"]},"limits":{"uplaod_file":"1/s","ping":"1/s","*":"5/s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := p.UnknownGrants([]string{"ping", "upload_file"})
	if len(got) != 2 || got[0].Skill != "pnig" || got[0].Limit || got[1].Skill != "uplaod_file" || !got[1].Limit || got[1].Who != "" {
		t.Fatalf("UnknownGrants: %+v", got)
	}
	if want := `policy file p.json: limit names skill "uplaod_file", which this node does not have (did you mean "upload_file"?)`; got[1].String() != want {
		t.Errorf("warning %q, want %q", got[1].String(), want)
	}
}
