package a2a

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// The face keeps one model of tasks, messages and events (stored as JSON in
// the node's store) and speaks it in the wire form of the version a request
// asked for: v1.0 (ProtoJSON: camelCase, TASK_STATE_* and ROLE_* enums, a
// part's kind told by its member name, results wrapped by kind) or v0.3
// (a "kind" member on every object, lowercase states and roles).

// State is a task's state, by its v0.3 name.
type State string

// The task states.
const (
	StateSubmitted     State = "submitted"
	StateWorking       State = "working"
	StateInputRequired State = "input-required"
	StateCompleted     State = "completed"
	StateCanceled      State = "canceled"
	StateFailed        State = "failed"
	StateRejected      State = "rejected"
)

// Terminal says the task never changes again.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateCanceled || s == StateFailed || s == StateRejected
}

// v1 is the state's v1.0 enum name.
func (s State) v1() string {
	return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(string(s), "-", "_"))
}

// stateFromV1 reads a v1.0 enum name, or a v0.3 name.
func stateFromWire(s string) (State, bool) {
	if rest, ok := strings.CutPrefix(s, "TASK_STATE_"); ok {
		s = strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
	}
	switch st := State(s); st {
	case StateSubmitted, StateWorking, StateInputRequired, StateCompleted, StateCanceled, StateFailed, StateRejected:
		return st, true
	}
	return "", false
}

// Task is an A2A task.
type Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    Status         `json:"status"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	History   []Message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Status is a task's state, when it was reached, and the agent's message.
type Status struct {
	State     State     `json:"state"`
	Message   *Message  `json:"message,omitempty"`
	Timestamp time.Time `json:"timestamp"`
}

// Message is one turn of a conversation: the user's request or the agent's
// answer.
type Message struct {
	MessageID string         `json:"messageId"`
	ContextID string         `json:"contextId,omitempty"`
	TaskID    string         `json:"taskId,omitempty"`
	Role      string         `json:"role"` // "user" or "agent"
	Parts     []Part         `json:"parts"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Part is one piece of a message or artifact: text, structured data, or a
// file (inline bytes or a URI).
type Part struct {
	Text     *string        `json:"text,omitempty"`
	Data     any            `json:"data,omitempty"`
	File     *File          `json:"file,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// File is a file part's file.
type File struct {
	Name     string `json:"name,omitempty"`
	MIMEType string `json:"mimeType,omitempty"`
	Bytes    []byte `json:"bytes,omitempty"`
	URI      string `json:"uri,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []Part         `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// Event is one event of a task: the task itself (its first event), a new
// status, or a new artifact. Seq numbers the task's events from 1.
type Event struct {
	Task     *Task          `json:"task,omitempty"`
	Status   *StatusEvent   `json:"status,omitempty"`
	Artifact *ArtifactEvent `json:"artifact,omitempty"`
	Seq      uint64         `json:"-"`
	// progress marks a working status that reports a skill's progress:
	// not a change of state (the metrics do not count it).
	progress bool
}

// StatusEvent is a task's new status.
type StatusEvent struct {
	TaskID    string `json:"taskId"`
	ContextID string `json:"contextId"`
	Status    Status `json:"status"`
}

// ArtifactEvent is a task's new artifact.
type ArtifactEvent struct {
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Artifact  Artifact `json:"artifact"`
}

// seqMeta is the metadata key of an event's sequence number on the wire:
// a subscriber that lost its stream names the last it saw (Last-Event-ID)
// and gets what followed.
const seqMeta = "mcpv2/seq"

// --- v1.0 wire form

func (p Part) v1() map[string]any {
	m := map[string]any{}
	switch {
	case p.Text != nil:
		m["text"] = *p.Text
	case p.File != nil && p.File.URI != "":
		m["url"] = p.File.URI
	case p.File != nil:
		m["raw"] = base64.StdEncoding.EncodeToString(p.File.Bytes)
	default:
		m["data"] = p.Data
		m["mediaType"] = "application/json"
	}
	if p.File != nil {
		if p.File.Name != "" {
			m["filename"] = p.File.Name
		}
		if p.File.MIMEType != "" {
			m["mediaType"] = p.File.MIMEType
		}
	}
	if len(p.Metadata) > 0 {
		m["metadata"] = p.Metadata
	}
	return m
}

func partsV1(ps []Part) []any {
	out := make([]any, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.v1())
	}
	return out
}

func (m Message) v1() map[string]any {
	out := map[string]any{"messageId": m.MessageID, "role": "ROLE_" + strings.ToUpper(m.Role), "parts": partsV1(m.Parts)}
	setIf(out, "contextId", m.ContextID)
	setIf(out, "taskId", m.TaskID)
	if len(m.Metadata) > 0 {
		out["metadata"] = m.Metadata
	}
	return out
}

func (s Status) v1() map[string]any {
	out := map[string]any{"state": s.State.v1(), "timestamp": s.Timestamp.UTC().Format(time.RFC3339Nano)}
	if s.Message != nil {
		out["message"] = s.Message.v1()
	}
	return out
}

func (a Artifact) v1() map[string]any {
	out := map[string]any{"artifactId": a.ArtifactID, "parts": partsV1(a.Parts)}
	setIf(out, "name", a.Name)
	setIf(out, "description", a.Description)
	if len(a.Metadata) > 0 {
		out["metadata"] = a.Metadata
	}
	return out
}

// taskV1 is t in v1.0 form, with at most historyLength messages of history
// (negative: all) and its artifacts unless withArtifacts is false.
func (t Task) v1(historyLength int, withArtifacts bool) map[string]any {
	out := map[string]any{"id": t.ID, "contextId": t.ContextID, "status": t.Status.v1()}
	if withArtifacts && len(t.Artifacts) > 0 {
		as := make([]any, 0, len(t.Artifacts))
		for _, a := range t.Artifacts {
			as = append(as, a.v1())
		}
		out["artifacts"] = as
	}
	if h := lastN(t.History, historyLength); len(h) > 0 {
		ms := make([]any, 0, len(h))
		for _, m := range h {
			ms = append(ms, m.v1())
		}
		out["history"] = ms
	}
	if len(t.Metadata) > 0 {
		out["metadata"] = t.Metadata
	}
	return out
}

// eventV1 is e as a v1.0 StreamResponse.
func (e Event) v1() map[string]any {
	meta := map[string]any{seqMeta: e.Seq}
	switch {
	case e.Task != nil:
		t := e.Task.v1(-1, true)
		t["metadata"] = mergeMeta(e.Task.Metadata, meta)
		return map[string]any{"task": t}
	case e.Status != nil:
		return map[string]any{"statusUpdate": map[string]any{"taskId": e.Status.TaskID, "contextId": e.Status.ContextID,
			"status": e.Status.Status.v1(), "metadata": meta}}
	default:
		return map[string]any{"artifactUpdate": map[string]any{"taskId": e.Artifact.TaskID, "contextId": e.Artifact.ContextID,
			"artifact": e.Artifact.Artifact.v1(), "lastChunk": true, "metadata": meta}}
	}
}

// --- v0.3 wire form

func (p Part) v03() map[string]any {
	var m map[string]any
	switch {
	case p.Text != nil:
		m = map[string]any{"kind": "text", "text": *p.Text}
	case p.File != nil:
		f := map[string]any{}
		setIf(f, "name", p.File.Name)
		setIf(f, "mimeType", p.File.MIMEType)
		if p.File.URI != "" {
			f["uri"] = p.File.URI
		} else {
			f["bytes"] = base64.StdEncoding.EncodeToString(p.File.Bytes)
		}
		m = map[string]any{"kind": "file", "file": f}
	default:
		data := p.Data
		if _, ok := data.(map[string]any); !ok {
			data = map[string]any{"value": data} // v0.3 data is an object
		}
		m = map[string]any{"kind": "data", "data": data}
	}
	if len(p.Metadata) > 0 {
		m["metadata"] = p.Metadata
	}
	return m
}

func partsV03(ps []Part) []any {
	out := make([]any, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.v03())
	}
	return out
}

func (m Message) v03() map[string]any {
	out := map[string]any{"kind": "message", "messageId": m.MessageID, "role": m.Role, "parts": partsV03(m.Parts)}
	setIf(out, "contextId", m.ContextID)
	setIf(out, "taskId", m.TaskID)
	if len(m.Metadata) > 0 {
		out["metadata"] = m.Metadata
	}
	return out
}

func (s Status) v03() map[string]any {
	out := map[string]any{"state": string(s.State), "timestamp": s.Timestamp.UTC().Format(time.RFC3339Nano)}
	if s.Message != nil {
		out["message"] = s.Message.v03()
	}
	return out
}

func (a Artifact) v03() map[string]any {
	out := map[string]any{"artifactId": a.ArtifactID, "parts": partsV03(a.Parts)}
	setIf(out, "name", a.Name)
	setIf(out, "description", a.Description)
	if len(a.Metadata) > 0 {
		out["metadata"] = a.Metadata
	}
	return out
}

func (t Task) v03(historyLength int) map[string]any {
	out := map[string]any{"kind": "task", "id": t.ID, "contextId": t.ContextID, "status": t.Status.v03()}
	if len(t.Artifacts) > 0 {
		as := make([]any, 0, len(t.Artifacts))
		for _, a := range t.Artifacts {
			as = append(as, a.v03())
		}
		out["artifacts"] = as
	}
	if h := lastN(t.History, historyLength); len(h) > 0 {
		ms := make([]any, 0, len(h))
		for _, m := range h {
			ms = append(ms, m.v03())
		}
		out["history"] = ms
	}
	if len(t.Metadata) > 0 {
		out["metadata"] = t.Metadata
	}
	return out
}

// v03 is e as a v0.3 stream event; final marks the last event of a stream
// (a terminal or interrupted state).
func (e Event) v03() map[string]any {
	meta := map[string]any{seqMeta: e.Seq}
	switch {
	case e.Task != nil:
		t := e.Task.v03(-1)
		t["metadata"] = mergeMeta(e.Task.Metadata, meta)
		return t
	case e.Status != nil:
		st := e.Status.Status.State
		return map[string]any{"kind": "status-update", "taskId": e.Status.TaskID, "contextId": e.Status.ContextID,
			"status": e.Status.Status.v03(), "final": st.Terminal() || st == StateInputRequired, "metadata": meta}
	default:
		return map[string]any{"kind": "artifact-update", "taskId": e.Artifact.TaskID, "contextId": e.Artifact.ContextID,
			"artifact": e.Artifact.Artifact.v03(), "lastChunk": true, "metadata": meta}
	}
}

// --- decoding a client's message (either version)

// maxParts caps the parts of one message.
const maxParts = 64

// wireMessage is a message as either version writes it.
type wireMessage struct {
	Kind      string            `json:"kind"`
	MessageID string            `json:"messageId"`
	ContextID string            `json:"contextId"`
	TaskID    string            `json:"taskId"`
	Role      string            `json:"role"`
	Parts     []json.RawMessage `json:"parts"`
	Metadata  map[string]any    `json:"metadata"`
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
	Metadata map[string]any `json:"metadata"`
}

// decodeMessage reads a client's message in either version's form. Errors
// name what is wrong, for -32602.
func decodeMessage(raw json.RawMessage) (Message, error) {
	var w wireMessage
	if err := json.Unmarshal(raw, &w); err != nil {
		return Message{}, fmt.Errorf("message: %v", err)
	}
	if w.MessageID == "" || len(w.MessageID) > 256 {
		return Message{}, fmt.Errorf("message: messageId is missing or longer than 256 bytes")
	}
	role := strings.ToLower(strings.TrimPrefix(w.Role, "ROLE_"))
	if role != "user" && role != "agent" {
		return Message{}, fmt.Errorf("message: role %q is not user (ROLE_USER) or agent (ROLE_AGENT)", protocol.Clip(w.Role, 40))
	}
	if len(w.Parts) == 0 || len(w.Parts) > maxParts {
		return Message{}, fmt.Errorf("message: want 1 to %d parts, got %d", maxParts, len(w.Parts))
	}
	m := Message{MessageID: w.MessageID, ContextID: w.ContextID, TaskID: w.TaskID, Role: role, Metadata: w.Metadata}
	for i, pr := range w.Parts {
		p, err := decodePart(pr)
		if err != nil {
			return Message{}, fmt.Errorf("message: parts[%d]: %v", i, err)
		}
		m.Parts = append(m.Parts, p)
	}
	return m, nil
}

func decodePart(raw json.RawMessage) (Part, error) {
	var w wirePart
	if err := json.Unmarshal(raw, &w); err != nil {
		return Part{}, err
	}
	p := Part{Metadata: w.Metadata}
	kinds := 0
	if w.Text != nil {
		kinds++
		p.Text = w.Text
	}
	if len(w.Data) > 0 && string(w.Data) != "null" {
		kinds++
		if err := json.Unmarshal(w.Data, &p.Data); err != nil {
			return Part{}, err
		}
	}
	if w.Raw != nil {
		kinds++
		b, err := base64.StdEncoding.DecodeString(*w.Raw)
		if err != nil {
			return Part{}, fmt.Errorf("raw is not base64: %v", err)
		}
		p.File = &File{Name: w.Filename, MIMEType: w.MediaType, Bytes: b}
	}
	if w.URL != nil {
		kinds++
		p.File = &File{Name: w.Filename, MIMEType: w.MediaType, URI: *w.URL}
	}
	if w.File != nil {
		kinds++
		p.File = &File{Name: w.File.Name, MIMEType: w.File.MIMEType}
		switch {
		case w.File.Bytes != nil:
			b, err := base64.StdEncoding.DecodeString(*w.File.Bytes)
			if err != nil {
				return Part{}, fmt.Errorf("file.bytes is not base64: %v", err)
			}
			p.File.Bytes = b
		case w.File.URI != nil:
			p.File.URI = *w.File.URI
		default:
			return Part{}, fmt.Errorf("file has neither bytes nor uri")
		}
	}
	if kinds != 1 {
		return Part{}, fmt.Errorf("want exactly one of text, data, file (raw or url); got %d", kinds)
	}
	if w.Kind != "" && w.Kind != "text" && w.Kind != "data" && w.Kind != "file" {
		return Part{}, fmt.Errorf("kind %q is not text, data or file", protocol.Clip(w.Kind, 40))
	}
	return p, nil
}

// --- helpers

func setIf(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func mergeMeta(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// lastN returns the last n messages (all when n < 0).
func lastN(h []Message, n int) []Message {
	if n < 0 || n >= len(h) {
		return h
	}
	return h[len(h)-n:]
}
