package mcp

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
	"github.com/mcpv2/mcpv2/protocol"
)

// closeBackend is the least Backend: nothing is called in these tests.
type closeBackend struct{ changed chan struct{} }

func (closeBackend) Handle(context.Context, protocol.Caller, []byte) ([]byte, *protocol.Error) {
	return nil, nil
}
func (closeBackend) Forward(context.Context, protocol.Caller, string, []byte) ([]byte, error) {
	return nil, nil
}
func (closeBackend) Find(context.Context, string, int) ([]protocol.FindResult, error) {
	return nil, nil
}
func (closeBackend) Audit(context.Context, protocol.Caller, string, *protocol.Error, time.Time) {}

// watchingBackend is a FilesWatcher too: New starts its goroutine.
type watchingBackend struct{ closeBackend }

func (w watchingBackend) FilesChanged() <-chan struct{} { return w.changed }

// A Face, with or without its goroutine: a second Close returns
// net.ErrClosed.
func TestFaceCloseTwice(t *testing.T) {
	for _, b := range []Backend{closeBackend{}, watchingBackend{closeBackend{changed: make(chan struct{})}}} {
		f, err := New(b)
		if err != nil {
			t.Fatal(err)
		}
		testenv.CloseTwice(t, f)
	}
}

// A bad option value fails New with an error naming the option.
func TestNewBadOption(t *testing.T) {
	for _, c := range []struct {
		opt  Option
		name string
	}{
		{WithLogger(nil), "WithLogger"},
		{WithMaxResource(0), "WithMaxResource"},
	} {
		f, err := New(closeBackend{}, c.opt)
		if err == nil {
			_ = f.Close()
			t.Errorf("%s: New succeeded", c.name)
		} else if !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: error %q does not name it", c.name, err)
		}
	}
	f, err := New(closeBackend{}, WithLogger(slog.New(slog.DiscardHandler)), WithVersion("v"), WithMaxResource(1))
	if err != nil {
		t.Fatal(err)
	}
	if f.version != "v" || f.maxRes != 1 {
		t.Errorf("options not applied: version %q, max resource %d", f.version, f.maxRes)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
