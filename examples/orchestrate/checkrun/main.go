// Command checkrun checks what `mcpv2 orchestrate --json` printed, for
// examples/orchestrate/run.sh. It reads the JSON lines on stdin (events,
// then one {"type":"result"} line), prints the subtasks and one PASS or
// FAIL line per check, and exits 1 when a check failed (2 for a bad
// command line or unreadable input).
//
//	checkrun --agents 3 --expect 42 --result 'database_query="count":4' < run.jsonl
//	checkrun --skill database_query --killed 12D3KooW… --survivor 12D3KooW… < failover.jsonl
//
// The result line it reads is
//
//	{"type":"result","status":…,"subtasks":[{"id","skill","agent","status","attempts","tried":[…]},…],"answer":…}
//
// where a status counts as success when it is one of ok, done, completed,
// complete, succeeded or success, and an agent (in "agent" or "tried") is a
// PeerID string or an object with a "peer_id". It uses the standard
// library only.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Input caps.
const (
	maxLine  = 1 << 20
	maxLines = 100000
)

// successWords are the statuses that count as done well.
var successWords = []string{"ok", "done", "completed", "complete", "succeeded", "success"}

// result is the final line of `mcpv2 orchestrate --json`, as far as the
// checks read it.
type result struct {
	Type     string          `json:"type"`
	Status   string          `json:"status"`
	Subtasks []subtask       `json:"subtasks"`
	Answer   json.RawMessage `json:"answer"`
}

// subtask is one subtask of the result.
type subtask struct {
	ID       json.RawMessage   `json:"id"`
	Skill    string            `json:"skill"`
	Agent    json.RawMessage   `json:"agent"`
	Status   string            `json:"status"`
	Attempts int               `json:"attempts"`
	Tried    []json.RawMessage `json:"tried"`
	Result   json.RawMessage   `json:"result"`
}

// checks are what the command line asks for.
type checks struct {
	agents   int      // at least this many different agents (0: no check)
	expect   []string // strings the answer must hold
	results  []string // SKILL:TEXT: that skill's subtask result holds TEXT
	skill    string   // the failover subtask's skill ("" : no failover check)
	killed   string   // the agent stopped in the middle of the call
	survivor string   // the agent that must have finished it
}

// multiFlag is a repeatable string flag.
type multiFlag []string

// String returns the values given so far, for flag's messages.
func (m *multiFlag) String() string { return strings.Join(*m, ",") }

// Set adds one value.
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process; it returns the exit status.
func run(argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("checkrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c checks
	var expect, results multiFlag
	fs.IntVar(&c.agents, "agents", 0, "the subtasks ran on at least this many different agents")
	fs.Var(&expect, "expect", "the answer holds this text (repeatable)")
	fs.Var(&results, "result", "SKILL:TEXT: the result of the subtask of that skill holds TEXT in its compact JSON (repeatable)")
	fs.StringVar(&c.skill, "skill", "", "the skill whose call failed over")
	fs.StringVar(&c.killed, "killed", "", "PeerID of the agent stopped during the call (with --skill)")
	fs.StringVar(&c.survivor, "survivor", "", "PeerID of the agent that must have finished it (with --skill)")
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	c.expect, c.results = expect, results
	badResult := slices.ContainsFunc(results, func(r string) bool { k, v, ok := strings.Cut(r, ":"); return !ok || k == "" || v == "" })
	if fs.NArg() > 0 || badResult || (c.skill != "") != (c.killed != "" && c.survivor != "") {
		fmt.Fprintln(stderr, "checkrun: usage: checkrun [--agents N] [--expect TEXT]… [--result SKILL:TEXT]… [--skill S --killed PEER --survivor PEER] < JSON_LINES")
		return 2
	}
	res, err := readResult(stdin)
	if err != nil {
		fmt.Fprintf(stdout, "FAIL  %v\n", err)
		return 1
	}
	printSubtasks(stdout, res)
	lines := check(res, c)
	failed := false
	for _, l := range lines {
		fmt.Fprintln(stdout, l)
		failed = failed || strings.HasPrefix(l, "FAIL")
	}
	if failed {
		return 1
	}
	return 0
}

// readResult reads JSON lines and returns the last result line. Every
// non-empty line must be a JSON object with a "type".
func readResult(r io.Reader) (*result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var last *result
	n := 0
	for sc.Scan() {
		n++
		if n > maxLines {
			return nil, fmt.Errorf("more than %d lines", maxLines)
		}
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var peek struct {
			Type string `json:"type"`
		}
		if line[0] != '{' || json.Unmarshal(line, &peek) != nil {
			return nil, fmt.Errorf("line %d is not a JSON object: %.80s", n, line)
		}
		if peek.Type == "" {
			return nil, fmt.Errorf(`line %d has no "type": %.80s`, n, line)
		}
		if peek.Type != "result" {
			continue
		}
		var res result
		if err := json.Unmarshal(line, &res); err != nil {
			return nil, fmt.Errorf("line %d: the result does not decode: %v", n, err)
		}
		last = &res
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d is longer than %d bytes", n+1, maxLine)
		}
		return nil, err
	}
	if last == nil {
		return nil, fmt.Errorf(`no {"type":"result"} line among %d lines`, n)
	}
	return last, nil
}

// agentID reads an agent: a PeerID string, or an object with a peer_id
// (or id). It returns "" for anything else.
func agentID(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		PeerID string `json:"peer_id"`
		ID     string `json:"id"`
	}
	if json.Unmarshal(raw, &o) == nil {
		if o.PeerID != "" {
			return o.PeerID
		}
		return o.ID
	}
	return ""
}

// success says whether a status means done well.
func success(s string) bool { return slices.Contains(successWords, strings.ToLower(s)) }

// short abbreviates a PeerID for the table.
func short(id string) string {
	if len(id) > 16 {
		return id[:8] + "…" + id[len(id)-6:]
	}
	return id
}

// printSubtasks prints the result's subtasks as a table.
func printSubtasks(w io.Writer, res *result) {
	fmt.Fprintf(w, "      request status %q, %d subtasks\n", res.Status, len(res.Subtasks))
	for _, s := range res.Subtasks {
		var tried []string
		for _, t := range s.Tried {
			tried = append(tried, short(agentID(t)))
		}
		fmt.Fprintf(w, "      %-15s %-15s %-10s attempts=%d agent=%s tried=[%s]\n",
			strings.Trim(string(s.ID), `"`), s.Skill, s.Status, s.Attempts, short(agentID(s.Agent)), strings.Join(tried, " "))
	}
}

// check runs the checks on a result and returns one "PASS  …" or
// "FAIL  …" line each.
func check(res *result, c checks) []string {
	var out []string
	say := func(ok bool, format string, a ...any) {
		tag := "PASS  "
		if !ok {
			tag = "FAIL  "
		}
		out = append(out, tag+fmt.Sprintf(format, a...))
	}
	say(success(res.Status), "the request ended with status %q", res.Status)
	say(len(res.Subtasks) > 0, "the request has %d subtasks", len(res.Subtasks))
	agents := map[string]bool{}
	for _, s := range res.Subtasks {
		id := agentID(s.Agent)
		say(success(s.Status) && id != "", "subtask %s (%s) ended %q on agent %s", strings.Trim(string(s.ID), `"`), s.Skill, s.Status, short(id))
		if id != "" {
			agents[id] = true
		}
	}
	if c.agents > 0 {
		say(len(agents) >= c.agents, "the subtasks ran on %d different agents (want at least %d)", len(agents), c.agents)
	}
	for _, e := range c.expect {
		say(bytes.Contains(res.Answer, []byte(e)) || strings.Contains(jsonText(res.Answer), e), "the answer mentions %q", e)
	}
	for _, r := range c.results {
		skill, text, _ := strings.Cut(r, ":")
		i := slices.IndexFunc(res.Subtasks, func(s subtask) bool { return s.Skill == skill })
		var got bytes.Buffer
		if i >= 0 && json.Compact(&got, res.Subtasks[i].Result) != nil {
			got.Reset()
		}
		say(i >= 0 && strings.Contains(got.String(), text), "the %s result holds %s", skill, text)
	}
	if c.skill == "" {
		return out
	}
	i := slices.IndexFunc(res.Subtasks, func(s subtask) bool { return s.Skill == c.skill })
	if i < 0 {
		say(false, "a subtask calls %s", c.skill)
		return out
	}
	s := res.Subtasks[i]
	var tried []string
	for _, t := range s.Tried {
		tried = append(tried, agentID(t))
	}
	say(success(s.Status), "the %s subtask completed (status %q)", c.skill, s.Status)
	say(s.Attempts >= 2, "the %s subtask took %d attempts (want at least 2)", c.skill, s.Attempts)
	say(agentID(s.Agent) == c.survivor, "the %s subtask finished on the surviving agent %s (it says %s)", c.skill, short(c.survivor), short(agentID(s.Agent)))
	say(slices.Contains(tried, c.killed), "the stopped agent %s is among the agents tried %v", short(c.killed), shortAll(tried))
	return out
}

// jsonText decodes a JSON string answer to its text, so that --expect
// sees "Tokyo" in "\"Tokyo\"" and unescaped characters; other values are
// returned as they are.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func shortAll(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = short(id)
	}
	return out
}
