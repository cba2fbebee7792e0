package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestKnownAgentsInBackground: the agents of --agents are registered
// while the node runs, not before it is ready: a node whose one agent
// never answers logs "ready" first, and the registry's own
// --agents-timeout then cuts that agent's card read, which is logged and
// leaves the agent out. No more than --max-agents are tried (review item
// 8; simplify24 item 7).
func TestKnownAgentsInBackground(t *testing.T) {
	t.Parallel()
	cut := make(chan struct{})
	var once sync.Once
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers: the node's timeout ends the request
		once.Do(func() { close(cut) })
	}))
	t.Cleanup(slow.Close)
	var asked atomic.Int32
	over := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(over.Close)

	p := startNode(t, "", "--no-mdns", "--no-nat", "--outbound-allow", "127.0.0.1",
		"--agents", slow.URL+","+over.URL, "--max-agents", "1", "--agents-timeout", "1s")
	select {
	case <-cut:
	case <-time.After(60 * time.Second):
		t.Fatal("the slow agent's card read was not cut by --agents-timeout")
	}
	const left = "--agents: not registered"
	var log string
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if log = p.Log.String(); strings.Contains(log, left) || time.Now().After(end) {
			break
		}
	}
	ready, gone := strings.Index(log, "msg=ready"), strings.Index(log, left)
	if ready < 0 || gone < 0 || gone < ready {
		t.Fatalf("want the node ready before the slow agent is given up (ready at %d, %q at %d):\n%s", ready, left, gone, log)
	}
	line := log[gone:]
	line = line[:strings.IndexByte(line+"\n", '\n')]
	if !strings.Contains(line, slow.URL) || !strings.Contains(line, "deadline exceeded") {
		t.Errorf("the slow agent's line names neither it nor its timeout: %s", line)
	}
	if !strings.Contains(log, "left_out=1") || asked.Load() != 0 {
		t.Errorf("the agent past --max-agents 1 was asked %d times, or its leaving out not logged:\n%s", asked.Load(), log)
	}
}
