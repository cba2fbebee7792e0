package main

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestA2ASettingsTable: every variable of the MCP & A2A seed is in the
// table once, honoured by a flag of mcpv2 node (not its twin: the
// MCPV2_* name stays the flag's) or refused naming a flag to use.
func TestA2ASettingsTable(t *testing.T) {
	node := commandOf(t, "node")
	flags := map[string]bool{}
	for _, f := range node.Flags {
		flags[f.Names()[0]] = true
	}
	twins := envTwins(newApp())
	seen := map[string]bool{}
	for _, s := range a2aSettings {
		if seen[s.name] {
			t.Errorf("%s is in the table twice", s.name)
		}
		seen[s.name] = true
		switch {
		case (s.flag == "") == (s.instead == ""):
			t.Errorf("%s: want exactly one of flag and instead: %+v", s.name, s)
		case s.flag != "" && !flags[s.flag]:
			t.Errorf("%s sets --%s, which mcpv2 node does not have", s.name, s.flag)
		case s.instead != "" && !strings.Contains(s.instead, "--") && !strings.Contains(s.instead, "`mcpv2"):
			t.Errorf("%s: the refusal names nothing to use instead: %q", s.name, s.instead)
		case twins[s.name] != "":
			t.Errorf("%s is the twin of --%s; the seed's names are applied by applyA2AEnv", s.name, twins[s.name])
		}
	}
	for _, name := range []string{"MCP_A2A_HOST", "MCP_A2A_PORT", "MCP_A2A_MCP_SERVER_NAME", "MCP_A2A_MCP_TRANSPORT",
		"MCP_A2A_A2A_BASE_URL", "MCP_A2A_A2A_AGENT_NAME", "MCP_A2A_RATE_LIMIT_PER_MINUTE", "MCP_A2A_MAX_INPUT_LENGTH",
		"MCP_A2A_AUDIT_LOG_ENABLED", "MCP_A2A_DISCOVERY_TIMEOUT_SECONDS", "MCP_A2A_DISCOVERY_CACHE_TTL_SECONDS",
		"MCP_A2A_KNOWN_AGENT_URLS", "REDIS_URL"} {
		if !seen[name] {
			t.Errorf("the seed's %s is not in the table", name)
		}
	}
}

func TestA2AConverters(t *testing.T) {
	for _, c := range []struct {
		conv func(string) ([]string, error)
		in   string
		want []string
		err  string
	}{
		{perMinute, "60", []string{"1"}, ""},
		{perMinute, "30", []string{"0.5"}, ""},
		{perMinute, "0", []string{"0"}, ""},
		{perMinute, "-1", nil, "calls per minute"},
		{perMinute, "lots", nil, "calls per minute"},
		{secondsToDuration, "5.0", []string{"5s"}, ""},
		{secondsToDuration, "300", []string{"5m0s"}, ""},
		{secondsToDuration, "0.25", []string{"250ms"}, ""},
		{secondsToDuration, "0", nil, "above 0"},
		{secondsToDuration, "1e12", nil, "up to"},
		{wholeNumber, " 8008 ", []string{"8008"}, ""},
		{wholeNumber, "80.5", nil, "whole number"},
		{urlList, "[]", []string{}, ""},
		{urlList, `["http://agent-a:8008", "https://agent-b:8009"]`, []string{"http://agent-a:8008", "https://agent-b:8009"}, ""},
		{urlList, "http://a:1, http://b:2,", []string{"http://a:1", "http://b:2"}, ""},
		{urlList, `["ftp://x"]`, nil, "not an http:// or https:// URL"},
		{urlList, `["http://x"`, nil, "not a JSON list"},
		{urlList, strings.Repeat("http://a,", maxKnownAgents+1), nil, "more than"},
	} {
		got, err := c.conv(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, %v; want an error saying %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestJudgeA2AEnv(t *testing.T) {
	node := commandOf(t, "node")
	dflt := func() map[string]source {
		m := map[string]source{}
		for _, f := range node.Flags {
			m[f.Names()[0]] = source{kind: fromDefault}
		}
		return m
	}
	acts, warns, err := judgeA2AEnv(map[string]string{"MCP_A2A_PORT": "8008", "MCP_A2A_HOST": "0.0.0.0", "MCP_A2A_A2A_AGENT_NAME": "AI Portfolio Agent",
		"MCP_A2A_RATE_LIMIT_PER_MINUTE": "120", "MCP_A2A_AUDIT_LOG_ENABLED": "true", "REDIS_URL": "redis://localhost:6379/0"},
		map[string]string{"MCP_A2A_PROT": "1"}, node, dflt())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range acts {
		got[a.flag] = strings.Join(a.args, ",")
	}
	want := map[string]string{"port": "8008", "bind-host": "0.0.0.0", "name": "AI Portfolio Agent", "rate-limit": "2"}
	if len(got) != len(want) {
		t.Errorf("actions %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("--%s = %q, want %q", k, got[k], v)
		}
	}
	if len(warns) != 2 || !strings.Contains(warns[0], "REDIS_URL is not used by mcpv2: A2A tasks are kept in the node's own store") ||
		!strings.Contains(warns[1], "MCP_A2A_PROT is not a setting of the MCP & A2A seed that mcpv2 knows; did you mean MCP_A2A_PORT?") {
		t.Errorf("warnings %q", warns)
	}

	// A flag set otherwise wins, with a warning.
	src := dflt()
	src["port"] = source{kind: fromEnv, env: "MCPV2_PORT"}
	acts, warns, err = judgeA2AEnv(map[string]string{"MCP_A2A_PORT": "8008"}, nil, node, src)
	if err != nil || len(acts) != 0 || len(warns) != 1 || !strings.Contains(warns[0], "MCP_A2A_PORT is not used: --port is set by env MCPV2_PORT") {
		t.Errorf("port set by MCPV2_PORT: %v %q %v", acts, warns, err)
	}

	// Refused, naming what to use.
	_, _, err = judgeA2AEnv(map[string]string{"MCP_A2A_MCP_TRANSPORT": "sse", "MCP_A2A_AUDIT_LOG_ENABLED": "false",
		"MCP_A2A_MAX_INPUT_LENGTH": "10000", "MCP_A2A_A2A_BASE_URL": "http://localhost:8008", "MCP_A2A_MCP_SERVER_NAME": "ai-portfolio-mcp",
		"MCP_A2A_RATE_LIMIT_PER_MINUTE": "often"}, nil, node, dflt())
	for _, s := range []string{"MCP_A2A_MCP_TRANSPORT", "`mcpv2 mcp`", "/mcp", "MCP_A2A_AUDIT_LOG_ENABLED", "always on",
		"MCP_A2A_MAX_INPUT_LENGTH", "--max-message", "MCP_A2A_A2A_BASE_URL", "--allowed-hosts", "MCP_A2A_MCP_SERVER_NAME", "--name",
		`MCP_A2A_RATE_LIMIT_PER_MINUTE (--rate-limit): "often" is not a number`} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v does not say %q", err, s)
		}
	}
	// A client command is not stopped by them.
	if _, _, err := judgeA2AEnv(map[string]string{"MCP_A2A_MCP_TRANSPORT": "sse"}, nil, commandOf(t, "call"), nil); err != nil {
		t.Errorf("call with MCP_A2A_MCP_TRANSPORT: %v", err)
	}
}

// TestA2AEnvironment: a node started with the MCP & A2A seed's variables
// binds where they say, takes the name, converts the rate limit, and
// warns of REDIS_URL; a refused one stops it before it starts.
func TestA2AEnvironment(t *testing.T) {
	t.Parallel()
	port := edgeFreePort(t, "127.0.0.1")
	home := t.TempDir()
	p := startSeedNode(t, "a2a-env", []string{"MCPV2_HOME=" + home, "MCP_A2A_HOST=127.0.0.1", "MCP_A2A_PORT=" + strconv.Itoa(port),
		"MCP_A2A_A2A_AGENT_NAME=AI Portfolio Agent", "MCP_A2A_RATE_LIMIT_PER_MINUTE=60", "MCP_A2A_AUDIT_LOG_ENABLED=true",
		"REDIS_URL=redis://localhost:6379/0"}, "--no-mesh")
	if p.port != port {
		t.Errorf("edge on port %d, want MCP_A2A_PORT %d", p.port, port)
	}
	ans := edgeDo(t, p.client, http.MethodGet, p.base+"/.well-known/agent.json", nil, nil)
	var card struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(ans.body, &card); err != nil || card.Name != "AI Portfolio Agent" {
		t.Errorf("card name %q (%v), want MCP_A2A_A2A_AGENT_NAME: %s", card.Name, err, ans)
	}
	if log := p.proc.stderr(); !strings.Contains(log, "REDIS_URL is not used by mcpv2") {
		t.Errorf("no warning about REDIS_URL:\n%s", log)
	}

	dir := t.TempDir()
	out, errs, code := runEnv(t, []string{"MCPV2_HOME=" + dir, "MCP_A2A_MCP_TRANSPORT=sse", "MCP_A2A_AUDIT_LOG_ENABLED=false"},
		"node", "--no-mesh", "--listen", "/ip4/127.0.0.1/tcp/0")
	if code == 0 || strings.Contains(out, "MCPV2_PEER_ID=") || !strings.Contains(errs, "MCP_A2A_MCP_TRANSPORT") || !strings.Contains(errs, "MCP_A2A_AUDIT_LOG_ENABLED") {
		t.Fatalf("refused variables: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if _, err := os.Stat(identityPath(dir)); err == nil {
		t.Errorf("refused, but the node created its identity first")
	}
}
