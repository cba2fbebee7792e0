//go:build linux

package natlab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/otlptest"
	"github.com/mcpv2/mcpv2/protocol"
)

// TestNATLabTrace is acceptance 4 of issue 22: a client sends a call with a
// traceparent header to the HTTP gateway of public node A (the lab's
// relay, on the "internet"), which forwards it to B behind
// endpoint-independent NAT. The same trace id is in A's and B's audit lines
// (mcpv2 audit --trace on each node), and both nodes, started with
// --otlp-endpoint, export their spans to an OTLP/gRPC receiver of the test
// that listens inside the lab: B's span is the child of A's, A's of the
// client's.
func TestNATLabTrace(t *testing.T) {
	ipBin, nftBin := natlabTools(t)
	natlabRemoveStale(t, ipBin)
	dir := t.TempDir()
	skills := filepath.Join(dir, "skills.json")
	if err := os.WriteFile(skills, []byte(natlabSkills), 0o600); err != nil {
		t.Fatal(err)
	}
	lab := newNATLab(t, ipBin, nftBin, "t", false)
	rcv := otlptest.Serve(natlabListenIn(t, lab.ns["relay"], natlabRelayIP+":4317"))
	t.Cleanup(func() { rcv.Close() })
	otlp := []string{"--otlp-endpoint", rcv.Endpoint()}

	a := natlabRelay(t, lab, append([]string{"--port", "8000", "--public-ip", natlabRelayIP, "--secret", natlabSecret}, otlp...)...)
	relayAddr := a.addr(t, natlabRelayIP, "/tcp/")
	b := lab.startNode("peerB", "B", t.TempDir(), append(natlabBArgs(relayAddr, skills), otlp...)...)

	// The caller sits behind natA: A's edge sees it from natA's public
	// address, for which its session is minted.
	tok, _ := protocol.MintToken([]byte(natlabSecret), natlabAWan, time.Now(), 5*time.Minute)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chess","arguments":{"move":"e4"}}}`
	gateway := func(hdr ...string) natRun {
		args := []string{"-sS", "--max-time", "20", "-H", "X-MCPV2-Session: " + tok, "-H", "Content-Type: application/json"}
		for _, h := range hdr {
			args = append(args, "-H", h)
		}
		return lab.exec("peerA", 30*time.Second, "curl", append(args, "--data-binary", body, fmt.Sprintf("http://%s:8000/mcpv2/peers/%s", natlabRelayIP, b.peerID))...)
	}
	answered := func(r natRun) bool {
		var resp struct {
			Result json.RawMessage `json:"result"`
		}
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &resp) == nil && string(resp.Result) == natlabAnswer
	}
	// Until B has its connection to A, the gateway cannot reach it: wait
	// for an untraced call to go through.
	deadline := time.Now().Add(60 * time.Second)
	for r := gateway(); !answered(r); r = gateway() {
		if time.Now().After(deadline) {
			t.Fatalf("A's gateway does not reach B within 60 s: %s\nA's log:\n%s\nB's log:\n%s", r, a.logTail(20), b.logTail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}

	const traceID, clientSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	if r := gateway("traceparent: 00-" + traceID + "-" + clientSpan + "-01"); !answered(r) {
		t.Fatalf("traced gateway call: %s", r)
	}
	aLine := natlabTraceLine(t, lab, a, traceID)
	bLine := natlabTraceLine(t, lab, b, traceID)
	if !strings.HasPrefix(aLine.Method, "http POST /mcpv2/peers/") || bLine.Skill != "chess" || bLine.Caller != a.peerID {
		t.Fatalf("audit lines of trace %s: A %+v, B %+v (want the gateway's on A and chess from A on B)", traceID, aLine, bLine)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spans, err := rcv.Wait(ctx, func(ss []otlptest.Span) bool {
		n := 0
		for _, s := range ss {
			if s.TraceID == traceID && (s.SpanID == aLine.Span || s.SpanID == bLine.Span) {
				n++
			}
		}
		return n == 2
	})
	if err != nil {
		t.Fatalf("the receiver did not get A's span %s and B's span %s of trace %s: %v; spans: %+v", aLine.Span, bLine.Span, traceID, err, spans)
	}
	var aSpan, bSpan otlptest.Span
	for _, s := range spans {
		switch {
		case s.TraceID != traceID:
		case s.SpanID == aLine.Span:
			aSpan = s
		case s.SpanID == bLine.Span:
			bSpan = s
		}
	}
	if aSpan.ParentSpanID != clientSpan || aSpan.Attributes["mcpv2.face"] != "gateway" {
		t.Errorf("A's span %+v: want the child of the client's %s, face gateway", aSpan, clientSpan)
	}
	if bSpan.ParentSpanID != aSpan.SpanID || bSpan.Name != "chess" || bSpan.Attributes["mcpv2.outcome"] != "ok" {
		t.Errorf("B's span %+v: want chess, ok, the child of A's %s", bSpan, aSpan.SpanID)
	}
	t.Logf("trace %s: client %s → A (public gateway) span %s → B (behind NAT) span %s", traceID, clientSpan, aSpan.SpanID, bSpan.SpanID)
}

// natTraceLine is what TestNATLabTrace reads of an audit line.
type natTraceLine struct {
	Caller, Method, Skill, Trace, Span string
}

// natlabTraceLine runs `mcpv2 audit --trace ID --json` on p's data dir and
// returns its one line.
func natlabTraceLine(t *testing.T, lab *natLab, p *natProc, traceID string) natTraceLine {
	t.Helper()
	r := lab.run("relay", 30*time.Second, "audit", "--data-dir", p.dataDir, "--trace", traceID, "--json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var l natTraceLine
	if r.code != 0 || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &l) != nil || l.Trace != traceID || len(l.Span) != 16 {
		t.Fatalf("%s: mcpv2 audit --trace %s: want one line of the trace: %s", p.name, traceID, r)
	}
	return l
}
