package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/zeebo/blake3"

	"github.com/mcpv2/mcpv2/bench/internal/lean"
	"github.com/mcpv2/mcpv2/transport"
)

// The roles: the baselines, each a child process of the bench (this
// program with roleEnv set). A server role prints one line
//
//	READY {json readyInfo}
//
// on stdout and serves until its stdin closes (the bench closed it, or
// died) or it gets SIGTERM or SIGINT. A sender role does its one transfer
// and exits 0, or non-zero with the reason on stderr. The memory rows'
// baselines are not here but in a lean binary of their own (bench/bare),
// which speaks the same ready line: this program's own pages (it carries
// mcpv2's packages, the MCP go-sdk) would count in its resident memory.

// The ready line's prefix and JSON, and the echo's protocol ID, are the
// lean package's, shared with bench/bare.
const (
	readyPrefix = lean.ReadyPrefix
	echoProto   = lean.EchoProto
)

// copyProto is the protocol ID of the copy baselines' libp2p streams.
const copyProto = "/mcpv2-bench/copy/1.0.0"

// copyBuffer is the write size of the copy baselines: the blob sender's.
const copyBuffer = 256 << 10

// readyInfo is what a server role tells the bench: lean.ReadyInfo, the
// ready line bench/bare prints too.
type readyInfo lean.ReadyInfo

// addrOf returns the first of a libp2p role's addresses that contains
// proto ("/tcp/" or "/quic-v1").
func (r readyInfo) addrOf(proto string) (string, error) {
	a, err := lean.ReadyInfo(r).AddrOf(proto)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errNotReady, err)
	}
	return a, nil
}

// roles maps a role name to its main; args are the child's arguments.
var roles = map[string]func(ctx context.Context, args []string) error{
	"echo":        roleEcho,
	"copyrecv":    roleCopyRecv,
	"copysend":    roleCopySend,
	"copyrecvsha": roleCopyRecvSHA,
	"copysendsha": roleCopySendSHA,
	"copyrecvb3":  roleCopyRecvB3,
	"copysendb3":  roleCopySendB3,
	"tcprecv":     roleTCPRecv,
	"tcpsend":     roleTCPSend,
	"httpecho":    roleHTTPEcho,
	"mcp":         roleMCP,
}

// runRole runs role and returns the process's exit code.
func runRole(role string, args []string) int {
	f, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: unknown %s %q\n", roleEnv, role)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := f(ctx, args); err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", role, err)
		return 1
	}
	return 0
}

// serveUntilDone prints the ready line and blocks until stdin closes or ctx
// ends.
func serveUntilDone(ctx context.Context, info readyInfo) error {
	if err := lean.PrintReady(os.Stdout, lean.ReadyInfo(info)); err != nil {
		return err
	}
	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-stdinClosed:
	case <-ctx.Done():
	}
	return nil
}

// bareHost is the baselines' libp2p host (lean.NewHost, also bench/bare's),
// listening on loopback TCP and QUIC-v1 when listen is set, else nowhere.
func bareHost(listen bool) (host.Host, error) { return lean.NewHost(listen) }

// hostInfo is a listening host's ready line.
func hostInfo(h host.Host) readyInfo { return readyInfo(lean.HostInfo(h)) }

// dialAddr parses a full multiaddr and connects h to it.
func dialAddr(ctx context.Context, h host.Host, addr string) (peer.ID, error) {
	m, err := ma.NewMultiaddr(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	ai, err := peer.AddrInfoFromP2pAddr(m)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	if err := h.Connect(ctx, *ai); err != nil {
		return "", fmt.Errorf("connect to %s: %w", addr, err)
	}
	return ai.ID, nil
}

// roleEcho is the raw libp2p stream echo.
func roleEcho(ctx context.Context, _ []string) error {
	h, err := bareHost(true)
	if err != nil {
		return err
	}
	defer h.Close()
	h.SetStreamHandler(echoProto, lean.EchoHandler)
	return serveUntilDone(ctx, hostInfo(h))
}

// roleCopyRecv receives raw libp2p stream copies into files in args[0]
// (recv-1, recv-2, …): every byte of a stream goes to its file, which is
// fsynced; then one byte goes back as the ack.
func roleCopyRecv(ctx context.Context, args []string) error {
	return copyRecv(ctx, args, nil)
}

// roleCopyRecvSHA is roleCopyRecv hashing (SHA-256) every byte it writes,
// the work a blob receiver must do on top of the copy.
func roleCopyRecvSHA(ctx context.Context, args []string) error {
	return copyRecv(ctx, args, sha256.New)
}

// roleCopyRecvB3 is roleCopyRecv hashing by BLAKE3 (blob 1.2.0's hash).
func roleCopyRecvB3(ctx context.Context, args []string) error {
	return copyRecv(ctx, args, newBLAKE3)
}

// newBLAKE3 returns a BLAKE3-256 hash.Hash.
func newBLAKE3() hash.Hash { return blake3.New() }

// copyRecv serves the copy receivers; newHash (when set) adds a hash of
// the bytes.
func copyRecv(ctx context.Context, args []string, newHash func() hash.Hash) error {
	if len(args) != 1 {
		return errors.New("usage: copyrecv DIR")
	}
	h, err := bareHost(true)
	if err != nil {
		return err
	}
	defer h.Close()
	var n atomic.Int64
	h.SetStreamHandler(copyProto, func(s network.Stream) {
		path := filepath.Join(args[0], fmt.Sprintf("recv-%d", n.Add(1)))
		if err := receiveTo(path, s, newHash); err != nil {
			fmt.Fprintln(os.Stderr, "copyrecv:", err)
			_ = s.Reset()
			return
		}
		_ = s.Close()
	})
	return serveUntilDone(ctx, hostInfo(h))
}

// receiveTo copies rw to a new file at path, fsyncs and closes it, then
// writes the one-byte ack to rw. Like the node's blob server it fills a
// copyBuffer before each write to the file.
func receiveTo(path string, rw io.ReadWriter, newHash func() hash.Hash) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var sum hash.Hash
	if newHash != nil {
		sum = newHash()
	}
	buf := make([]byte, copyBuffer)
	for {
		m, rerr := io.ReadFull(rw, buf)
		if m > 0 {
			if sum != nil {
				sum.Write(buf[:m])
			}
			if _, err = f.Write(buf[:m]); err != nil {
				break
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
				err = rerr
			}
			break
		}
	}
	return finishReceive(f, err, rw)
}

// finishReceive ends a receiver's copy into f after err (nil: every byte
// written): it fsyncs and closes f and, when all went well, writes the
// one-byte ack to ack.
func finishReceive(f *os.File, err error, ack io.Writer) error {
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	_, err = ack.Write([]byte{1})
	return err
}

// roleCopySend sends the file args[0] to the copyrecv host args[1] on a
// fresh bare host: one stream, copyBuffer writes, close, wait for the ack.
func roleCopySend(ctx context.Context, args []string) error {
	return copySend(ctx, args, nil)
}

// roleCopySendSHA is roleCopySend hashing (SHA-256) every byte it sends,
// the work a blob sender must do on top of the copy.
func roleCopySendSHA(ctx context.Context, args []string) error {
	return copySend(ctx, args, sha256.New)
}

// roleCopySendB3 is roleCopySend hashing by BLAKE3 (blob 1.2.0's hash).
func roleCopySendB3(ctx context.Context, args []string) error {
	return copySend(ctx, args, newBLAKE3)
}

// copySend runs the copy senders; newHash (when set) adds a hash of the
// bytes.
func copySend(ctx context.Context, args []string, newHash func() hash.Hash) error {
	if len(args) != 2 {
		return errors.New("usage: copysend FILE ADDR")
	}
	file, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer file.Close()
	var f io.Reader = file
	if newHash != nil {
		f = io.TeeReader(file, newHash())
	}
	h, err := bareHost(false)
	if err != nil {
		return err
	}
	defer h.Close()
	pid, err := dialAddr(ctx, h, args[1])
	if err != nil {
		return err
	}
	s, err := h.NewStream(ctx, pid, copyProto)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(struct{ io.Writer }{s}, struct{ io.Reader }{f}, make([]byte, copyBuffer)); err != nil {
		_ = s.Reset()
		return fmt.Errorf("copy: %w", err)
	}
	if err := s.CloseWrite(); err != nil {
		_ = s.Reset()
		return err
	}
	return readAck(s)
}

// readAck reads the receiver's one-byte ack.
func readAck(r io.Reader) error {
	var ack [1]byte
	if _, err := io.ReadFull(r, ack[:]); err != nil {
		return fmt.Errorf("no ack from the receiver: %w", err)
	}
	return nil
}

// roleTCPRecv is roleCopyRecv on a plain TCP socket, letting the kernel
// splice the bytes into the file: the floor under everything.
func roleTCPRecv(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: tcprecv DIR")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn, n int) {
				defer c.Close()
				if err := receivePlain(filepath.Join(args[0], fmt.Sprintf("recv-%d", n)), c); err != nil {
					fmt.Fprintln(os.Stderr, "tcprecv:", err)
				}
			}(c, n)
		}
	}()
	return serveUntilDone(ctx, readyInfo{Addr: ln.Addr().String()})
}

// receivePlain copies c to a new file at path (the kernel's fastest way),
// fsyncs it and acks.
func receivePlain(path string, c net.Conn) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, c)
	return finishReceive(f, err, c)
}

// roleTCPSend sends args[0] to the tcprecv at args[1] (sendfile), then
// waits for the ack.
func roleTCPSend(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return errors.New("usage: tcpsend FILE HOST:PORT")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", args[1])
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := io.Copy(c, f); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	return readAck(c)
}

// serveHTTP serves h on a loopback port until the role ends.
func serveHTTP(ctx context.Context, h http.Handler) error {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if err := serveUntilDone(ctx, readyInfo{Addr: ln.Addr().String()}); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// roleHTTPEcho is the bare net/http JSON echo: decode the body into a map,
// answer {"jsonrpc","id","result"} with the params as the result.
func roleHTTPEcho(ctx context.Context, _ []string) error {
	return serveHTTP(ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if err := json.NewDecoder(io.LimitReader(r.Body, transport.DefaultMaxMessage)).Decode(&v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": v["id"], "result": v["params"]})
	}))
}

// mcpPingArgs are the MCP ping tool's arguments.
type mcpPingArgs struct {
	Payload string `json:"payload" jsonschema:"echoed back"`
}

// roleMCP is the MCP go-sdk's streamable HTTP server, stateless with JSON
// answers, with one trivial tool: ping, returning its payload as text.
func roleMCP(ctx context.Context, _ []string) error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpv2-bench", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Description: "Echo the payload."},
		func(_ context.Context, _ *mcp.CallToolRequest, in mcpPingArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Payload}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return serveHTTP(ctx, h)
}
