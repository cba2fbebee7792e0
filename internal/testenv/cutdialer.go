package testenv

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// CutDialer dials and keeps a client's connections (as an
// http.Transport's DialContext), so that a test can cut them all at once,
// as the end of the client's process does: no goodbye (no MCP DELETE), and
// no reconnecting afterwards.
type CutDialer struct {
	mu    sync.Mutex
	conns []net.Conn
	dead  bool // cut: no more dials (a client would reconnect)
}

// DialContext dials like a net.Dialer (10 s timeout) and keeps the
// connection; after Cut it fails.
func (d *CutDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("the client is gone")
	}
	c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

// Cut closes every connection dialled and refuses later dials.
func (d *CutDialer) Cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		_ = c.Close()
	}
}
