package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// filesDir is the committed sandbox of the example.
var filesDir = filepath.Join("..", "files")

// call runs one tool through run with args on stdin and the environment
// env, and returns its exit status, stdout and stderr.
func call(t *testing.T, env map[string]string, argv []string, args string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(argv, strings.NewReader(args), &out, &errb, func(k string) string { return env[k] })
	if code == 0 {
		if errb.Len() != 0 {
			t.Errorf("%v %s: exit 0 with stderr %q", argv, args, errb.String())
		}
		if !json.Valid(out.Bytes()) || !strings.HasPrefix(out.String(), "{") || !strings.HasSuffix(out.String(), "}\n") {
			t.Errorf("%v %s: stdout is not one JSON object and a newline: %q", argv, args, out.String())
		}
	} else {
		if out.Len() != 0 {
			t.Errorf("%v %s: exit %d with stdout %q", argv, args, code, out.String())
		}
		if s := errb.String(); strings.Count(s, "\n") != 1 && !strings.HasPrefix(s, "usage:") {
			t.Errorf("%v %s: stderr is not one line: %q", argv, args, s)
		}
	}
	return code, out.String(), errb.String()
}

// ok runs a tool that must succeed and decodes its result.
func ok(t *testing.T, cfg map[string]string, tool, args string) map[string]any {
	t.Helper()
	code, out, errs := call(t, cfg, []string{tool}, args)
	if code != 0 {
		t.Fatalf("%s %s: exit %d: %s", tool, args, code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	return m
}

// fails runs a tool that must fail with exit status 1 and a message
// holding want.
func fails(t *testing.T, cfg map[string]string, tool, args, want string) {
	t.Helper()
	code, _, errs := call(t, cfg, []string{tool}, args)
	if code != 1 {
		t.Fatalf("%s %s: exit %d, want 1 (stderr %q)", tool, args, code, errs)
	}
	if !strings.HasPrefix(errs, "demotools "+tool+": ") || !strings.Contains(errs, want) {
		t.Fatalf("%s %s: stderr %q, want it to start with the tool's name and hold %q", tool, args, errs, want)
	}
}

func TestCalculator(t *testing.T) {
	for _, tc := range []struct {
		args string
		want float64
	}{
		{`{"operation":"add","a":2,"b":3}`, 5},
		{`{"operation":"subtract","a":2,"b":3.5}`, -1.5},
		{`{"operation":"multiply","a":7,"b":6}`, 42},
		{`{"operation":"divide","a":1,"b":4}`, 0.25},
		{`{"operation":"power","a":2,"b":10}`, 1024},
		{`{"operation":"sqrt","a":81}`, 9},
		{`{"operation":"modulo","a":17,"b":5}`, 2},
		{`{"operation":" Multiply ","a":-3,"b":3}`, -9},
	} {
		got := ok(t, nil, "calculator", tc.args)
		if got["result"] != tc.want {
			t.Errorf("%s: result %v, want %v", tc.args, got["result"], tc.want)
		}
		var in map[string]any
		_ = json.Unmarshal([]byte(tc.args), &in)
		if got["a"] != in["a"] || got["b"] != in["b"] {
			t.Errorf("%s: echoes a=%v b=%v", tc.args, got["a"], got["b"])
		}
		if got["operation"] != strings.ToLower(strings.TrimSpace(in["operation"].(string))) {
			t.Errorf("%s: operation %v", tc.args, got["operation"])
		}
	}
	if _, hasB := ok(t, nil, "calculator", `{"operation":"sqrt","a":2}`)["b"]; hasB {
		t.Error("sqrt result carries b")
	}
	for _, tc := range []struct{ args, want string }{
		{`{"operation":"divide","a":1,"b":0}`, "division by zero"},
		{`{"operation":"modulo","a":1,"b":0}`, "modulo by zero"},
		{`{"operation":"sqrt","a":-4}`, "sqrt of a negative number"},
		{`{"operation":"sqrt","a":4,"b":1}`, `drop "b"`},
		{`{"operation":"power","a":10,"b":400}`, "overflows"},
		{`{"operation":"power","a":-8,"b":0.5}`, "not a real number"},
		{`{"operation":"multiply","a":1e308,"b":10}`, "overflows"},
		{`{"operation":"multiply","a":7}`, `missing "b"`},
		{`{"operation":"multiply","b":7}`, `missing "a"`},
		{`{"a":1,"b":2}`, "missing operation"},
		{`{"operation":"times","a":1,"b":2}`, `unknown operation "times"`},
		{`{"operation":"add","a":"7","b":6}`, `field "a": got a JSON string, want a number`},
		{`{"operation":"add","a":1,"b":2,"c":3}`, `unknown field "c"`},
		{`[1,2]`, "want a JSON object"},
		{`{"operation":"add","a":1,"b":2}{}`, "trailing data"},
		{`{"operation":`, "bad arguments"},
	} {
		fails(t, nil, "calculator", tc.args, tc.want)
	}
}

func TestWeather(t *testing.T) {
	for in, want := range map[string]string{
		"Tokyo": "Tokyo", "tokyo?": "Tokyo", "  TOKYO  ": "Tokyo", "Tokyo, Japan": "Tokyo",
		"SF": "San Francisco", "san   Francisco": "San Francisco",
		"NYC": "New York", "new york city": "New York", "London": "London", "the sydney": "Sydney",
	} {
		b, _ := json.Marshal(map[string]string{"city": in})
		got := ok(t, nil, "weather", string(b))
		if got["city"] != want {
			t.Errorf("%q: city %v, want %q", in, got["city"], want)
		}
		for _, k := range []string{"temperature_c", "humidity"} {
			if _, isNum := got[k].(float64); !isNum {
				t.Errorf("%q: %s = %v, want a number", in, k, got[k])
			}
		}
		if c, _ := got["conditions"].(string); c == "" {
			t.Errorf("%q: no conditions", in)
		}
	}
	fails(t, nil, "weather", `{"city":"Paris"}`, "San Francisco, New York, London, Tokyo, Sydney")
	fails(t, nil, "weather", `{"city":"  "}`, `missing "city"`)
	fails(t, nil, "weather", `{}`, `missing "city"`)
	fails(t, nil, "weather", `{"city":3}`, `field "city": got a JSON number, want a string`)
}

func TestDatabaseQuery(t *testing.T) {
	count := func(args string) int {
		t.Helper()
		got := ok(t, nil, "database_query", args)
		if args := got["action"]; args == "count" {
			if _, has := got["rows"]; has {
				t.Errorf("count carries rows")
			}
		}
		return int(got["count"].(float64))
	}
	for args, want := range map[string]int{
		// The acceptance question: Staff, two Senior and one plain
		// Engineer; the Engineering Manager is not one.
		`{"action":"count","department":"Platform","role":"engineer"}`:        4,
		`{"action":"count","department":"platform","role":"Engineers"}`:       4,
		`{"action":"count","department":"Platform","role":"senior engineer"}`: 2,
		`{"action":"count","role":"engineer"}`:                                8,
		`{"action":"count","role":"manager"}`:                                 5,
		`{"action":"count","department":"Design"}`:                            4,
		`{"action":"count"}`:                     20,
		`{"action":"count","min_salary":170000}`: 6,
		`{"action":"count","department":"Data","role":"engineer","min_salary":160000}`: 1,
		`{"action":"count","role":"astronaut"}`:                                        0,
		`{"action":"count","max_salary":112000}`:                                       3,
		`{"action":"count","min_salary":140000,"max_salary":150000}`:                   4,
		// where, as the keyword planner passes it: a salary threshold in words.
		`{"action":"filter","where":"salary over 150k"}`:                    10,
		`{"action":"filter","where":"salary above $200,000"}`:               1,
		`{"action":"filter","where":"earning less than 120000"}`:            4,
		`{"action":"filter","where":"salary at most 104000"}`:               2,
		`{"action":"count","where":"salary over 150k","min_salary":200000}`: 1,
		`{"action":"count","role":"engineer","where":"under 145k"}`:         2,
		// The seed's names: query_type, filter_field and filter_value.
		`{"query_type":"filter","filter_field":"department","filter_value":"Platform"}`:    6,
		`{"query_type":"count","filter_field":"role","filter_value":"engineer"}`:           8,
		`{"query_type":"count","filter_field":"title","filter_value":"engineer"}`:          8,
		`{"query_type":"count","filter_field":"min_salary","filter_value":170000}`:         6,
		`{"query_type":"count","filter_field":"max_salary","filter_value":"112000"}`:       3,
		`{"query_type":"filter","filter_field":"where","filter_value":"salary over 150k"}`: 10,
		`{"query_type":"list"}`: 20,
		`{"action":"count","query_type":"COUNT","department":"Platform","filter_field":"role","filter_value":"engineer"}`: 4,
		`{"action":"count","department":"Platform","filter_field":"department","filter_value":"platform"}`:                6,
	} {
		if got := count(args); got != want {
			t.Errorf("%s: count %d, want %d", args, got, want)
		}
	}
	got := ok(t, nil, "database_query", `{"action":"filter","department":"Sales","role":"engineer"}`)
	rows, _ := got["rows"].([]any)
	if got["count"] != 1.0 || len(rows) != 1 || rows[0].(map[string]any)["name"] != "Rosa Jimenez" {
		t.Errorf("filter Sales engineers: %v", got)
	}
	if row := rows[0].(map[string]any); row["department"] != "Sales" || row["title"] != "Sales Engineer" || row["salary"] != 137000.0 {
		t.Errorf("row %v", row)
	}
	if rows, _ := ok(t, nil, "database_query", `{"action":"list"}`)["rows"].([]any); len(rows) != 20 {
		t.Errorf("list: %d rows, want 20", len(rows))
	}
	if rows, has := ok(t, nil, "database_query", `{"action":"list","role":"astronaut"}`)["rows"]; has {
		t.Errorf("list with no match: rows %v, want none", rows)
	}
	fails(t, nil, "database_query", `{"action":"filter"}`, "at least one of")
	fails(t, nil, "database_query", `{"action":"count","department":"Marketing"}`, "known: Platform, Data, Design, Sales")
	fails(t, nil, "database_query", `{"action":"delete"}`, `unknown action "delete"`)
	fails(t, nil, "database_query", `{}`, `missing "action"`)
	fails(t, nil, "database_query", `{"action":"count","min_salary":-1}`, "negative")
	fails(t, nil, "database_query", `{"action":"count","max_salary":-1}`, "negative")
	fails(t, nil, "database_query", `{"action":"filter","where":"they like cats"}`, "only a salary threshold is understood")
	fails(t, nil, "database_query", `{"action":"filter","where":"`+strings.Repeat("1", 201)+`"}`, "longer than 200")
	fails(t, nil, "database_query", `{"action":"count","role":"--"}`, "no words")
	fails(t, nil, "database_query", `{"action":"count","salary":1}`, `unknown field "salary"`)
	fails(t, nil, "database_query", `{"action":"list","query_type":"count"}`, `"action" "list" and "query_type" "count" disagree`)
	fails(t, nil, "database_query", `{"query_type":"count","department":"Data","filter_field":"department","filter_value":"Sales"}`, "disagree")
	fails(t, nil, "database_query", `{"query_type":"count","min_salary":1,"filter_field":"min_salary","filter_value":2}`, "disagree")
	fails(t, nil, "database_query", `{"query_type":"count","filter_field":"salary","filter_value":"1"}`, `unknown filter_field "salary"`)
	fails(t, nil, "database_query", `{"query_type":"count","filter_field":"department"}`, `without "filter_value"`)
	fails(t, nil, "database_query", `{"query_type":"count","filter_value":"Data"}`, `without "filter_field"`)
	fails(t, nil, "database_query", `{"query_type":"count","filter_field":"department","filter_value":3}`, "want a string")
	fails(t, nil, "database_query", `{"query_type":"count","filter_field":"min_salary","filter_value":"lots"}`, "not a number")
	fails(t, nil, "database_query", `{"query_type":"count","filter_field":"department","filter_value":"Marketing"}`, "known: Platform")
}

func TestWebSearch(t *testing.T) {
	got := ok(t, nil, "web_search", `{"query":"How does NAT hole punching work?"}`)
	res, _ := got["results"].([]any)
	if len(res) == 0 {
		t.Fatalf("no results: %v", got)
	}
	top := res[0].(map[string]any)
	if top["url"] != "https://example.org/hole-punching" || top["title"] == "" || top["snippet"] == "" {
		t.Errorf("top result %v", top)
	}
	last := 1 << 30
	for _, r := range res {
		s := int(r.(map[string]any)["score"].(float64))
		if s <= 0 || s > last {
			t.Errorf("scores not positive and descending: %v", res)
		}
		last = s
	}
	if got["query"] != "How does NAT hole punching work?" {
		t.Errorf("query echoed as %v", got["query"])
	}
	if res := ok(t, nil, "web_search", `{"query":"the weather","limit":1}`)["results"].([]any); len(res) != 1 {
		t.Errorf("limit 1: %d results", len(res))
	}
	if res := ok(t, nil, "web_search", `{"query":"agent","num_results":1}`)["results"].([]any); len(res) != 1 {
		t.Errorf("num_results 1 (the seed's name of limit): %d results", len(res))
	}
	if res := ok(t, nil, "web_search", `{"query":"agent","num_results":1,"limit":1}`)["results"].([]any); len(res) != 1 {
		t.Errorf("num_results and limit 1: %d results", len(res))
	}
	fails(t, nil, "web_search", `{"query":"agent","num_results":1,"limit":2}`, `"limit" 2 and "num_results" 1 disagree`)
	fails(t, nil, "web_search", `{"query":"agent","num_results":11}`, "out of range")
	if res := ok(t, nil, "web_search", `{"query":"agent"}`)["results"].([]any); len(res) < 2 {
		t.Errorf("agent: %d results, want the MCP and orchestration documents", len(res))
	}
	if res := ok(t, nil, "web_search", `{"query":"xylophone"}`)["results"].([]any); len(res) != 0 {
		t.Errorf("xylophone: %v, want no results", res)
	}
	fails(t, nil, "web_search", `{"query":"the of and"}`, "no words")
	fails(t, nil, "web_search", `{}`, "no words")
	fails(t, nil, "web_search", `{"query":"go","limit":0}`, "out of range")
	fails(t, nil, "web_search", `{"query":"go","limit":11}`, "out of range")
	fails(t, nil, "web_search", `{"query":"go","limit":2.5}`, "want an integer")
	fails(t, nil, "web_search", `{"query":"`+strings.Repeat("x", maxQueryLen+1)+`"}`, "longer than")
}

func TestFileReader(t *testing.T) {
	env := map[string]string{envFiles: filesDir}
	got := ok(t, env, "file_reader", `{"path":"handbook.txt"}`)
	lines, _ := got["lines"].([]any)
	want, err := os.ReadFile(filepath.Join(filesDir, "handbook.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if wl := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n"); len(lines) != len(wl) || lines[0] != wl[0] || got["truncated"] != false {
		t.Errorf("handbook.txt: %d lines (truncated %v), want %d starting %q", len(lines), got["truncated"], len(wl), wl[0])
	}
	got = ok(t, env, "file_reader", `{"path":"./release-notes.txt","max_lines":2}`)
	if lines, _ := got["lines"].([]any); len(lines) != 2 || got["truncated"] != true || got["path"] != "release-notes.txt" {
		t.Errorf("max_lines 2: %v", got)
	}

	// The --root flag wins over the environment.
	code, out, errs := call(t, map[string]string{envFiles: t.TempDir()}, []string{"file_reader", "--root", filesDir}, `{"path":"handbook.txt","max_lines":1}`)
	if code != 0 || !strings.Contains(out, "Team handbook") {
		t.Errorf("--root: exit %d, %s%s", code, out, errs)
	}

	// A sandbox with ways out.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	box := t.TempDir()
	if err := os.WriteFile(filepath.Join(box, "ok.txt"), []byte("a\r\nb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(box, "long.txt"), bytes.Repeat([]byte("x"), maxLineLen+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"abs-link":  filepath.Join(outside, "secret.txt"),
		"rel-link":  filepath.Join("..", filepath.Base(outside), "secret.txt"),
		"dir-link":  outside,
		"same-link": "ok.txt", // inside: allowed
	} {
		if err := os.Symlink(target, filepath.Join(box, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(box, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{envFiles: box}
	if got := ok(t, env, "file_reader", `{"path":"same-link"}`); !reflect.DeepEqual(got["lines"], []any{"a", "b"}) {
		t.Errorf("link inside the sandbox: %v", got)
	}
	for _, tc := range []struct{ args, want string }{
		{`{"path":"abs-link"}`, "leads out of the files directory"},
		{`{"path":"rel-link"}`, "leads out of the files directory"},
		{`{"path":"dir-link/secret.txt"}`, "leads out of the files directory"},
		{`{"path":"../` + filepath.Base(outside) + `/secret.txt"}`, `contains ".."`},
		{`{"path":"sub/../ok.txt"}`, `contains ".."`},
		{`{"path":"sub\\..\\..\\x"}`, `contains ".."`},
		{`{"path":"` + filepath.Join(outside, "secret.txt") + `"}`, "is absolute"},
		{`{"path":"/etc/passwd"}`, "is absolute"},
		{`{"path":"ok\u0000.txt"}`, "NUL"},
		{`{"path":""}`, `missing "path"`},
		{`{"path":"missing.txt"}`, "no such file"},
		{`{"path":"sub"}`, "not a regular file"},
		{`{"path":"long.txt"}`, "longer than"},
		{`{"path":"ok.txt","max_lines":0}`, "out of range"},
		{`{"path":"ok.txt","max_lines":1001}`, "out of range"},
		{`{"path":"` + strings.Repeat("a", maxPathLen+1) + `"}`, "longer than"},
	} {
		fails(t, env, "file_reader", tc.args, tc.want)
	}
	// No error message shows where the sandbox is.
	for _, p := range []string{"missing.txt", "abs-link", "sub"} {
		_, _, errs := call(t, env, []string{"file_reader"}, `{"path":"`+p+`"}`)
		if strings.Contains(errs, box) || strings.Contains(errs, outside) {
			t.Errorf("%s: message shows a host path: %q", p, errs)
		}
	}
	fails(t, nil, "file_reader", `{"path":"ok.txt"}`, "set "+envFiles)
	fails(t, map[string]string{envFiles: filepath.Join(box, "nope")}, "file_reader", `{"path":"ok.txt"}`, "cannot be opened")
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		env  map[string]string
		code int
		want string
	}{
		{nil, nil, 2, "usage:"},
		{[]string{"stocks"}, nil, 2, `unknown tool "stocks" (known: calculator, database_query, file_reader, weather, web_search)`},
		{[]string{"weather", "Tokyo"}, nil, 2, "JSON on stdin"},
		{[]string{"weather", "--city", "Tokyo"}, nil, 2, "flag provided but not defined"},
		{[]string{"weather"}, map[string]string{envSleep: "soon"}, 2, envSleep},
		{[]string{"weather"}, map[string]string{envSleep: "-1"}, 2, envSleep},
		{[]string{"weather"}, map[string]string{envSleep: "60001"}, 2, envSleep},
	} {
		code, _, errs := call(t, tc.env, tc.argv, `{"city":"Tokyo"}`)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.argv, code, errs, tc.code, tc.want)
		}
	}

	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, strings.NewReader(""), &out, &errb, os.Getenv); code != 0 || !strings.HasPrefix(out.String(), "usage:") || errb.Len() != 0 {
		t.Errorf("--help: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}

	// No arguments at all, or null, are {}: weather then says what is missing.
	for _, in := range []string{"", " null "} {
		fails(t, nil, "weather", in, `missing "city"`)
	}
	// The input cap.
	fails(t, nil, "web_search", `{"query":"`+strings.Repeat("x", maxInput)+`"}`, "larger than")

	// DEMOTOOLS_SLEEP_MS delays the answer.
	start := time.Now()
	code, _, errs := call(t, map[string]string{envSleep: "150"}, []string{"weather"}, `{"city":"Tokyo"}`)
	if d := time.Since(start); code != 0 || d < 150*time.Millisecond {
		t.Errorf("sleep 150 ms: exit %d after %v (%s)", code, d, errs)
	}
}
