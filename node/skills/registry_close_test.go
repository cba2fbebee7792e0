package skills

import (
	"errors"
	"net"
	"slices"
	"testing"
)

// closeRecorder records its Close calls in order.
type closeRecorder struct {
	name  string
	calls *[]string
	err   error
}

func (c closeRecorder) Close() error {
	*c.calls = append(*c.calls, c.name)
	return c.err
}

// TestRegistryClose: Close closes what AddCloser added, in order, once,
// and returns their errors; a second Close returns net.ErrClosed; a closer
// added after Close is closed at once.
func TestRegistryClose(t *testing.T) {
	var calls []string
	boom := errors.New("boom")
	r := NewRegistry(nil)
	r.AddCloser(closeRecorder{"a", &calls, nil})
	r.AddCloser(closeRecorder{"b", &calls, boom})
	if err := r.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close: %v; want the closers' error", err)
	}
	if !slices.Equal(calls, []string{"a", "b"}) {
		t.Fatalf("closed %q; want [a b]", calls)
	}
	if err := r.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a second Close: %v; want net.ErrClosed", err)
	}
	if !slices.Equal(calls, []string{"a", "b"}) {
		t.Fatalf("a second Close closed again: %q", calls)
	}
	r.AddCloser(closeRecorder{"late", &calls, nil})
	if !slices.Equal(calls, []string{"a", "b", "late"}) {
		t.Fatalf("a closer added after Close: %q; want it closed at once", calls)
	}
	if err := NewRegistry(nil).Close(); err != nil {
		t.Fatalf("the first Close of an empty registry: %v", err)
	}
}
