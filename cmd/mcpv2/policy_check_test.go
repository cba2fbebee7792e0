package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyFileChecked: the policy file is checked as the custom skills
// file is (issue 26, item 6). A JSON syntax error names its line and
// column; a grant of a skill the node does not have is warned at start
// (the skill, the grant, a did-you-mean and the file) and listed by
// mcpv2 config show, as text and as JSON; so is a limit of such a skill.
// An unknown field or a value of the wrong type is said in JSON's words,
// with where, and an unknown field gets a did-you-mean.
func TestPolicyFileChecked(t *testing.T) {
	dir := t.TempDir()

	// A syntax error: the line and column of the stray comma's follower.
	bad := writeFile(t, filepath.Join(dir, "bad.json"), "{\"grants\": {\"http\": [\"ping\",\n   ]}}\n")
	_, errs, code := run(t, "node", "--data-dir", filepath.Join(dir, "d1"), "--policy", bad, "--no-mesh", "--no-mdns", "--no-nat", "--p2p-port", "0")
	if want := "policy file " + bad + ": invalid JSON at line 2, column 4: invalid character ']'"; code != 1 || !strings.Contains(errs, want) {
		t.Errorf("a policy file with a syntax error: exit %d, stderr %q; want exit 1 and %q", code, errs, want)
	}
	// Cut short: the end of the file is where.
	short := writeFile(t, filepath.Join(dir, "short.json"), "{\"grants\": {\n  \"http\": [\"ping\"]")
	_, errs, code = run(t, "node", "--data-dir", filepath.Join(dir, "d1"), "--policy", short, "--no-mesh", "--no-mdns", "--no-nat", "--p2p-port", "0")
	if want := "policy file " + short + ": invalid JSON at line 2, column 18: unexpected end of input"; code != 1 || !strings.Contains(errs, want) {
		t.Errorf("a policy file cut short: exit %d, stderr %q; want exit 1 and %q", code, errs, want)
	}

	// An unknown field: where, and a did-you-mean; a value of the wrong
	// type: in JSON's words, where, no Go (review 26 §4).
	typo := writeFile(t, filepath.Join(dir, "typo.json"), `{"grnts": {"http": ["ping"]}}`)
	out, errs, code := run(t, "config", "show", "--data-dir", filepath.Join(dir, "d1"), "--policy", typo)
	if want := "# warning: mcpv2 node would refuse to start: policy file " + typo + `: unknown field "grnts" at line 1, column 2 (did you mean "grants"?)`; code != 0 || !strings.Contains(out, want) {
		t.Errorf("config show with an unknown field: exit %d, stderr %s, want %q in:\n%s", code, errs, want, out)
	}
	wrong := writeFile(t, filepath.Join(dir, "wrong.json"), `{"grants": {"*": "ping"}}`)
	_, errs, code = run(t, "node", "--data-dir", filepath.Join(dir, "d1"), "--policy", wrong, "--no-mesh", "--no-mdns", "--no-nat", "--p2p-port", "0")
	if want := "policy file " + wrong + ": grants: got a JSON string, want an array of strings at line 1, column"; code != 1 || !strings.Contains(errs, want) || strings.Contains(errs, "Go struct") {
		t.Errorf("a policy file with a wrong type: exit %d, stderr %q; want exit 1 and %q", code, errs, want)
	}

	// config show still shows the settings, and says why the node would
	// not start.
	out, errs, code = run(t, "config", "show", "--data-dir", filepath.Join(dir, "d1"), "--policy", bad)
	if want := "# warning: mcpv2 node would refuse to start: policy file " + bad + ": invalid JSON at line 2, column 4"; code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "# port ") {
		t.Errorf("config show with a bad policy file: exit %d, stderr %s, want %q in:\n%s", code, errs, want, out)
	}

	// Grants of skills the node does not have: warned, and the node runs.
	data := filepath.Join(dir, "d2")
	pol := writeFile(t, filepath.Join(dir, "policy.json"), `{"grants": {"http": ["pnig", "ask"], "*": ["get_skil", "*"]}, "limits": {"uplaod_file": "1/s", "ask": "1/s", "*": "9/s"}}`)
	p := startNode(t, data, "--policy", pol, "--no-mesh", "--no-mdns", "--no-nat")
	log := p.Log.String()
	for _, want := range []string{
		`level=WARN msg="policy file ` + pol + `: grant to \"http\" names skill \"pnig\", which this node does not have (did you mean \"ping\"?)" skill=pnig grant=http suggest=ping file=` + pol,
		`level=WARN msg="policy file ` + pol + `: grant to \"*\" names skill \"get_skil\", which this node does not have (did you mean \"get_skill\"?)" skill=get_skil grant=* suggest=get_skill file=` + pol,
		`level=WARN msg="policy file ` + pol + `: limit names skill \"uplaod_file\", which this node does not have (did you mean \"upload_file\"?)" skill=uplaod_file limit=true suggest=upload_file file=` + pol,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("node log lacks %q:\n%s", want, log)
		}
	}
	for _, known := range []string{"skill=ask ", "skill=* ", `limit names skill \"ask\"`, `limit names skill \"*\"`} {
		if strings.Contains(log, known) {
			t.Errorf("node log warns of a grant that is fine (%s):\n%s", known, log)
		}
	}

	// config show lists the same, with the same flags.
	out, errs, code = run(t, "config", "show", "--data-dir", data, "--policy", pol, "--no-mesh")
	if code != 0 {
		t.Fatalf("config show: exit %d, %s", code, errs)
	}
	for _, want := range []string{
		`# warning: policy file ` + pol + `: grant to "*" names skill "get_skil", which this node does not have (did you mean "get_skill"?)`,
		`# warning: policy file ` + pol + `: grant to "http" names skill "pnig", which this node does not have (did you mean "ping"?)`,
		`# warning: policy file ` + pol + `: limit names skill "uplaod_file", which this node does not have (did you mean "upload_file"?)`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("config show lacks %q:\n%s", want, out)
		}
	}
	out, errs, code = run(t, "config", "show", "--json", "--data-dir", data, "--policy", pol, "--no-mesh")
	var shown struct {
		PolicyWarnings []string `json:"policy_warnings"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.PolicyWarnings) != 3 || !strings.Contains(shown.PolicyWarnings[1], `skill "pnig"`) {
		t.Errorf("config show --json: exit %d, policy_warnings %q, stderr %s", code, shown.PolicyWarnings, errs)
	}
	// A grant of a custom skill of the skills file is no warning; one of
	// orchestrate is, without the mesh (no orchestrate there).
	// A grant of a tool of a custom MCP server's "tools": "*" (docs_…) is
	// not known before the server answers: no warning.
	sk := writeFile(t, filepath.Join(dir, "skills.json"), `{"skills": [{"name": "greet", "handler": {"type": "template", "template": "hi"}},
		{"name": "docs", "handler": {"type": "mcp", "url": "http://127.0.0.1:9/mcp", "tools": "*"}}]}`)
	pol2 := writeFile(t, filepath.Join(dir, "policy2.json"), `{"grants": {"http": ["greet", "orchestrate", "scan", "docs_read"]}}`)
	out, errs, code = run(t, "config", "show", "--data-dir", data, "--policy", pol2, "--skills", sk, "--no-mesh")
	if code != 0 || strings.Contains(out, `"greet"`) || strings.Contains(out, `"scan"`) || strings.Contains(out, `"docs_read"`) || !strings.Contains(out, `names skill "orchestrate"`) {
		t.Errorf("config show with a custom skill: exit %d, stderr %s:\n%s", code, errs, out)
	}
	out, _, _ = run(t, "config", "show", "--data-dir", data, "--policy", pol2, "--skills", sk)
	if strings.Contains(out, "# warning") {
		t.Errorf("config show with the mesh warns of orchestrate or greet:\n%s", out)
	}
}
