// Package localapi is the local node API: one http.Handler serving JSON
// about a running node (its status, connections, skills, the mesh, its
// activity and access) and its API keys, and the client of it. `mcpv2
// status`, `mcpv2 id`, `mcpv2 key` and `mcpv2 ui` use it over a unix socket
// in the node's data dir (control.sock, mode 0600, peers of other users
// refused, and a client trusts only a node of its own user or root behind
// it); the dashboard (WithDashboard) serves the same handler and its pages
// on a loopback TCP port behind a login link and a session cookie.
//
// The routes (all JSON; a wrong method is 405; docs/spec.md "Local node
// API" and "The dashboard" give the bodies):
//
//	GET    /v1/status             StatusResponse
//	GET    /v1/peers              PeersResponse
//	GET    /v1/id                 IDResponse
//	GET    /v1/keys               KeysResponse
//	POST   /v1/keys               AddKeyRequest → AddKeyResponse (201; socket only)
//	DELETE /v1/keys/{name}        RevokeKeyResponse
//	POST   /v1/keys/{name}/revoke RevokeKeyResponse
//	GET    /v1/skills             SkillsResponse
//	GET    /v1/find?q=            FindResponse
//	GET    /v1/activity           ActivityResponse
//	GET    /v1/audit/stream       server-sent events of audit lines
//	GET    /v1/transfers          TransfersResponse
//	GET    /v1/access             AccessResponse
//	POST   /v1/call               CallRequest → CallResponse
//	DELETE /v1/sessions/{id}      an MCP session ended
//	GET    /v1/ui/link            LinkResponse (socket only)
//	GET    /v1/agents             AgentsResponse
//	POST   /v1/agents             AddAgentsRequest → AgentsResponse
//	DELETE /v1/agents?url=URL     AgentsResponse (the agents left)
//	GET    /v1/find/task?q=TASK   TaskResponse
//
// An error is {"error": text, "code": word} with a 4xx or 5xx status.
// Text that peers supplied (addresses, agent versions, cards) and key names
// are data: a client prints them escaped, a page renders them as text.
package localapi

import (
	"cmp"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/keys"
)

// SocketName is the control socket's file name in the data dir.
const SocketName = "control.sock"

// SocketPath is the control socket of the node of dataDir.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, SocketName) }

// API is the local node API of one node: its Handler, and (unless
// WithSocket("")) the server of it on the control socket.
type API struct {
	n       *node.Node
	cfg     config
	keys    *Keys
	handler http.Handler

	socket string       // "" without a socket
	srv    *http.Server // nil without a socket
	served chan struct{}
	dash   *dashboard // nil without WithDashboard

	// pages parses the dashboard's templates on the first page served and
	// returns them by page name: about 0.3 MB of live heap a node without
	// a visitor to its dashboard does not hold (issue 25).
	pages   func() (map[string]*template.Template, error)
	streams chan struct{} // a slot per open event stream (maxStreams)
	done    chan struct{} // closed by Close: event streams end

	closeMu sync.Mutex
	closed  bool
}

// Option configures New.
type Option func(*config) error

type config struct {
	edgeURLs   []string
	ring       *keys.Ring
	keysFile   string
	log        *slog.Logger
	now        func() time.Time
	version    string
	socket     *string // nil: SocketPath(the node's data dir)
	dashAddr   string  // "": no dashboard
	dashPublic bool
	sessions   SessionBook // nil: no MCP sessions to list
}

// WithEdgeURLs sets the URLs of the node's HTTP edge (none: no edge).
func WithEdgeURLs(urls ...string) Option {
	return func(c *config) error {
		c.edgeURLs = slices.Clone(urls)
		return nil
	}
}

// SessionBook is what the Access page lists and ends: the stateful MCP
// sessions of the node's edge (edge/mcp's Face, adapted by the command).
type SessionBook interface {
	Sessions() []Session
	CloseSession(id string) error
}

// Session is one MCP session of a SessionBook.
type Session struct {
	ID         string    `json:"id"`
	Owner      string    `json:"owner"`
	Privileged bool      `json:"privileged"`
	Started    time.Time `json:"started"`
	LastUsed   time.Time `json:"last_used"`
	InFlight   int       `json:"in_flight"`
}

// WithSessions sets the MCP sessions that GET /v1/access lists and
// DELETE /v1/sessions/{id} ends (none without it).
func WithSessions(b SessionBook) Option {
	return func(c *config) error {
		if b == nil {
			return errors.New("WithSessions(nil): no sessions")
		}
		c.sessions = b
		return nil
	}
}

// WithKeys sets the key ring that /v1/keys reads and changes: the one the
// edge verifies keys with, so that a change is seen by its next request.
// Without it (and without WithKeysFile) New opens <data-dir>/keys.json.
func WithKeys(r *keys.Ring) Option {
	return func(c *config) error {
		if r == nil {
			return errors.New("WithKeys(nil): no ring")
		}
		c.ring = r
		return nil
	}
}

// WithKeysFile sets the keys file that /v1/keys opens (default
// <data-dir>/keys.json).
func WithKeysFile(path string) Option {
	return func(c *config) error {
		if path == "" {
			return errors.New(`WithKeysFile(""): no path`)
		}
		c.keysFile = path
		return nil
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("WithLogger(nil): no logger")
		}
		c.log = l
		return nil
	}
}

// WithClock sets the clock of the uptime and of the keys' statuses
// (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("WithClock(nil): no clock")
		}
		c.now = now
		return nil
	}
}

// WithVersion sets the version the status reports (default node.Version).
func WithVersion(v string) Option {
	return func(c *config) error {
		if v == "" {
			return errors.New(`WithVersion(""): empty`)
		}
		c.version = v
		return nil
	}
}

// WithSocket sets the control socket's path (default
// SocketPath(data dir)); "" serves no socket: the Handler alone, for a
// server of the caller's (the dashboard, tests).
func WithSocket(path string) Option {
	return func(c *config) error {
		c.socket = &path
		return nil
	}
}

// New makes the local API of n and serves it on the control socket (see
// Listen for how the socket is made safe). A failed New leaves nothing
// running and no socket behind.
func New(n *node.Node, opts ...Option) (*API, error) {
	if n == nil {
		return nil, errors.New("localapi: no node")
	}
	c := config{log: slog.New(slog.DiscardHandler), now: time.Now, version: node.Version}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, fmt.Errorf("localapi: %w", err)
		}
	}
	ring := c.ring
	if ring == nil {
		var err error
		file := cmp.Or(c.keysFile, filepath.Join(n.DataDir(), keys.FileName))
		if ring, err = keys.Open(file, keys.WithLogger(c.log), keys.WithClock(c.now)); err != nil {
			return nil, fmt.Errorf("localapi: %w", err)
		}
	}
	a := &API{n: n, cfg: c, keys: NewKeys(ring, c.now), streams: make(chan struct{}, maxStreams), done: make(chan struct{})}
	a.handler = a.routes()
	if c.dashAddr != "" {
		var err error
		a.pages = sync.OnceValues(parseTemplates)
		if a.dash, err = startDashboard(a); err != nil {
			return nil, fmt.Errorf("localapi: %w", err)
		}
	}
	socket := SocketPath(n.DataDir())
	if c.socket != nil {
		socket = *c.socket
	}
	if socket == "" {
		return a, nil
	}
	ln, err := Listen(socket, c.log)
	if err != nil {
		if a.dash != nil {
			_ = a.dash.close()
		}
		return nil, fmt.Errorf("localapi: %w", err)
	}
	a.socket = socket
	a.srv = &http.Server{
		Handler: a.handler, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(c.log.Handler(), slog.LevelDebug),
	}
	a.served = make(chan struct{})
	go func() {
		defer close(a.served)
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Warn("local API: serve", "socket", socket, "err", err)
		}
	}()
	c.log.Debug("local API: serving", "socket", socket)
	return a, nil
}

// Handler returns the API's handler (the routes of the package comment).
// It does no authentication: whoever serves it decides who may reach it.
func (a *API) Handler() http.Handler { return a.handler }

// DashboardLink returns the dashboard's login link, token included ("":
// no dashboard). Whoever holds it has the node owner's rights until
// someone logs out.
func (a *API) DashboardLink() string {
	if a.dash == nil {
		return ""
	}
	return a.dash.link()
}

// Socket returns the control socket's path ("" without one).
func (a *API) Socket() string { return a.socket }

// Close stops serving and removes the control socket. It is idempotent:
// a second call returns net.ErrClosed.
func (a *API) Close() error {
	a.closeMu.Lock()
	defer a.closeMu.Unlock()
	if a.closed {
		return net.ErrClosed
	}
	a.closed = true
	close(a.done)
	var err error
	if a.dash != nil {
		err = a.dash.close()
	}
	if a.srv == nil {
		return err
	}
	err = errors.Join(err, a.srv.Close())
	<-a.served
	if rerr := os.Remove(a.socket); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}
