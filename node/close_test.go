package node

import (
	"errors"
	"net"
	"testing"
)

// A Node's Close is idempotent: the second returns net.ErrClosed, and so
// does its store's, which the first closed.
func TestCloseTwice(t *testing.T) {
	n := newTestNode(t, nil)
	if err := n.Close(); err != nil {
		t.Fatalf("first Close = %v", err)
	}
	if err := n.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close = %v, want net.ErrClosed", err)
	}
	if err := n.Store().Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the store's Close after the node's = %v, want net.ErrClosed", err)
	}
}
