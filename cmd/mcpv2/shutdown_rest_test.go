package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestShutdownEndsRESTStream stops a node (SIGTERM) while a REST task
// stream (GET /api/v1/a2a/tasks/{id}/stream) is open on its edge: the
// stream must end when the node stops, not hold the edge's shutdown for
// its grace (runningNode.Close closes the faces before the edge), so the
// node never logs that requests were still running after the grace.
func TestShutdownEndsRESTStream(t *testing.T) {
	t.Parallel()
	// ask's LLM backend answers nothing until the test ends: the task
	// runs, and its stream stays open.
	hold := make(chan struct{})
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(llm.Close)
	t.Cleanup(func() { close(hold) })
	p := startNode(t, "", "--no-mdns", "--no-nat", "--port", "0", "--llm-url", llm.URL, "--llm-model", "m",
		"--policy", testenv.PolicyFile(t, map[string][]string{"http": {"ask"}}))
	base := "http://127.0.0.1:" + p.First("MCPV2_BOUND_PORT")
	resp, err := http.Post(base+"/api/v1/a2a/tasks", "application/json", strings.NewReader(`{"message":"nap a while"}`))
	if err != nil {
		t.Fatal(err)
	}
	var task struct {
		TaskID string `json:"task_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&task)
	resp.Body.Close()
	if err != nil || task.TaskID == "" {
		t.Fatalf("submit: %d %v", resp.StatusCode, err)
	}
	stream, err := http.Get(base + "/api/v1/a2a/tasks/" + task.TaskID + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != 200 {
		t.Fatalf("stream: %d", stream.StatusCode)
	}
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data:") { // the task as it is now
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() { // to the stream's end
	}
	<-p.Exited
	if log := p.Log.String(); strings.Contains(log, "still running after the shutdown grace") {
		t.Errorf("the open REST stream held the edge's shutdown for its grace:\n%s", log)
	}
}
