package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/mcpv2/mcpv2/edge/rest"
	"github.com/mcpv2/mcpv2/internal/testenv"
)

// seedCurls reads the curls of the seed's API reference
// (testdata/seed_api_reference.txt), each with its continuation lines
// joined.
func seedCurls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seed_api_reference.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "curl ") {
			continue
		}
		cmd := l
		for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, `\`) + " " + strings.TrimSpace(lines[i])
		}
		out = append(out, cmd)
	}
	return out
}

var (
	curlURL    = regexp.MustCompile(`http://localhost:8008(\S*)`)
	curlMethod = regexp.MustCompile(`-X (\w+)`)
)

// TestRESTSeedCurls is acceptance 1 of issue 23: every curl of the seed's
// API reference, run as written with the real curl (only localhost:8008
// replaced by the edge's address, and {task_id} by the task the submit
// curl made), against examples/orchestrate's front agent (the seed's five
// tools, its two resources, a policy that grants the demo to anonymous
// callers) in a mesh with a bootstrap node; each answer checked against
// the REST face's OpenAPI document. curl reads a .curlrc of the test's
// (CURL_HOME) that adds --silent --show-error and a last line with the
// HTTP status: the command lines stay as the seed wrote them.
func TestRESTSeedCurls(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		testenv.SkipEnv(t, "curl is not installed: apt-get install curl")
	}
	curls := seedCurls(t)
	if len(curls) != 22 {
		t.Fatalf("%d curls in the seed's API reference, want 22", len(curls))
	}
	ex, err := filepath.Abs(filepath.Join("..", "..", "examples", "orchestrate"))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "demotools"), "../../examples/orchestrate/demotools").CombinedOutput(); err != nil {
		t.Fatalf("build demotools: %v\n%s", err, out)
	}
	boot := startNode(t, "", "--no-mdns", "--no-nat", "--name", "boot")
	port := edgeFreePort(t, "127.0.0.1")
	dir := t.TempDir()
	testenv.StartProc(t, "env", "PATH="+bin+":"+os.Getenv("PATH"), "DEMOTOOLS_FILES="+filepath.Join(ex, "files"), "DEMOTOOLS_SLEEP_MS=1500",
		binPath, "node", "--data-dir", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns", "--no-nat", "--name", "front", "--a2a-text", "orchestrate",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1", "--bootstrap", boot.tcpAddr(t),
		"--skills", filepath.Join(ex, "agents", "front.json"), "--policy", filepath.Join(ex, "front-policy.json"),
		"--resources", filepath.Join(ex, "resources.json"))
	base := "127.0.0.1:" + strconv.Itoa(port)

	curlHome := t.TempDir()
	if err := os.WriteFile(filepath.Join(curlHome, ".curlrc"), []byte("silent\nshow-error\nmax-time = 60\nwrite-out = \"\\n%{http_code}\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(rest.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)

	taskID := ""
	for _, c := range curls {
		cmdline := strings.ReplaceAll(c, "localhost:8008", base)
		if strings.Contains(cmdline, "{task_id}") {
			if taskID == "" {
				t.Errorf("%s: no task was made by the submit curl before it", c)
				continue
			}
			id := taskID
			if strings.HasSuffix(c, "/cancel") {
				// A task still running, so that the cancel has something
				// to cancel: database_query sleeps DEMOTOOLS_SLEEP_MS.
				id = submitTask(t, base, "how many engineers are in Platform")
			}
			cmdline = strings.ReplaceAll(cmdline, "{task_id}", id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-c", cmdline)
		cmd.Env = append(testenv.CleanEnv(), "CURL_HOME="+curlHome, "PATH="+filepath.Dir(curl)+":/usr/bin:/bin")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		out := stdout.String()
		cut := strings.LastIndex(out, "\n")
		if err != nil || cut < 0 {
			t.Errorf("%s: %v %s", c, err, stderr.String())
			continue
		}
		body, status := []byte(out[:cut]), out[cut+1:]
		code, _ := strconv.Atoi(status)
		u := curlURL.FindStringSubmatch(c)[1]
		method := http.MethodGet
		if m := curlMethod.FindStringSubmatch(c); m != nil {
			method = m[1]
		}
		t.Logf("%s %s → %d", method, u, code)
		if u == "/.well-known/agent.json" { // the A2A face's card: not the REST face's document
			var card struct {
				Name string `json:"name"`
				URL  string `json:"url"`
			}
			if code != 200 || json.Unmarshal(body, &card) != nil || card.Name != "front" {
				t.Errorf("%s: %d %.300s", c, code, body)
			}
			continue
		}
		want := 200
		if u == "/api/v1/a2a/tasks" {
			want = 202
		}
		if code != want {
			t.Errorf("%s: status %d, want %d: %.600s", c, code, want, body)
			continue
		}
		req, _ := http.NewRequest(method, "http://"+base+strings.ReplaceAll(u, "{task_id}", taskID), nil)
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("%s: not a route of the document: %v", c, err)
			continue
		}
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 code, Header: http.Header{"Content-Type": {contentType(u)}},
			Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		in.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			t.Errorf("%s: the answer does not match the OpenAPI document: %v\n%.600s", c, err, body)
			continue
		}
		checkSeedAnswer(t, c, u, body, &taskID)
	}
}

func contentType(path string) string {
	if strings.HasSuffix(path, "/stream") {
		return "text/event-stream"
	}
	return "application/json"
}

// checkSeedAnswer checks what the seed's text says of some answers
// beyond their shape.
func checkSeedAnswer(t *testing.T, c, path string, body []byte, taskID *string) {
	t.Helper()
	var m map[string]any
	if !strings.HasSuffix(path, "/stream") {
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("%s: %v", c, err)
			return
		}
	}
	switch {
	case path == "/api/v1/mcp/tools":
		// The front agent's tools: the seed's five with their schemas,
		// beside the node's standard skills.
		tools, _ := m["tools"].([]any)
		if m["total"] != float64(len(tools)) {
			t.Errorf("%s: total %v for %d tools", c, m["total"], len(tools))
		}
		seed := map[string]bool{"calculator": false, "weather": false, "database_query": false, "web_search": false, "file_reader": false}
		for _, tl := range tools {
			tl, _ := tl.(map[string]any)
			name, _ := tl["name"].(string)
			if _, ok := seed[name]; ok {
				schema, _ := tl["inputSchema"].(map[string]any)
				seed[name] = schema["type"] == "object" && schema["properties"] != nil
			}
		}
		for name, ok := range seed {
			if !ok {
				t.Errorf("%s: the seed's tool %s is missing or has no input schema", c, name)
			}
		}
	case strings.HasSuffix(path, "/execute"):
		if m["success"] != true {
			t.Errorf("%s: %s", c, body)
		}
		if strings.Contains(c, `"actor": "demo-user"`) && m["actor"] == "demo-user" {
			t.Errorf("%s: the actor was taken from the body", c)
		}
		if strings.Contains(c, `"multiply"`) {
			if r, _ := m["result"].(map[string]any); r["result"] != 42.0 {
				t.Errorf("%s: 7 times 6 is not 42: %s", c, body)
			}
		}
	case path == "/api/v1/mcp/resources/read":
		if !strings.Contains(string(body), "resource://company_knowledge") {
			t.Errorf("%s: %s", c, body)
		}
	case path == "/api/v1/mcp/compare":
		if m["same_result"] != true {
			t.Errorf("%s: the faces differ: %s", c, body)
		}
	case path == "/api/v1/mcp/security/scan" && strings.Contains(c, "Ignore all previous"):
		if m["is_safe"] != false || m["threat_level"] != "critical" {
			t.Errorf("%s: %s", c, body)
		}
	case strings.HasSuffix(path, "/cancel"):
		if st, _ := m["state"].(string); st != "canceled" {
			t.Errorf("%s: the running task is not canceled: %s", c, body)
		}
	case path == "/api/v1/a2a/tasks":
		*taskID, _ = m["task_id"].(string)
	case path == "/api/v1/a2a/discover":
		// agent-a and agent-b do not resolve here: each URL answered with
		// its error.
		res, _ := m["results"].([]any)
		for _, r := range res {
			if r, _ := r.(map[string]any); r["status"] != "error" || r["error"] == "" {
				t.Errorf("%s: an unresolvable URL is not answered with its error: %s", c, body)
			}
		}
	}
}

// submitTask submits text as an A2A task through the REST face, as the
// seed's submit curl does, and returns its id.
func submitTask(t *testing.T, base, text string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"message": text, "session_id": "a2a-demo"})
	resp, err := http.Post("http://"+base+"/api/v1/a2a/tasks", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		TaskID string `json:"task_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusAccepted || m.TaskID == "" {
		t.Fatalf("submit %q: %d %v", text, resp.StatusCode, err)
	}
	return m.TaskID
}
