package localapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/mcpv2/mcpv2/node/agents"
	"github.com/mcpv2/mcpv2/node/keys"
)

// ErrNoNode is the error of Dial and of a Client's calls when no node
// serves the data dir's control socket.
var ErrNoNode = errors.New("no node running")

// ErrUntrusted is the error of Dial and of a Client's calls when the
// control socket, or the process that serves it, belongs to another user
// than this process's, root and the data dir's owner: its answers (a
// key's secret, a revoke's success) could be anyone's, so the client does
// not read them.
var ErrUntrusted = errors.New("the control socket is another user's")

// maxAnswer caps an answer's body.
const maxAnswer = 16 << 20

// Client calls the local API of the node of a data dir over its control
// socket. It trusts only a node of this user, root or the data dir's
// owner (see ErrUntrusted). Its methods are safe for concurrent use.
type Client struct {
	dataDir, socket string
	hc              *http.Client
	tr              *http.Transport

	closeMu sync.Mutex
	closed  bool
}

// NewClient returns a client of the node of dataDir (its socket
// SocketPath(dataDir)); it connects at the first call.
func NewClient(dataDir string) *Client {
	socket := SocketPath(dataDir)
	tr := &http.Transport{
		DialContext:  func(ctx context.Context, _, _ string) (net.Conn, error) { return dialNode(ctx, socket) },
		MaxIdleConns: 2, DisableCompression: true,
	}
	return &Client{dataDir: dataDir, socket: socket, tr: tr, hc: &http.Client{Transport: tr}}
}

// Dial returns a client of the node of dataDir once a connection to its
// control socket succeeded: an error wrapping ErrNoNode, which says how to
// start one, when no node runs there.
func Dial(ctx context.Context, dataDir string) (*Client, error) {
	c := NewClient(dataDir)
	conn, err := dialNode(ctx, c.socket)
	if err != nil {
		return nil, c.dialError(err)
	}
	conn.Close()
	return c, nil
}

// dialNode connects to the control socket at path and returns the
// connection once a trusted user's node is at the other end: the socket
// file must belong to a trusted user, and (on Linux) so must the process
// that listens on it (SO_PEERCRED). Trusted are this user, root, and the
// owner of the socket's directory (the data dir) when no one else may
// write there: the node of a data dir is its owner's, as root's mcpv2
// status reaches a systemd DynamicUser's node. Else the error wraps
// ErrUntrusted.
func dialNode(ctx context.Context, path string) (net.Conn, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "unix", Err: err}
	}
	if fi.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("%w: it is not a socket (%v)", ErrUntrusted, fi.Mode().Type())
	}
	euid, dirOwner := os.Geteuid(), -1
	if dfi, err := os.Stat(filepath.Dir(path)); err == nil && dfi.Mode().Perm()&0o022 == 0 {
		dirOwner, _ = owner(dfi)
	}
	trusted := func(uid int) bool { return uid == euid || uid == 0 || uid == dirOwner }
	who := fmt.Sprintf("this user (uid %d) or root", euid)
	if dirOwner >= 0 && dirOwner != euid && dirOwner != 0 {
		who = fmt.Sprintf("this user (uid %d), root or the data dir's owner (uid %d)", euid, dirOwner)
	}
	if uid, ok := owner(fi); ok && !trusted(uid) {
		return nil, fmt.Errorf("%w: it belongs to uid %d, not to %s", ErrUntrusted, uid, who)
	}
	conn, err := dialSocket(ctx, path)
	if err != nil {
		return nil, err
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("%w: a %T, not a unix connection", ErrUntrusted, conn)
	}
	uid, err := peerUID(uc)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: the user of the process that serves it is unknown: %v", ErrUntrusted, err)
	}
	if uid >= 0 && !trusted(uid) {
		conn.Close()
		return nil, fmt.Errorf("%w: a process of uid %d serves it, not one of %s", ErrUntrusted, uid, who)
	}
	return conn, nil
}

// dialError is err of a dial to the socket, as ErrNoNode when no node
// listens there.
func (c *Client) dialError(err error) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w in %s (start one with mcpv2 node --data-dir %s)", ErrNoNode, c.dataDir, c.dataDir)
	}
	return fmt.Errorf("local API %s: %w", c.socket, err)
}

// Close closes the client's idle connections. A second call returns
// net.ErrClosed.
func (c *Client) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.closed = true
	c.tr.CloseIdleConnections()
	return nil
}

// Status is GET /v1/status.
func (c *Client) Status(ctx context.Context) (*StatusResponse, error) {
	var out StatusResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/status", nil, &out)
}

// Link is GET /v1/ui/link: the dashboard's login link.
func (c *Client) Link(ctx context.Context) (*LinkResponse, error) {
	var out LinkResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/ui/link", nil, &out)
}

// Peers is GET /v1/peers.
func (c *Client) Peers(ctx context.Context) (*PeersResponse, error) {
	var out PeersResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/peers", nil, &out)
}

// ID is GET /v1/id.
func (c *Client) ID(ctx context.Context) (*IDResponse, error) {
	var out IDResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/id", nil, &out)
}

// Keys is GET /v1/keys.
func (c *Client) Keys(ctx context.Context) (*KeysResponse, error) {
	var out KeysResponse
	return &out, c.do(ctx, http.MethodGet, "/v1/keys", nil, &out)
}

// AddKey is POST /v1/keys. The node's key ring refusals come back
// wrapping the keys package's errors (keys.ErrNameInUse…).
func (c *Client) AddKey(ctx context.Context, req AddKeyRequest) (*AddKeyResponse, error) {
	var out AddKeyResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/keys", req, &out)
}

// RevokeKey is DELETE /v1/keys/{name}.
func (c *Client) RevokeKey(ctx context.Context, name string) (*RevokeKeyResponse, error) {
	var out RevokeKeyResponse
	return &out, c.do(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(name), nil, &out)
}

// do sends a request with body in (nil: none) and decodes the answer
// into out, or its error.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://mcpv2-local"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, ErrUntrusted) {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return fmt.Errorf("local API %s: %w", c.socket, err)
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return c.dialError(err)
		}
		return fmt.Errorf("local API %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("local API %s %s: read the answer: %w", method, path, err)
	}
	if len(b) > maxAnswer {
		return fmt.Errorf("local API %s %s: the answer is over %d bytes", method, path, maxAnswer)
	}
	if resp.StatusCode >= 300 {
		var e ErrorResponse
		if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
			return fmt.Errorf("local API %s %s: %s", method, path, resp.Status)
		}
		if sentinel := codeErrors[e.Code]; sentinel != nil {
			return &apiError{msg: e.Error, is: sentinel}
		}
		return errors.New(e.Error)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("local API %s %s: the answer is not what was asked for: %w", method, path, err)
	}
	return nil
}

// codeErrors are the error values behind an ErrorResponse's code.
var codeErrors = map[string]error{
	CodeNameInUse: keys.ErrNameInUse, CodeNoKey: keys.ErrNoKey,
	CodeAlreadyRevoked: keys.ErrAlreadyRevoked, CodeLocked: keys.ErrLocked,
	CodeNoAgent: agents.ErrNoAgent,
}

// apiError is an error of the server, with its text as the server wrote
// it, that errors.Is matches to its sentinel.
type apiError struct {
	msg string
	is  error
}

func (e *apiError) Error() string        { return e.msg }
func (e *apiError) Is(target error) bool { return target == e.is }
