package node

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/node/orchestrate"
	"github.com/mcpv2/mcpv2/protocol"
)

// TestOrchestrateGrantsBeforeFinds: an orchestration's subtask whose skill
// the caller may not run is refused -32009 before any find (an audit line
// "orchestrate assign", none "orchestrate find"), and the finds of the
// subtasks it may run count against its find budget: past 2 per second
// (and a short wait) they are refused -32005, at once.
func TestOrchestrateGrantsBeforeFinds(t *testing.T) {
	o := newTestNode(t, func(c *Config) {
		pol := filepath.Join(t.TempDir(), "policy.json")
		if err := os.WriteFile(pol, []byte(`{"grants": {"http": ["orchestrate"]}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		c.PolicyFile = pol
		c.Mesh = &MeshConfig{NoMDNS: true, NoNAT: true} // orchestrate runs on a mesh node
	})
	anon := Caller{ID: "ip:10.0.0.7", Via: "http", Kind: protocol.CallerAnonymous}
	run := func(plan orchestrate.Plan) orchestrate.Result {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"request": "many things", "plan": plan})
		msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"orchestrate","arguments":` + string(args) + `}}`
		out, refused := o.Handle(ctxT(t), anon, []byte(msg))
		if refused != nil {
			t.Fatalf("refused: %v", refused)
		}
		var r protocol.Response
		var res orchestrate.Result
		if err := json.Unmarshal(out, &r); err != nil || r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
			t.Fatalf("orchestrate answered %s", out)
		}
		return res
	}
	countAudit := func(method string, code int) (n int) {
		for _, l := range readAudit(t, o) {
			c, _ := l["code"].(float64)
			if l["method"] == method && int(c) == code {
				n++
			}
		}
		return n
	}

	var plan orchestrate.Plan
	for i := range orchestrate.MaxSubtasks {
		plan.Subtasks = append(plan.Subtasks, orchestrate.Subtask{ID: fmt.Sprint("s", i), Text: "x", Skill: fmt.Sprint("upload_file_", i),
			Tags: []string{fmt.Sprint("t", i, "a"), fmt.Sprint("t", i, "b")}})
	}
	start := time.Now()
	res := run(plan)
	for _, st := range res.Subtasks {
		if st.Status != orchestrate.StateFailed || st.Code != protocol.CodeNotPermitted || !strings.Contains(st.Error, "-32009") {
			t.Fatalf("subtask %s: %+v, want refused -32009", st.ID, st)
		}
	}
	if n := countAudit("orchestrate assign", protocol.CodeNotPermitted); n != orchestrate.MaxSubtasks {
		t.Fatalf("%d audit lines of refused subtasks, want %d", n, orchestrate.MaxSubtasks)
	}
	if n := countAudit("orchestrate find", 0) + countAudit("orchestrate find", protocol.CodeInternal); n != 0 {
		t.Fatalf("%d finds for skills the caller may not run", n)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the refusals took %v", d)
	}

	// ping is open: one subtask of it with 8 tags makes 9 finds at once.
	tags := []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"}
	start = time.Now()
	// ping is found on the node itself: the subtask may run with the finds
	// it made; the refused ones are in the audit log.
	run(orchestrate.Plan{Subtasks: []orchestrate.Subtask{{ID: "p", Text: "ping", Skill: "ping", Tags: tags}}})
	took := time.Since(start)
	refused := countAudit("orchestrate find", protocol.CodeRateLimited)
	made := len(tags) + 1 - refused
	if refused == 0 || float64(made) > 2+2*took.Seconds()+1 {
		t.Fatalf("%d finds made and %d refused in %v: want at most 2 per second (plus a burst of 2)", made, refused, took)
	}
	var budget string
	for _, l := range readAudit(t, o) {
		if c, _ := l["code"].(float64); l["method"] == "orchestrate find" && int(c) == protocol.CodeRateLimited && l["caller"] == anon.ID {
			budget, _ = l["skill"].(string)
		}
	}
	if budget == "" || !slices.Contains(append(tags, "ping"), budget) {
		t.Fatalf("no audit line names a refused find of the run's keys (%q)", budget)
	}
	if took > maxFindWait+3*time.Second {
		t.Fatalf("the finds took %v: a refused find must not hang", took)
	}
}
