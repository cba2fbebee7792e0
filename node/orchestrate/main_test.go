package orchestrate

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpv2/mcpv2/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// peerID returns a PeerID-shaped string (12D3KooW + 44 base58 characters)
// derived from name.
func peerID(name string) string {
	const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(name))
	var b strings.Builder
	b.WriteString("12D3KooW")
	for i := 0; i < 44; i++ {
		b.WriteByte(alphabet[int(sum[i%len(sum)]+byte(i))%len(alphabet)])
	}
	return b.String()
}

// handler answers a call on a fake agent.
type handler func(ctx context.Context, skill string, args json.RawMessage) (json.RawMessage, error)

// agent is one fake agent of a fakeMesh.
type agent struct {
	card      protocol.AgentCard
	reachable bool
	handle    handler
}

// call records one CallSkill.
type call struct {
	agent, skill string
	args         json.RawMessage
	start, end   time.Time
}

// fakeMesh is an in-memory Finder and Caller over a few agents: Find
// matches a skill name or tag as discovery does; CallSkill runs the agent's
// handler. It records the calls and counts the finds.
type fakeMesh struct {
	mu     sync.Mutex
	agents map[string]*agent
	calls  []call
	finds  map[string]int
	// findErr, when set, is the answer of every find.
	findErr error
}

func newMesh() *fakeMesh {
	return &fakeMesh{agents: map[string]*agent{}, finds: map[string]int{}}
}

// add registers an agent named name offering skills (each tagged tags) and
// returns its PeerID.
func (m *fakeMesh) add(name string, skills []string, tags []string, h handler) string {
	id := peerID(name)
	card := protocol.AgentCard{Name: name, Description: "fake agent " + name, PeerID: id, Seq: 1}
	for _, s := range skills {
		card.Skills = append(card.Skills, protocol.SkillDescriptor{Name: s, Description: "does " + s, Tags: tags})
	}
	m.mu.Lock()
	m.agents[id] = &agent{card: card, reachable: true, handle: h}
	m.mu.Unlock()
	return id
}

// Find implements Finder.
func (m *fakeMesh) Find(ctx context.Context, q string, limit int) ([]protocol.FindResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.finds[q]++
	if m.findErr != nil {
		return nil, m.findErr
	}
	var out []protocol.FindResult
	for _, a := range m.agents {
		match := false
		for _, sk := range a.card.Skills {
			match = match || strings.EqualFold(sk.Name, q) || slices.ContainsFunc(sk.Tags, func(t string) bool { return strings.EqualFold(t, q) })
		}
		if match {
			out = append(out, protocol.FindResult{Card: a.card, Score: 2, Reachable: a.reachable})
		}
	}
	slices.SortFunc(out, func(a, b protocol.FindResult) int { return strings.Compare(a.Card.PeerID, b.Card.PeerID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// CallSkill implements Caller.
func (m *fakeMesh) CallSkill(ctx context.Context, addr protocol.Address, skill string, args json.RawMessage) (json.RawMessage, error) {
	m.mu.Lock()
	a, ok := m.agents[addr.PeerID]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("fake: no agent %s", addr.PeerID)
	}
	if _, ok := offered(a.card, skill); !ok {
		return nil, protocol.Errorf(protocol.CodeSkillNotFound, "no skill %q", skill)
	}
	c := call{agent: addr.PeerID, skill: skill, args: append(json.RawMessage(nil), args...), start: time.Now()}
	out, err := a.handle(ctx, skill, args)
	c.end = time.Now()
	m.mu.Lock()
	m.calls = append(m.calls, c)
	m.mu.Unlock()
	return out, err
}

// callsOf returns the recorded calls of skill.
func (m *fakeMesh) callsOf(skill string) []call {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []call
	for _, c := range m.calls {
		if c.skill == skill {
			out = append(out, c)
		}
	}
	return out
}

// answer returns a handler that answers v.
func answer(v any) handler {
	return func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.Marshal(v)
	}
}

// failWith returns a handler that fails with err.
func failWith(err error) handler {
	return func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return nil, err }
}

// events collects progress events, safe for the orchestrator's calls.
type events struct {
	mu  sync.Mutex
	all []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) list() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.all)
}

// of returns the states subtask went through.
func (e *events) of(subtask string) []State {
	var out []State
	for _, ev := range e.list() {
		if ev.Subtask == subtask {
			out = append(out, ev.State)
		}
	}
	return out
}

// checkSeq fails unless the events are numbered 1, 2, 3, … in time order.
func checkSeq(t *testing.T, evs []Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != i+1 {
			t.Fatalf("event %d has Seq %d", i, ev.Seq)
		}
		if i > 0 && ev.Time.Before(evs[i-1].Time) {
			t.Fatalf("event %d is earlier than event %d", i, i-1)
		}
	}
}

// mustNew builds an Orchestrator over m.
func mustNew(t *testing.T, m *fakeMesh, opts ...Option) *Orchestrator {
	t.Helper()
	o, err := New(m, m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// ctxT returns a context ended after 10 s or with the test.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wait receives from ch or fails the handler after 5 s.
func wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
		return fmt.Errorf("barrier not reached in 5 s")
	}
}
