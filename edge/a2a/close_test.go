package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// closeBackend is the least Backend: no task is stored.
type closeBackend struct{}

func (closeBackend) PeerID() string              { return "" }
func (closeBackend) Card() protocol.AgentCard    { return protocol.AgentCard{} }
func (closeBackend) Sign([]byte) ([]byte, error) { return nil, nil }
func (closeBackend) Handle(context.Context, protocol.Caller, []byte) ([]byte, *protocol.Error) {
	return nil, nil
}
func (closeBackend) Forward(context.Context, protocol.Caller, string, []byte) ([]byte, error) {
	return nil, nil
}
func (closeBackend) Permits(protocol.Caller, string) bool                                       { return false }
func (closeBackend) Audit(context.Context, protocol.Caller, string, *protocol.Error, time.Time) {}
func (closeBackend) PeerA2ACard(context.Context, string, string, string, *protocol.EdgeCredentials) (json.RawMessage, error) {
	return nil, nil
}
func (closeBackend) SaveTask(protocol.StoredTask, json.RawMessage) (uint64, error) { return 0, nil }
func (closeBackend) Task(string) (protocol.StoredTask, error) {
	return protocol.StoredTask{}, errors.New("no task")
}
func (closeBackend) TaskEvents(string, uint64, int) ([]protocol.TaskEvent, error) { return nil, nil }
func (closeBackend) ListTasks(string, protocol.TaskQuery) ([]protocol.StoredTask, error) {
	return nil, nil
}

// A Face: a second Close returns net.ErrClosed.
func TestFaceCloseTwice(t *testing.T) {
	f, err := New(closeBackend{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.CloseTwice(t, f)
}

// A bad option value fails New with an error naming the option.
func TestNewBadOption(t *testing.T) {
	for _, c := range []struct {
		opt  Option
		name string
	}{
		{WithLogger(nil), "WithLogger"},
		{WithMaxRunning(0), "WithMaxRunning"},
	} {
		f, err := New(closeBackend{}, c.opt)
		if err == nil {
			_ = f.Close()
			t.Errorf("%s: New succeeded", c.name)
		} else if !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: error %q does not name it", c.name, err)
		}
	}
	f, err := New(closeBackend{}, WithMaxRunning(3))
	if err != nil {
		t.Fatal(err)
	}
	if f.maxRunning != 3 {
		t.Errorf("WithMaxRunning not applied: %d", f.maxRunning)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
