//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/node/skills/custom"
	"github.com/mcpv2/mcpv2/protocol"
)

// agentsDir holds the example's custom skills files, one per agent.
var agentsDir = filepath.Join("..", "agents")

// wantAgents is how run.sh spreads the five tools over four agents: the
// request "7 times 6, the weather in Tokyo, engineers in Platform" needs
// three different agents (calculator and weather are each offered once,
// database_query only by agents that offer neither), and database_query is
// offered twice, so that a call to one can fail over to the other.
var wantAgents = map[string][]string{
	"math":     {"calculator", "file_reader"},
	"weather":  {"weather", "web_search"},
	"data":     {"database_query", "file_reader"},
	"research": {"database_query", "web_search"},
	// front is the seed's one agent with all five tools (run.sh's third
	// part); it joins the mesh only after the first two parts ran.
	"front": {"calculator", "weather", "database_query", "web_search", "file_reader"},
}

// loadAgents builds demotools, puts it on PATH as the skills files expect,
// and loads every agents/*.json into a registry of its own, as a node does
// with --skills.
func loadAgents(t *testing.T) map[string]*skills.Registry {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "demotools"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	files, err := filepath.Abs(filesDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envFiles, files)
	t.Setenv(envSleep, "0")

	paths, err := filepath.Glob(filepath.Join(agentsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	regs := map[string]*skills.Registry{}
	for _, p := range paths {
		agent := strings.TrimSuffix(filepath.Base(p), ".json")
		r := skills.NewRegistry(nil)
		l, err := custom.New(r, custom.WithScratchDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		names, err := l.LoadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := wantAgents[agent]; !slices.Equal(names, want) {
			t.Errorf("%s offers %v, want %v", p, names, want)
		}
		for _, d := range r.List() {
			if d.Description == "" || len(d.Tags) == 0 {
				t.Errorf("%s: skill %s has no description or no tags", p, d.Name)
			}
		}
		regs[agent] = r
	}
	if len(regs) != len(wantAgents) {
		t.Fatalf("agents %v, want the %d of wantAgents", slices.Sorted(maps.Keys(regs)), len(wantAgents))
	}
	return regs
}

// TestAgents loads the example's skills files as a node would and calls
// every skill of every agent through the registry: the schema validates
// the arguments, the command handler runs demotools, and a tool's failure
// comes back as a tool execution error with demotools' reason.
func TestAgents(t *testing.T) {
	regs := loadAgents(t)
	ctx := context.Background()
	calls := map[string]struct{ args, want string }{
		"calculator":     {`{"operation":"multiply","a":7,"b":6}`, `"result":42`},
		"weather":        {`{"city":"Tokyo"}`, `"city":"Tokyo"`},
		"database_query": {`{"action":"count","department":"Platform","role":"engineer"}`, `"count":4`},
		"web_search":     {`{"query":"kademlia","limit":1}`, `"url":"https://example.org/kademlia"`},
		"file_reader":    {`{"path":"release-notes.txt","max_lines":1}`, `"truncated":true`},
	}
	offered := map[string][]string{}
	for agent, r := range regs {
		for _, name := range r.Names() {
			if agent != "front" {
				offered[name] = append(offered[name], agent)
			}
			c, ok := calls[name]
			if !ok {
				t.Errorf("%s: unexpected skill %s", agent, name)
				continue
			}
			got, err := r.Call(ctx, name, json.RawMessage(c.args))
			if err != nil || !strings.Contains(string(got), c.want) {
				t.Errorf("%s: %s %s = %s, %v; want %s", agent, name, c.args, got, err, c.want)
			}
		}
	}
	// The acceptance request lands on three different agents whatever the
	// ranking, and database_query has a second agent to fail over to.
	if len(offered["calculator"]) != 1 || len(offered["weather"]) != 1 || len(offered["database_query"]) != 2 {
		t.Errorf("offered by: %v", offered)
	}
	for _, a := range offered["database_query"] {
		if slices.Contains(offered["calculator"], a) || slices.Contains(offered["weather"], a) || offered["calculator"][0] == offered["weather"][0] {
			t.Errorf("agent %s serves two parts of the acceptance request: %v", a, offered)
		}
	}

	// The schemas refuse what the tools would refuse anyway, before any
	// program runs; a tool's own refusal is -32004 with its reason.
	r := regs["math"]
	for _, tc := range []struct {
		skill, args string
		code        int
		want        string
	}{
		{"calculator", `{"operation":"times","a":7,"b":6}`, protocol.CodeInvalidParams, "operation"},
		{"calculator", `{"operation":"add","a":"7","b":6}`, protocol.CodeInvalidParams, "a"},
		{"calculator", `{"operation":"add","a":7,"b":6,"c":1}`, protocol.CodeInvalidParams, "c"},
		{"calculator", `{"a":7}`, protocol.CodeInvalidParams, "operation"},
		{"calculator", `{"operation":"divide","a":7,"b":0}`, protocol.CodeToolExecution, "division by zero"},
		{"file_reader", `{"path":"../agents/math.json"}`, protocol.CodeToolExecution, `contains ".."`},
		{"file_reader", `{"path":"handbook.txt","max_lines":5000}`, protocol.CodeInvalidParams, "max_lines"},
	} {
		_, err := r.Call(ctx, tc.skill, json.RawMessage(tc.args))
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != tc.code || !strings.Contains(pe.Message, tc.want) {
			t.Errorf("%s %s: %v; want code %d holding %q", tc.skill, tc.args, err, tc.code, tc.want)
		}
	}
	// The seed's argument names pass every agent's schema, as its curls
	// send them; what the schema can tell apart is refused by it.
	seed := []struct{ agent, skill, args, want string }{
		{"data", "database_query", `{"query_type":"filter","filter_field":"department","filter_value":"Platform"}`, `"count":6`},
		{"research", "database_query", `{"query_type":"count","filter_field":"min_salary","filter_value":170000}`, `"count":6`},
		{"research", "web_search", `{"query":"Model Context Protocol","num_results":5}`, `"results":[`},
		{"weather", "web_search", `{"query":"Model Context Protocol","num_results":1}`, `"results":[`},
	}
	for _, c := range seed {
		got, err := regs[c.agent].Call(ctx, c.skill, json.RawMessage(c.args))
		if err != nil || !strings.Contains(string(got), c.want) {
			t.Errorf("%s: %s %s = %s, %v; want %s", c.agent, c.skill, c.args, got, err, c.want)
		}
	}
	for _, args := range []string{
		`{"department":"Platform"}`, // neither action nor query_type
		`{"query_type":"drop"}`,
		`{"query_type":"count","filter_field":"salary","filter_value":"1"}`,
		`{"query_type":"count","filter_field":"department"}`,
		`{"query_type":"count","filter_value":"Data"}`,
	} {
		_, err := regs["data"].Call(ctx, "database_query", json.RawMessage(args))
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidParams {
			t.Errorf("database_query %s: %v; want -32602 from the schema", args, err)
		}
	}
	for agent, skill := range map[string]string{"data": "database_query", "weather": "weather"} {
		args := map[string]string{"database_query": `{"action":"count","department":"Marketing"}`, "weather": `{"city":"Paris"}`}[skill]
		_, err := regs[agent].Call(ctx, skill, json.RawMessage(args))
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeToolExecution || !strings.Contains(pe.Message, "known:") {
			t.Errorf("%s %s: %v; want -32004 listing the known values", skill, args, err)
		}
	}
}
