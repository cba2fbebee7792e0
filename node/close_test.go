package node

import (
	"errors"
	"net"
	"testing"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// A Node's Close is idempotent: the second returns net.ErrClosed, and so
// does its store's, which the first closed.
func TestCloseTwice(t *testing.T) {
	n := newTestNode(t, nil)
	testenv.CloseTwice(t, n)
	if err := n.Store().Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the store's Close after the node's = %v, want net.ErrClosed", err)
	}
}
