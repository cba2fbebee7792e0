package a2aclient

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The client keeps one model of what an agent answers (either version)
// and maps it to the Call result.

// The task states, by their v0.3 names (v1.0's TASK_STATE_* are mapped).
const (
	StateSubmitted     = "submitted"
	StateWorking       = "working"
	StateInputRequired = "input-required"
	StateAuthRequired  = "auth-required"
	StateCompleted     = "completed"
	StateCanceled      = "canceled"
	StateFailed        = "failed"
	StateRejected      = "rejected"
	StateUnknown       = "unknown"
)

// normState maps a state of either version to its v0.3 name.
func normState(s string) string {
	if rest, ok := strings.CutPrefix(s, "TASK_STATE_"); ok {
		s = strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
	}
	switch s {
	case StateSubmitted, StateWorking, StateInputRequired, StateAuthRequired, StateCompleted, StateCanceled, StateFailed, StateRejected:
		return s
	}
	return StateUnknown
}

// terminal says the task never changes again.
func terminal(s string) bool {
	return s == StateCompleted || s == StateCanceled || s == StateFailed || s == StateRejected
}

// interrupted says the task waits for its caller.
func interrupted(s string) bool { return s == StateInputRequired || s == StateAuthRequired }

// part is a message's or artifact's part.
type part struct {
	Text *string
	Data json.RawMessage
	File *filePart
}

// filePart is a file part: inline bytes (base64) or a URI.
type filePart struct {
	Name     string `json:"name,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
	Bytes    string `json:"bytes,omitempty"` // base64
	URI      string `json:"uri,omitempty"`
}

type artifact struct {
	ID    string
	Name  string
	Parts []part
}

// task is the client's view of a task (or of a direct message answer,
// with no ID).
type task struct {
	ID, ContextID string
	State         string
	Message       []part // the latest status message's parts
	Artifacts     []artifact
}

// wirePart is a part as either version writes it: v0.3 has kind and a
// nested file; v1.0 names the content (text, data, raw, url).
type wirePart struct {
	Kind      string          `json:"kind"`
	Text      *string         `json:"text"`
	Data      json.RawMessage `json:"data"`
	Raw       *string         `json:"raw"`
	URL       *string         `json:"url"`
	Filename  string          `json:"filename"`
	MediaType string          `json:"mediaType"`
	File      *struct {
		Name     string  `json:"name"`
		MIMEType string  `json:"mimeType"`
		Bytes    *string `json:"bytes"`
		URI      *string `json:"uri"`
	} `json:"file"`
}

func (w wirePart) part() (part, bool) {
	switch {
	case w.Text != nil:
		return part{Text: w.Text}, true
	case len(w.Data) > 0 && string(w.Data) != "null":
		return part{Data: w.Data}, true
	case w.Raw != nil:
		return part{File: &filePart{Name: w.Filename, MIMEType: w.MediaType, Bytes: *w.Raw}}, true
	case w.URL != nil:
		return part{File: &filePart{Name: w.Filename, MIMEType: w.MediaType, URI: *w.URL}}, true
	case w.File != nil:
		f := &filePart{Name: w.File.Name, MIMEType: w.File.MIMEType}
		if w.File.Bytes != nil {
			f.Bytes = *w.File.Bytes
		}
		if w.File.URI != nil {
			f.URI = *w.File.URI
		}
		return part{File: f}, true
	}
	return part{}, false
}

func parts(ws []wirePart) []part {
	out := make([]part, 0, len(ws))
	for _, w := range ws {
		if p, ok := w.part(); ok {
			out = append(out, p)
		}
	}
	return out
}

type wireMessage struct {
	TaskID    string     `json:"taskId"`
	ContextID string     `json:"contextId"`
	Parts     []wirePart `json:"parts"`
}

type wireStatus struct {
	State   string       `json:"state"`
	Message *wireMessage `json:"message"`
}

type wireArtifact struct {
	ArtifactID string     `json:"artifactId"`
	Name       string     `json:"name"`
	Parts      []wirePart `json:"parts"`
}

type wireTask struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    wireStatus     `json:"status"`
	Artifacts []wireArtifact `json:"artifacts"`
}

func (w wireTask) task() *task {
	t := &task{ID: w.ID, ContextID: w.ContextID, State: normState(w.Status.State)}
	if w.Status.Message != nil {
		t.Message = parts(w.Status.Message.Parts)
	}
	for _, a := range w.Artifacts {
		t.Artifacts = append(t.Artifacts, artifact{ID: a.ArtifactID, Name: a.Name, Parts: parts(a.Parts)})
	}
	return t
}

// event is one answer or stream event of either version: a task, a
// message, a status update or an artifact update.
type event struct {
	Task     *task
	Message  *wireMessage
	Status   *statusUpdate
	Artifact *artifactUpdate
}

type statusUpdate struct {
	TaskID    string     `json:"taskId"`
	ContextID string     `json:"contextId"`
	Status    wireStatus `json:"status"`
}

type artifactUpdate struct {
	TaskID    string       `json:"taskId"`
	ContextID string       `json:"contextId"`
	Artifact  wireArtifact `json:"artifact"`
	Append    bool         `json:"append"`
}

// decodeEvent reads a SendMessage / stream / GetTask result of either
// version: v1.0 wraps it by kind ({"task": …}, {"message": …},
// {"statusUpdate": …}, {"artifactUpdate": …}, or a bare Task for GetTask),
// v0.3 marks it with "kind".
func decodeEvent(raw json.RawMessage) (event, error) {
	var head struct {
		Kind           string          `json:"kind"`
		ID             string          `json:"id"`
		Task           json.RawMessage `json:"task"`
		Message        json.RawMessage `json:"message"`
		StatusUpdate   json.RawMessage `json:"statusUpdate"`
		ArtifactUpdate json.RawMessage `json:"artifactUpdate"`
		Status         json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return event{}, fmt.Errorf("result is not a JSON object: %v", err)
	}
	var ev event
	var err error
	switch {
	case head.Kind == "task" || head.Kind == "" && head.ID != "" && len(head.Status) > 0:
		var w wireTask
		if err = json.Unmarshal(raw, &w); err == nil {
			ev.Task = w.task()
		}
	case head.Kind == "message":
		ev.Message = new(wireMessage)
		err = json.Unmarshal(raw, ev.Message)
	case head.Kind == "status-update":
		ev.Status = new(statusUpdate)
		err = json.Unmarshal(raw, ev.Status)
	case head.Kind == "artifact-update":
		ev.Artifact = new(artifactUpdate)
		err = json.Unmarshal(raw, ev.Artifact)
	case len(head.Task) > 0:
		var w wireTask
		if err = json.Unmarshal(head.Task, &w); err == nil {
			ev.Task = w.task()
		}
	case len(head.Message) > 0:
		ev.Message = new(wireMessage)
		err = json.Unmarshal(head.Message, ev.Message)
	case len(head.StatusUpdate) > 0:
		ev.Status = new(statusUpdate)
		err = json.Unmarshal(head.StatusUpdate, ev.Status)
	case len(head.ArtifactUpdate) > 0:
		ev.Artifact = new(artifactUpdate)
		err = json.Unmarshal(head.ArtifactUpdate, ev.Artifact)
	default:
		return event{}, fmt.Errorf("result is neither a task, a message nor a task update: %s", clip(string(raw), 120))
	}
	if err != nil {
		return event{}, fmt.Errorf("result: %v", err)
	}
	if ev.Task != nil && ev.Task.ID == "" {
		return event{}, fmt.Errorf("result: a task without an id")
	}
	return ev, nil
}

// apply folds ev into t (nil: none yet) and returns the new view.
func apply(t *task, ev event) *task {
	switch {
	case ev.Task != nil:
		if t != nil && len(ev.Task.Artifacts) == 0 {
			ev.Task.Artifacts = t.Artifacts // a snapshot without artifacts keeps those streamed
		}
		return ev.Task
	case ev.Message != nil:
		if t == nil {
			t = &task{ID: ev.Message.TaskID, ContextID: ev.Message.ContextID}
		}
		t.State, t.Message = StateCompleted, parts(ev.Message.Parts)
		return t
	case ev.Status != nil:
		if t == nil {
			t = &task{ID: ev.Status.TaskID, ContextID: ev.Status.ContextID}
		}
		t.State = normState(ev.Status.Status.State)
		if ev.Status.Status.Message != nil {
			t.Message = parts(ev.Status.Status.Message.Parts)
		}
		return t
	case ev.Artifact != nil:
		if t == nil {
			t = &task{ID: ev.Artifact.TaskID, ContextID: ev.Artifact.ContextID, State: StateWorking}
		}
		a := ev.Artifact.Artifact
		for i := range t.Artifacts {
			if ev.Artifact.Append && t.Artifacts[i].ID == a.ArtifactID {
				t.Artifacts[i].Parts = append(t.Artifacts[i].Parts, parts(a.Parts)...)
				return t
			}
		}
		t.Artifacts = append(t.Artifacts, artifact{ID: a.ArtifactID, Name: a.Name, Parts: parts(a.Parts)})
	}
	return t
}

// Result is what Call returns, as JSON:
//
//	{"task_id", "context_id", "state", "text", "data"?, "artifacts"?}
//
// state is the task's state by its v0.3 name (completed, input-required,
// auth-required; failed, canceled and rejected are errors). text joins the
// text parts of the artifacts, or, when they have none, of the agent's
// last status message (what an input-required task asks). data is the one
// data part of the answer (artifacts first, then the status message), or
// the list of them when there are several. artifacts is every artifact
// with its parts (text, data, or file {name, mime_type, bytes (base64) |
// uri}), when there is any. A direct message answer (no task) has an
// empty task_id and the state completed.
type Result struct {
	TaskID    string           `json:"task_id"`
	ContextID string           `json:"context_id"`
	State     string           `json:"state"`
	Text      string           `json:"text"`
	Data      json.RawMessage  `json:"data,omitempty"`
	Artifacts []ResultArtifact `json:"artifacts,omitempty"`
}

// ResultArtifact is one artifact of a Result.
type ResultArtifact struct {
	Name  string       `json:"name,omitempty"`
	Parts []ResultPart `json:"parts"`
}

// ResultPart is one part of a ResultArtifact: one of its fields is set.
type ResultPart struct {
	Text *string         `json:"text,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
	File *filePart       `json:"file,omitempty"`
}

func (t *task) result() Result {
	r := Result{TaskID: t.ID, ContextID: t.ContextID, State: t.State}
	var texts []string
	var datas []json.RawMessage
	for _, a := range t.Artifacts {
		ra := ResultArtifact{Name: a.Name, Parts: []ResultPart{}}
		for _, p := range a.Parts {
			ra.Parts = append(ra.Parts, ResultPart(p))
			if p.Text != nil {
				texts = append(texts, *p.Text)
			}
			if p.Data != nil {
				datas = append(datas, p.Data)
			}
		}
		r.Artifacts = append(r.Artifacts, ra)
	}
	if len(texts) == 0 || len(datas) == 0 {
		for _, p := range t.Message {
			if p.Text != nil && len(texts) == 0 {
				texts = append(texts, *p.Text)
			}
			if p.Data != nil && len(t.Artifacts) == 0 {
				datas = append(datas, p.Data)
			}
		}
	}
	r.Text = strings.Join(texts, "\n")
	switch len(datas) {
	case 0:
	case 1:
		r.Data = datas[0]
	default:
		b, _ := json.Marshal(datas)
		r.Data = b
	}
	return r
}

// messageText is the text of the status message (for errors).
func (t *task) messageText() string {
	var s []string
	for _, p := range t.Message {
		if p.Text != nil {
			s = append(s, *p.Text)
		}
	}
	return strings.Join(s, " ")
}

// buildMessage is the user message of a Call, in the card's version.
func buildMessage(version, skill, text string, data map[string]any, taskID, contextID string) map[string]any {
	m := map[string]any{"messageId": newID()}
	var ps []any
	if version == "1.0" {
		m["role"] = "ROLE_USER"
		if text != "" {
			ps = append(ps, map[string]any{"text": text, "mediaType": "text/plain"})
		}
		if len(data) > 0 {
			ps = append(ps, map[string]any{"data": data, "mediaType": "application/json"})
		}
	} else {
		m["kind"], m["role"] = "message", "user"
		if text != "" {
			ps = append(ps, map[string]any{"kind": "text", "text": text})
		}
		if len(data) > 0 {
			ps = append(ps, map[string]any{"kind": "data", "data": data})
		}
	}
	if len(ps) == 0 { // a message needs a part
		if version == "1.0" {
			ps = append(ps, map[string]any{"text": ""})
		} else {
			ps = append(ps, map[string]any{"kind": "text", "text": ""})
		}
	}
	m["parts"] = ps
	if skill != "" {
		m["metadata"] = map[string]any{"skill": skill}
	}
	if taskID != "" {
		m["taskId"] = taskID
	}
	if contextID != "" {
		m["contextId"] = contextID
	}
	return m
}
