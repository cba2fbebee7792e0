package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	peerA = "12D3KooWAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	peerB = "12D3KooWBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	peerC = "12D3KooWCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC"
)

// acceptance is a run of the three-part request as the contract writes it.
var acceptance = strings.Join([]string{
	`{"type":"event","subtask":"s1","state":"running","agent":"` + peerA + `"}`,
	`{"type":"event","subtask":"s1","state":"completed"}`,
	``,
	`{"type":"result","status":"completed","subtasks":[` +
		`{"id":"s1","skill":"calculator","agent":"` + peerA + `","status":"completed","attempts":1,"tried":["` + peerA + `"],"result":{"operation":"multiply", "result": 42}},` +
		`{"id":"s2","skill":"weather","agent":{"peer_id":"` + peerB + `","name":"weather"},"status":"ok","attempts":1,"tried":["` + peerB + `"]},` +
		`{"id":"s3","skill":"database_query","agent":"` + peerC + `","status":"done","attempts":1,"tried":["` + peerC + `"]}],` +
		`"answer":"7 × 6 = 42; Tokyo: clear skies, 24 °C; Platform has 4 engineers"}`,
}, "\n")

// failover is a run in which the database_query call moved from A to B.
func failover(status string, attempts, agent string) string {
	return `{"type":"event","subtask":"s1","state":"running","agent":"` + peerA + `"}
{"type":"event","subtask":"s1","state":"retrying","agent":"` + peerB + `"}
{"type":"result","status":"` + status + `","subtasks":[{"id":"s1","skill":"database_query","agent":"` + agent + `","status":"` + status + `","attempts":` + attempts + `,"tried":["` + peerA + `","` + peerB + `"]}],"answer":{"count":4}}
`
}

func runCheck(t *testing.T, in string, argv ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(argv, strings.NewReader(in), &out, &errb)
	return code, out.String() + errb.String()
}

func TestAcceptance(t *testing.T) {
	code, out := runCheck(t, acceptance, "--agents", "3", "--expect", "42", "--expect", "Tokyo", "--result", `calculator:"result":42`)
	if code != 0 || strings.Contains(out, "FAIL") || strings.Count(out, "PASS") != 9 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"calculator", "attempts=1", "12D3KooW…AAAAAA", "different agents"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, tc := range []struct {
		in   string
		argv []string
		want string
	}{
		{acceptance, []string{"--agents", "4"}, "FAIL  the subtasks ran on 3 different agents (want at least 4)"},
		{acceptance, []string{"--expect", "Paris"}, `FAIL  the answer mentions "Paris"`},
		{acceptance, []string{"--result", `calculator:"result":43`}, `FAIL  the calculator result holds "result":43`},
		{acceptance, []string{"--result", `weather:Tokyo`}, `FAIL  the weather result holds Tokyo`},
		{acceptance, []string{"--result", `file_reader:x`}, `FAIL  the file_reader result holds x`},
		{strings.Replace(acceptance, `"status":"ok"`, `"status":"failed"`, 1), nil, `FAIL  subtask s2 (weather) ended "failed"`},
		{strings.Replace(acceptance, `"result","status":"completed"`, `"result","status":"partial"`, 1), nil, `FAIL  the request ended with status "partial"`},
		{strings.Replace(acceptance, `"agent":"`+peerA+`","status"`, `"agent":null,"status"`, 1), nil, "FAIL  subtask s1 (calculator)"},
		{`{"type":"event"}`, nil, `FAIL  no {"type":"result"} line among 1 lines`},
		{"progress: planning\n" + acceptance, nil, "FAIL  line 1 is not a JSON object"},
		{`{"status":"ok"}`, nil, `FAIL  line 1 has no "type"`},
		{`{"type":"result","subtasks":{}}`, nil, "FAIL  line 1: the result does not decode"},
		{`{"type":"result","status":"ok","subtasks":[]}`, nil, "FAIL  the request has 0 subtasks"},
		{strings.Repeat("x", maxLine+1), nil, "longer than"},
	} {
		code, out := runCheck(t, tc.in, tc.argv...)
		if code != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("%v on %.60q: exit %d, want 1 and %q:\n%s", tc.argv, tc.in, code, tc.want, out)
		}
	}
}

func TestFailover(t *testing.T) {
	argv := []string{"--skill", "database_query", "--killed", peerA, "--survivor", peerB}
	if code, out := runCheck(t, failover("completed", "2", peerB), argv...); code != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, tc := range []struct{ in, want string }{
		{failover("completed", "1", peerB), "FAIL  the database_query subtask took 1 attempts"},
		{failover("completed", "2", peerA), "FAIL  the database_query subtask finished on the surviving agent"},
		{failover("failed", "2", peerB), `FAIL  the database_query subtask completed (status "failed")`},
		{strings.Replace(failover("completed", "2", peerB), `"tried":["`+peerA+`",`, `"tried":[`, 1), "FAIL  the stopped agent"},
		{strings.ReplaceAll(failover("completed", "2", peerB), "database_query", "web_search"), "FAIL  a subtask calls database_query"},
	} {
		if code, out := runCheck(t, tc.in, argv...); code != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("exit %d, want 1 and %q:\n%s", code, tc.want, out)
		}
	}
	for _, bad := range [][]string{{"--skill", "x"}, {"--killed", peerA, "--survivor", peerB}, {"extra"}, {"--agents", "x"}, {"--result", "calculator"}, {"--result", ":x"}} {
		if code, _ := runCheck(t, acceptance, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

// FuzzCheck feeds arbitrary output to the reader and the checks: they
// never panic, and an input without a result line never passes.
func FuzzCheck(f *testing.F) {
	f.Add(acceptance)
	f.Add(failover("completed", "2", peerB))
	f.Add(`{"type":"result","status":"ok","subtasks":[{"agent":{"id":"x"},"tried":[1,{"peer_id":"y"}]}],"answer":"\u00e9"}`)
	f.Fuzz(func(t *testing.T, in string) {
		var out, errb bytes.Buffer
		code := run([]string{"--agents", "1", "--skill", "s", "--killed", "a", "--survivor", "b"}, strings.NewReader(in), &out, &errb)
		if code == 0 {
			if !strings.Contains(in, "result") {
				t.Fatalf("passed without a result line: %q", in)
			}
			if strings.Contains(out.String(), "FAIL") {
				t.Fatalf("exit 0 with a FAIL line:\n%s", out.String())
			}
		}
	})
}
