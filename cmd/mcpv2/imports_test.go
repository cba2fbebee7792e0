package main

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// This test lives with the command because cmd is the one place that wires
// every package together; it guards DESIGN.md's import direction for the
// whole module.

const module = "github.com/mcpv2/mcpv2"

type pkgInfo struct {
	ImportPath string
	Imports    []string
}

// importRule says which project packages a package (by prefix) may import.
type importRule struct {
	prefix  string
	allowed []string // project package prefixes it may import
	stdOnly bool     // only the standard library (and allowedThird) outside the project
}

var importRules = []importRule{
	{prefix: "protocol", allowed: []string{"protocol"}, stdOnly: true},
	{prefix: "transport", allowed: nil},
	{prefix: "discovery", allowed: []string{"discovery", "protocol", "transport"}},
	// node/skills/custom, the custom-skill engine, registers into
	// node/skills and uses the node's guard kinds and llm's same-origin
	// check; it never sees the node itself (the node wires it).
	{prefix: "node/skills/custom", allowed: []string{"node/skills", "node/guard", "node/llm", "node/a2aclient", "protocol", "internal/netscope", "internal/cardsig"}},
	// node/localapi, the local node API (mcpv2 status, id, key; the
	// dashboard), serves a node: what node may import, no edge.
	{prefix: "node/localapi", allowed: []string{"node", "protocol", "transport", "discovery", "internal/suggest", "internal/lazyre", "internal/netscope"}},
	{prefix: "node", allowed: []string{"node", "protocol", "transport", "discovery", "internal/suggest", "internal/lazyre", "internal/netscope", "internal/cardsig"}},
	{prefix: "edge", allowed: []string{"edge", "protocol", "internal/netscope", "internal/cardsig"}},
	{prefix: "examples", allowed: []string{"node", "protocol", "transport", "discovery", "edge"}},
	{prefix: "cmd", allowed: []string{"node", "protocol", "transport", "discovery", "edge", "internal/supervise", "internal/suggest", "internal/netscope"}},
	// bench is a program like cmd (go run ./bench) that wires a node and
	// its client together to measure them; nothing imports it.
	// bench/bare is the memory rows' lean baseline and bench/internal/lean
	// the host and echo it shares with the bench: nothing of mcpv2, so
	// that mcpv2's pages do not count in the baseline's RSS.
	{prefix: "bench/internal/lean", allowed: nil},
	{prefix: "bench/bare", allowed: []string{"bench/internal/lean"}},
	{prefix: "bench", allowed: []string{"node", "protocol", "transport", "discovery", "edge", "bench/internal/lean"}},
	// deploy holds the packaging (unit, image, compose) and only the tests
	// that check it: they run the mcpv2 binary and parse bootstrap
	// addresses as the node does.
	{prefix: "deploy", allowed: []string{"node", "internal/testenv"}},
	// internal/testenv is shared by the tests (_test.go files only): the
	// standard library alone, so that any package's tests may use it.
	{prefix: "internal/testenv", allowed: nil, stdOnly: true},
	// internal/supervise runs the shell's child processes (cmd's, not
	// only the tests'): the standard library alone, no package of the
	// project.
	{prefix: "internal/supervise", allowed: nil, stdOnly: true},
	// internal/suggest is the one "did you mean" of the node (skills) and
	// the CLI (commands, flags, settings, shell): no package of the
	// project, one third-party module (levenshtein).
	{prefix: "internal/suggest", allowed: nil},
	// internal/netscope is the outbound address scope (issue 23): the
	// node's, the edge's and cmd's requests to A2A agents at URLs. The
	// standard library only.
	{prefix: "internal/netscope", allowed: nil, stdOnly: true},
	// internal/cardsig is the canonical form of a signed A2A card, the
	// A2A face's (signing) and the A2A client's (verifying): JCS only.
	{prefix: "internal/cardsig", allowed: nil},
	// internal/lazyre compiles a regular expression on first use (the
	// guard's and the planner's): the standard library only.
	{prefix: "internal/lazyre", allowed: nil, stdOnly: true},
	// internal/oidctest is a real OpenID provider for the tests (_test.go
	// files only): any third-party module, no package of the project.
	{prefix: "internal/oidctest", allowed: nil},
	// internal/otlptest is a real OTLP trace receiver for the tests
	// (_test.go files only): any third-party module, no package of the
	// project.
	{prefix: "internal/otlptest", allowed: nil},
	// internal/promtest sums gathered metrics for the tests (_test.go
	// files only).
	{prefix: "internal/promtest", allowed: nil},
	// internal/chrometest drives a headless chromium for the tests
	// (_test.go files only: the dashboard's, the NAT lab's): chromedp,
	// and internal/testenv to skip without chromium.
	{prefix: "internal/chrometest", allowed: []string{"internal/testenv"}},
}

// thirdPartyOK lists what protocol may use beside the standard library:
// the JSON Schema types, and JSON v2 (github.com/go-json-experiment/json,
// the module of what Go ships as encoding/json/v2 behind GOEXPERIMENT).
var thirdPartyOK = []string{"github.com/google/jsonschema-go/", "github.com/go-json-experiment/json/"}

func under(rel, prefix string) bool { return rel == prefix || strings.HasPrefix(rel, prefix+"/") }

// checkImports returns one line per violation.
func checkImports(pkgs []pkgInfo) []string {
	var bad []string
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue
		}
		var rule *importRule
		for i := range importRules {
			if under(rel, importRules[i].prefix) {
				rule = &importRules[i]
				break
			}
		}
		if rule == nil {
			bad = append(bad, p.ImportPath+": top-level directory not covered by DESIGN.md's rules")
			continue
		}
		for _, imp := range p.Imports {
			irel, internal := strings.CutPrefix(imp, module+"/")
			if internal {
				allowed := false
				for _, a := range rule.allowed {
					allowed = allowed || under(irel, a)
				}
				if under(irel, "cmd") || !allowed {
					bad = append(bad, p.ImportPath+" imports "+imp)
				}
				continue
			}
			if rule.stdOnly && strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				ok := false
				for _, t := range thirdPartyOK {
					ok = ok || strings.HasPrefix(imp+"/", t)
				}
				if !ok {
					bad = append(bad, p.ImportPath+" imports non-standard "+imp)
				}
			}
		}
	}
	return bad
}

func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkgInfo
	for {
		var p pkgInfo
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, v := range checkImports(pkgs) {
		t.Errorf("import rule broken: %s", v)
	}
}

// TestCheckImportsCatches proves the checker fails on each kind of violation.
func TestCheckImportsCatches(t *testing.T) {
	cases := []pkgInfo{
		{module + "/protocol", []string{module + "/node"}},
		{module + "/protocol/translate", []string{"github.com/libp2p/go-libp2p/core/peer"}},
		{module + "/transport", []string{module + "/protocol"}},
		{module + "/discovery", []string{module + "/node"}},
		{module + "/edge", []string{module + "/node"}},
		{module + "/edge/mcp", []string{module + "/cmd/mcpv2"}},
		{module + "/node", []string{module + "/edge"}},
		{module + "/node/skills/custom", []string{module + "/node"}},
		{module + "/examples/twopeers", []string{module + "/cmd/mcpv2"}},
		{module + "/stray", nil},
		{module + "/internal/supervise", []string{"github.com/libp2p/go-libp2p"}},
	}
	for _, c := range cases {
		if got := checkImports([]pkgInfo{c}); len(got) != 1 {
			t.Errorf("%s importing %v: want 1 violation, got %v", c.ImportPath, c.Imports, got)
		}
	}
	ok := []pkgInfo{
		{module + "/protocol/translate", []string{module + "/protocol", "encoding/json"}},
		{module + "/node", []string{module + "/protocol", module + "/transport", module + "/node/store", "github.com/libp2p/go-libp2p"}},
		{module + "/edge/mcp", []string{module + "/edge", module + "/protocol"}},
		{module + "/node/skills/custom", []string{module + "/node/skills", module + "/node/guard", module + "/protocol"}},
	}
	if got := checkImports(ok); len(got) != 0 {
		t.Errorf("false positives: %v", got)
	}
}
