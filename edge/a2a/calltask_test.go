package a2a_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpv2/mcpv2/edge/a2a"
	"github.com/mcpv2/mcpv2/protocol"
)

// TestSubmitCallProgress: SubmitCall runs one skill as a task of the
// store, through the node's dispatch (the context reaches the skill): the
// progress the skill reports becomes working statuses with its text, in
// the task's event stream, before the result; the times and the owner's
// listing are the store's; bad arguments are -32602.
func TestSubmitCallProgress(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRigOpts(t, nil, nil, a2a.WithMetrics(reg))
	step := make(chan struct{})
	if err := r.n.Registry().AddRaw(protocol.SkillDescriptor{Name: "reporter", Description: "reports", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			report := protocol.ProgressFrom(ctx)
			if report == nil {
				return nil, protocol.Errorf(protocol.CodeInternal, "no progress in the context")
			}
			report("step 1 of 2", map[string]any{"step": 1})
			<-step
			report("step 2 of 2", nil)
			return map[string]any{"text": "reported"}, nil
		}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := protocol.Caller{ID: "owner", Owner: protocol.OwnerSecret, Via: "mcp", Kind: protocol.CallerSecretHolder}
	task, err := r.face.SubmitCall(ctx, c, "reporter", json.RawMessage(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	err = r.face.StreamTask(ctx, c, task.ID, 0, true, func(ev a2a.StreamEvent) error {
		if ev.Kind == "status" {
			var s struct {
				StatusUpdate struct {
					Status struct {
						State   string `json:"state"`
						Message *struct {
							Parts []struct {
								Text string `json:"text"`
							} `json:"parts"`
						} `json:"message"`
					} `json:"status"`
				} `json:"statusUpdate"`
			}
			_ = json.Unmarshal(ev.Data, &s)
			text := s.StatusUpdate.Status.State
			if m := s.StatusUpdate.Status.Message; m != nil && len(m.Parts) > 0 {
				text += ":" + m.Parts[0].Text
				if m.Parts[0].Text == "step 1 of 2" {
					close(step)
				}
			}
			texts = append(texts, text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(texts, ","); !strings.Contains(got, "TASK_STATE_WORKING:step 1 of 2,TASK_STATE_WORKING:step 2 of 2") || !strings.HasSuffix(got, "TASK_STATE_COMPLETED") {
		t.Fatalf("statuses: %s", got)
	}
	tt, err := r.face.GetTimedTask(ctx, c, task.ID)
	if err != nil || tt.Task.Status.State != a2a.StateCompleted || tt.Created.IsZero() || tt.Updated.Before(tt.Created) {
		t.Fatalf("GetTimedTask: %+v %v", tt, err)
	}
	// The two progress reports were working statuses, not the task
	// entering working again.
	if got, _ := stateCounts(t, reg); got["working"] != 1 || got["submitted"] != 1 || got["completed"] != 1 {
		t.Errorf("tasks entering each state: %v, want working 1 (reports are not counted)", got)
	}
	// A task of an A2A message of the same caller: listed with the tool
	// calls' only when asked for all.
	text, err := r.face.SubmitText(ctx, c, "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	if marked, _ := tt.Task.Metadata[a2a.ToolCallMeta].(bool); !marked {
		t.Errorf("the tool call's task is not marked: %v", tt.Task.Metadata)
	}
	page, err := r.face.ListOwnTasks(ctx, c, "", 10, true)
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].Task.ID != task.ID {
		t.Fatalf("ListOwnTasks of tool calls: %+v %v", page, err)
	}
	if page, err := r.face.ListOwnTasks(ctx, c, "", 10, false); err != nil || len(page.Tasks) != 2 || (page.Tasks[0].Task.ID != text.ID && page.Tasks[1].Task.ID != text.ID) {
		t.Fatalf("ListOwnTasks of all: %+v %v", page, err)
	}
	stranger := protocol.Caller{ID: "key:other", Owner: "key:other", Via: "mcp", Kind: protocol.CallerKey}
	if page, err := r.face.ListOwnTasks(ctx, stranger, "", 10, false); err != nil || len(page.Tasks) != 0 {
		t.Fatalf("another caller lists: %+v %v", page, err)
	}
	if _, err := r.face.GetTimedTask(ctx, stranger, task.ID); protocol.AsError(err).Code != a2a.CodeTaskNotFound {
		t.Fatalf("another caller's task: %v", err)
	}
	for _, args := range []string{`[1]`, `"x"`, `{`} {
		if _, err := r.face.SubmitCall(ctx, c, "reporter", json.RawMessage(args)); protocol.AsError(err).Code != protocol.CodeInvalidParams {
			t.Fatalf("arguments %s: %v", args, err)
		}
	}
}
