package a2a_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/edge/a2a"
)

// stateCounts are the face's mcpv2_a2a_tasks_total by state, and the
// running gauge.
func stateCounts(t *testing.T, reg prometheus.Gatherer) (map[string]float64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out, running := map[string]float64{}, -1.0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "mcpv2_a2a_tasks_total":
			for _, m := range mf.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		case "mcpv2_a2a_tasks_running":
			running = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return out, running
}

// TestMetricsTaskStates: each task entering a state is counted once; the
// running gauge sees a task that runs; Close takes the collectors off.
func TestMetricsTaskStates(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRigOpts(t, nil, nil, a2a.WithMetrics(reg))
	tok := r.token()
	if _, e := r.rpc(t, tok, "1.0", "SendMessage", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "ping", "arguments": map[string]any{}}})}); e != nil {
		t.Fatalf("send: %+v", e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := r.stream(t, ctx, "message/stream", map[string]any{"message": msg(map[string]any{"data": map[string]any{"skill": "slow"}})}, map[string]string{a2a.VersionHeader: "0.3"})
	defer resp.Body.Close()
	evs := sseEvents(t, resp.Body, 1)
	id := evs[0]["result"].(map[string]any)["id"].(string)
	if _, running := stateCounts(t, reg); running != 1 {
		t.Errorf("running tasks while slow runs: %v, want 1", running)
	}
	if res, e := r.rpc(t, tok, "0.3", "tasks/cancel", map[string]any{"id": id}); e != nil || !strings.Contains(string(res), `"state":"canceled"`) {
		t.Fatalf("cancel: %s %+v", res, e)
	}
	_ = sseEvents(t, resp.Body, 0)
	got, _ := stateCounts(t, reg)
	want := map[string]float64{"submitted": 2, "working": 2, "completed": 1, "canceled": 1, "input-required": 0, "failed": 0, "rejected": 0}
	for s, w := range want {
		if got[s] != w {
			t.Errorf("tasks entering %s: %v, want %v (all: %v)", s, got[s], w, got)
		}
	}
	if err := r.face.Close(); err != nil {
		t.Fatal(err)
	}
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Errorf("after Close the registry holds %d metrics, want none", len(mfs))
	}
}
