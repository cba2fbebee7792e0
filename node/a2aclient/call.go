package a2aclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// textKeys are the arguments whose string becomes the message's text
// part, the first present.
var textKeys = []string{"text", "message", "query", "prompt"}

// TaskError is a task that ended failed, canceled or rejected.
type TaskError struct {
	Agent, TaskID, State, Text string
}

// Error names the agent, the task, its state and the agent's message.
func (e *TaskError) Error() string {
	s := fmt.Sprintf("a2a agent %s: task %s %s", e.Agent, e.TaskID, e.State)
	if e.Text != "" {
		s += ": " + clip(e.Text, 300)
	}
	return s
}

// Call sends skill's arguments to the agent of card as one message and
// waits for the task to end or to ask for input; it returns the Result as
// JSON (see Result).
//
// args is a JSON object (empty: {}). Its "text", "message", "query" or
// "prompt" string, the first present, becomes a text part; the whole
// object (without task_id and context_id) a data part; the message's
// metadata names the skill. "task_id" and "context_id" continue a task
// that asked for input (multi-turn): pass back what the last Result said.
// When the card lists skills, skill must be one of their ids or names (""
// names none).
//
// With a card that streams (and WithStreaming not false) the message goes
// out as SendStreamingMessage (v1.0) or message/stream (v0.3) and the
// events are read to a final state; else as SendMessage / message/send
// returning at once, and the task is polled with GetTask / tasks/get, the
// pause doubling from the poll interval's first to its largest. A stream
// that ends early is followed by polls. A task that fails, is canceled or
// rejected is a *TaskError; a JSON-RPC error an *RPCError; both, and
// every other error, name the agent's URL.
func (c *Client) Call(ctx context.Context, card *Card, skill string, args json.RawMessage) (json.RawMessage, error) {
	if card == nil || card.Endpoint == "" {
		return nil, errors.New("a2a call: no card (resolve it with Card first)")
	}
	if card.ProtocolVersion != "1.0" && card.ProtocolVersion != "0.3" {
		return nil, fmt.Errorf("a2a agent %s: protocol version %q is not 1.0 or 0.3", card.Endpoint, card.ProtocolVersion)
	}
	if err := checkSkill(card, skill); err != nil {
		return nil, err
	}
	text, data, taskID, contextID, err := splitArgs(args)
	if err != nil {
		return nil, fmt.Errorf("a2a agent %s: skill %q: %w", card.Endpoint, skill, err)
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	msg := buildMessage(card.ProtocolVersion, skill, text, data, taskID, contextID)
	stream := card.Streaming && (c.cfg.streaming == nil || *c.cfg.streaming)
	var t *task
	if stream {
		t, err = c.stream(ctx, card, msg)
	} else {
		t, err = c.send(ctx, card, msg)
	}
	if err != nil {
		return nil, c.ctxErr(ctx, card, err)
	}
	if !terminal(t.State) && !interrupted(t.State) {
		if t.ID == "" {
			return nil, fmt.Errorf("a2a agent %s: the answer is in state %s without a task id to follow", card.Endpoint, t.State)
		}
		if t, err = c.poll(ctx, card, t); err != nil {
			return nil, c.ctxErr(ctx, card, err)
		}
	}
	switch t.State {
	case StateFailed, StateCanceled, StateRejected:
		return nil, &TaskError{Agent: card.Endpoint, TaskID: t.ID, State: t.State, Text: t.messageText()}
	}
	return json.Marshal(t.result())
}

// ctxErr words a failure after ctx ended as the timeout or cancellation.
func (c *Client) ctxErr(ctx context.Context, card *Card, err error) error {
	if ctx.Err() != nil && !errors.As(err, new(*RPCError)) {
		return fmt.Errorf("a2a agent %s: %w (after %v at most): %v", card.Endpoint, ctx.Err(), c.cfg.timeout, err)
	}
	return err
}

// checkSkill refuses a skill the card does not list.
func checkSkill(card *Card, skill string) error {
	if skill == "" || len(card.Skills) == 0 {
		return nil
	}
	var names []string
	for _, s := range card.Skills {
		if s.ID == skill || s.Name == skill {
			return nil
		}
		names = append(names, s.ID)
	}
	slices.Sort(names)
	return fmt.Errorf("a2a agent %s: no skill %q (the card lists: %s)", card.URL, clip(skill, 80), clip(strings.Join(names, ", "), 300))
}

// splitArgs reads a Call's arguments: the text, the data (without the
// task's ids) and the task's ids.
func splitArgs(args json.RawMessage) (text string, data map[string]any, taskID, contextID string, err error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		return "", nil, "", "", nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil || data == nil {
		return "", nil, "", "", fmt.Errorf("arguments are not a JSON object")
	}
	for _, k := range []string{"task_id", "context_id"} {
		v, ok := data[k]
		if !ok {
			continue
		}
		s, isStr := v.(string)
		if !isStr {
			return "", nil, "", "", fmt.Errorf("argument %s is not a string", k)
		}
		if k == "task_id" {
			taskID = s
		} else {
			contextID = s
		}
		delete(data, k)
	}
	for _, k := range textKeys {
		if s, ok := data[k].(string); ok {
			text = s
			break
		}
	}
	return text, data, taskID, contextID, nil
}

// send sends msg with SendMessage / message/send, asking the agent to
// answer at once (the client polls).
func (c *Client) send(ctx context.Context, card *Card, msg map[string]any) (*task, error) {
	method, params := "SendMessage", map[string]any{"message": msg, "configuration": map[string]any{"returnImmediately": true}}
	if card.ProtocolVersion == "0.3" {
		method, params = "message/send", map[string]any{"message": msg, "configuration": map[string]any{"blocking": false}}
	}
	res, err := c.call(ctx, card, method, params)
	if err != nil {
		return nil, err
	}
	ev, err := decodeEvent(res)
	if err != nil {
		return nil, fmt.Errorf("a2a agent %s: %s: %w", card.Endpoint, method, err)
	}
	return apply(nil, ev), nil
}

// stream sends msg with SendStreamingMessage / message/stream and reads
// its events to a final state or the stream's end.
func (c *Client) stream(ctx context.Context, card *Card, msg map[string]any) (*task, error) {
	method := "SendStreamingMessage"
	if card.ProtocolVersion == "0.3" {
		method = "message/stream"
	}
	resp, err := c.post(ctx, card, method, map[string]any{"message": msg}, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if !isEventStream(resp) { // the agent answered with one JSON-RPC response
		body, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.maxResponse+1))
		if err != nil {
			return nil, fmt.Errorf("a2a agent %s: %s: reading the answer: %w", card.Endpoint, method, err)
		}
		if int64(len(body)) > c.cfg.maxResponse {
			return nil, fmt.Errorf("a2a agent %s: %s: the answer is larger than %d bytes", card.Endpoint, method, c.cfg.maxResponse)
		}
		res, err := decodeRPC(body, card, method)
		if err != nil {
			return nil, err
		}
		ev, err := decodeEvent(res)
		if err != nil {
			return nil, fmt.Errorf("a2a agent %s: %s: %w", card.Endpoint, method, err)
		}
		return apply(nil, ev), nil
	}
	var t *task
	errDone := errors.New("final")
	var total int64 // the events' bytes: what the task accumulates is at most that
	var errTotal error
	err = readSSE(resp.Body, int(c.cfg.maxResponse), func(e sseEvent) error {
		if total += int64(len(e.Data)); total > c.cfg.maxResponse {
			errTotal = fmt.Errorf("a2a agent %s: %s: the stream's events add up to more than %d bytes", card.Endpoint, method, c.cfg.maxResponse)
			return errTotal
		}
		res, err := decodeRPC(e.Data, card, method)
		if err != nil {
			return err
		}
		ev, err := decodeEvent(res)
		if err != nil {
			return fmt.Errorf("event: %w", err)
		}
		t = apply(t, ev)
		if terminal(t.State) || interrupted(t.State) {
			return errDone
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDone) {
		if errTotal != nil {
			return nil, errTotal
		}
		if errors.As(err, new(*RPCError)) {
			return nil, err
		}
		if t == nil || t.ID == "" {
			return nil, fmt.Errorf("a2a agent %s: %s: reading the event stream: %w", card.Endpoint, method, err)
		}
		c.log.Debug("a2a stream broke; polling", "agent", card.Endpoint, "task", t.ID, "err", err)
	}
	if t == nil {
		return nil, fmt.Errorf("a2a agent %s: %s: the stream ended without an event", card.Endpoint, method)
	}
	return t, nil
}

// poll gets t until it reaches a final state, pausing from the poll
// interval's first up to its largest.
func (c *Client) poll(ctx context.Context, card *Card, t *task) (*task, error) {
	method := "GetTask"
	if card.ProtocolVersion == "0.3" {
		method = "tasks/get"
	}
	pause := c.cfg.pollMin
	timer := time.NewTimer(pause)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("task %s still %s: %w", t.ID, t.State, ctx.Err())
		case <-timer.C:
		}
		res, err := c.call(ctx, card, method, map[string]any{"id": t.ID})
		if err != nil {
			return nil, err
		}
		ev, err := decodeEvent(res)
		if err != nil {
			return nil, fmt.Errorf("a2a agent %s: %s: %w", card.Endpoint, method, err)
		}
		t = apply(t, ev)
		if terminal(t.State) || interrupted(t.State) {
			return t, nil
		}
		pause = min(pause*2, c.cfg.pollMax)
		timer.Reset(pause)
	}
}
