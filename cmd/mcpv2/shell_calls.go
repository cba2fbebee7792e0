package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

const (
	// dialTimeout bounds a TCP connect to an edge, so that an address where
	// packets vanish fails in seconds, not minutes.
	dialTimeout = 5 * time.Second
	// connectTimeout bounds ConnectTo's reachability check (health on the
	// edge, the libp2p connect on the mesh).
	connectTimeout = 15 * time.Second
)

// refusalCounter is the transport of the shell's edge client: it counts the
// calls that an edge answered 401, so that the shell can say when
// edge.Client refreshed a stale session and retried.
type refusalCounter struct {
	base *http.Transport
	n    atomic.Int64
}

// RoundTrip sends req through the base transport and counts a 401 to a call.
func (r *refusalCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && req.Method == http.MethodPost {
		r.n.Add(1)
	}
	return resp, err
}

// CloseIdleConnections closes the base transport's idle connections.
func (r *refusalCounter) CloseIdleConnections() { r.base.CloseIdleConnections() }

// newShellHTTPClient returns the HTTP client of the shell's edge clients:
// its dials time out after dialTimeout and it does not follow redirects;
// and its 401 counter.
func newShellHTTPClient() (*http.Client, *refusalCounter) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = 10 * time.Second
	tr.MaxIdleConnsPerHost = 16
	rc := &refusalCounter{base: tr}
	hc := &http.Client{Transport: rc, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return hc, rc
}

// edgeClientFor returns the shell's edge client that holds secret (SPEC §6:
// a secret holder mints its own sessions), making it at the first use.
func (sh *shell) edgeClientFor(secret string) *edge.Client {
	ec := sh.edgeClients[secret]
	if ec == nil {
		var err error
		if ec, err = edge.NewClient(edge.WithHTTPClient(sh.edgeHTTP), edge.WithSecret([]byte(secret))); err != nil {
			// Unreachable: newShell sets edgeHTTP before the first use,
			// and WithSecret takes any secret.
			panic(fmt.Sprintf("shell: edge client: %v", err))
		}
		sh.edgeClients[secret] = ec
	}
	return ec
}

// edgeClient returns the edge client for addr: a peer this shell started
// is called as a secret holder, with its own secret; any other edge with an
// anonymous session from that edge, unless the address carries a sessionId
// (a demo session address carries a secret holder's).
func (sh *shell) edgeClient(addr protocol.Address) *edge.Client {
	secret := ""
	for _, p := range sh.peers {
		if p.port == addr.Port { // the shell's peers run here, one per port, whatever host name reaches them
			secret = p.secret
		}
	}
	return sh.edgeClientFor(secret)
}

// meshUnreachableError is a failure to connect to a mesh peer.
type meshUnreachableError struct{ err error }

func (e *meshUnreachableError) Error() string { return e.err.Error() }
func (e *meshUnreachableError) Unwrap() error { return e.err }

// meshClient returns the mesh client for addr, opening the shell's dialer
// (its libp2p host, and DHT with --bootstrap) at the first use. A peer this
// shell started is called with its own secret, and reached by its PeerID
// alone through the addresses of its banner; any other peer with the
// shell's secret. The clients are the dialer's (Dialer.NewClient), one per
// secret.
func (sh *shell) meshClient(addr protocol.Address) (*node.Client, error) {
	if sh.mesh == nil {
		s, err := sh.cfg.OpenMesh()
		if err != nil {
			return nil, fmt.Errorf("open this shell's libp2p host: %w", err)
		}
		sh.mesh = s
	}
	secret := sh.meshSecret(addr)
	for _, p := range sh.peers {
		if p.peerID != addr.PeerID {
			continue
		}
		if pid, err := peer.Decode(p.peerID); err == nil {
			for _, s := range p.p2p {
				if m, err := ma.NewMultiaddr(s); err == nil {
					if ai, err := peer.AddrInfoFromP2pAddr(m); err == nil && ai.ID == pid {
						sh.mesh.Host().Peerstore().AddAddrs(pid, ai.Addrs, peerstore.AddressTTL)
					}
				}
			}
		}
	}
	cl := sh.meshClients[secret]
	if cl == nil {
		var err error
		if cl, err = sh.mesh.NewClient(node.WithSecret([]byte(secret)), node.WithMaxMessage(sh.cfg.MaxMessage)); err != nil {
			return nil, err
		}
		sh.meshClients[secret] = cl
	}
	return cl, nil
}

// meshSecret is the secret that the shell calls the mesh peer at addr with:
// a peer this shell started, its own; any other, the shell's --secret, or
// none when the shell made its secret up (no other peer knows it).
func (sh *shell) meshSecret(addr protocol.Address) string {
	for _, p := range sh.peers {
		if p.peerID == addr.PeerID {
			return p.secret
		}
	}
	if sh.secretGenerated {
		return ""
	}
	return sh.cfg.Secret
}

// secretHint says that the secrets differ when a mesh peer refused the
// session that the shell's secret minted (-32001), or a skill to a caller
// that presented one (-32009); "" otherwise.
func (sh *shell) secretHint(err error, addr protocol.Address) string {
	var pe *protocol.Error
	if addr.Kind != protocol.AddrMesh || !errors.As(err, &pe) || sh.meshSecret(addr) == "" ||
		(pe.Code != protocol.CodeInvalidSession && pe.Code != protocol.CodeNotPermitted) {
		return ""
	}
	return "The secrets differ: this shell called with its --secret and the peer refused it (the peer runs with another --secret, or none). " +
		"Start the shell with the peer's secret (mcpv2 shell --secret S), or without --secret to call it as a plain peer: " +
		"it may then run ping and what its policy.json grants this shell's PeerID (mcpv2 id --data-dir " + sh.cfg.DataDir + " prints it)."
}

// call runs skill on addr, over the mesh or through the edge, under the
// shell's call timeout. refreshed reports that the edge refused the session
// first (expired, or minted under another secret) and the call succeeded
// with a fresh one.
func (sh *shell) call(ctx context.Context, addr protocol.Address, skill string, args any, provider string) (res json.RawMessage, refreshed bool, err error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, sh.cfg.Timeout)
	defer cancel()
	if addr.Kind == protocol.AddrHTTP {
		before := sh.refused.n.Load()
		res, err = sh.edgeClient(addr).CallSkill(ctx, addr, skill, raw, protocol.CallOptions{Provider: provider})
		return res, err == nil && sh.refused.n.Load() > before, err
	}
	cl, err := sh.meshClient(addr)
	if err != nil {
		return nil, false, err
	}
	cctx, ccancel := context.WithTimeout(ctx, connectTimeout)
	_, err = cl.Connect(cctx, addr)
	ccancel()
	if err != nil {
		return nil, false, &meshUnreachableError{err}
	}
	res, err = cl.CallSkill(ctx, addr, skill, raw, protocol.CallOptions{Provider: provider})
	return res, false, err
}

// staleNote is printed when a call went through only with a fresh session.
const staleNote = "note: the peer refused the session (expired, or issued under another secret); fetched a fresh one and retried"

// describeCallErr says what went wrong with a call to addr, one distinct
// message for each kind of failure; what the peer said is one escaped line
// (printableLine).
func describeCallErr(err error, addr protocol.Address) string {
	target := addr.String()
	if addr.Kind == protocol.AddrHTTP {
		target = net.JoinHostPort(addr.Host, strconv.Itoa(addr.Port))
	}
	var (
		pe *protocol.Error
		he *edge.HTTPError
		mu *meshUnreachableError
	)
	switch {
	case errors.Is(err, protocol.ErrBadAddress):
		return err.Error()
	case errors.Is(err, edge.ErrUnreachable):
		reason := err.Error()
		if _, r, ok := strings.Cut(reason, "unreachable: "); ok {
			reason = r
		}
		return fmt.Sprintf("unreachable: nothing answers at %s: %s", target, reason)
	case errors.As(err, &mu):
		return fmt.Sprintf("unreachable: cannot connect to %s over the mesh: %v", addr.PeerID, mu.err)
	case errors.Is(err, edge.ErrSessionRefused):
		if errors.As(err, &he) {
			return fmt.Sprintf("session refused by %s: %s", target, printableLine(strings.TrimPrefix(he.Error(), "edge: ")))
		}
		return fmt.Sprintf("session refused by %s: %v", target, err)
	case errors.As(err, &pe):
		return fmt.Sprintf("call refused by %s: error %d: %s", target, pe.Code, printableLine(pe.Message))
	case errors.As(err, &he):
		return fmt.Sprintf("call refused by %s: HTTP %d: %s", target, he.StatusCode, printableLine(he.Error()))
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("timed out: %s did not answer in time", target)
	case errors.Is(err, context.Canceled):
		return "interrupted"
	}
	return fmt.Sprintf("call to %s failed: %v", target, err)
}

// resolveTarget is the one address rule of the shell's commands, so that
// StopTo, ConnectTo, PingTo, SentTo and PayTo read an address alike: a
// bare port names this machine's edge on that port (the peer this shell
// started there, at the host its edge listens on, or else 127.0.0.1), and
// anything else is an address of protocol.ParseAddress (an edge address, a
// multiaddr ending in /p2p/<PeerID>, mcpv2://<PeerID> or a PeerID). Its
// errors begin with cmd.
func (sh *shell) resolveTarget(cmd, s string) (protocol.Address, error) {
	if isPortWord(s) {
		port, err := strconv.Atoi(s)
		if err != nil || port < 1 || port > 65535 {
			return protocol.Address{}, fmt.Errorf("%s: %s is not a TCP port (1-65535)", cmd, s)
		}
		host := "127.0.0.1"
		for _, p := range sh.peers {
			if p.port == port && p.bindHost != "" {
				host = p.bindHost
				break
			}
		}
		a, err := protocol.ParseAddress("mcpv2://" + net.JoinHostPort(host, s) + "/mcpv2")
		if err != nil {
			return a, fmt.Errorf("%s: %w", cmd, err)
		}
		return a, nil
	}
	a, err := protocol.ParseAddress(s)
	if err != nil {
		return a, fmt.Errorf("%s: %w (or a bare port, for an edge on this machine)", cmd, err)
	}
	return a, nil
}

// isPortWord reports whether s is all digits: a port, for resolveTarget.
func isPortWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// connectTo checks that a peer answers: the edge's health (or the libp2p
// connection), then an authenticated ping.
func (sh *shell) connectTo(ctx context.Context, a shellArgs) error {
	if len(a.pos) != 1 {
		return errors.New("usage: ConnectTo <address>")
	}
	addr, err := sh.resolveTarget("ConnectTo", a.pos[0])
	if err != nil {
		return err
	}
	if addr.Kind == protocol.AddrHTTP {
		hctx, cancel := context.WithTimeout(ctx, connectTimeout)
		base := addr
		base.SessionID = ""
		h, err := sh.edge.Health(hctx, base)
		cancel()
		if err != nil {
			if errors.Is(err, edge.ErrUnreachable) || errors.Is(err, context.DeadlineExceeded) {
				return errors.New(describeCallErr(err, addr))
			}
			return fmt.Errorf("not an mcpv2 edge at %s:%d: %v", addr.Host, addr.Port, err)
		}
		mode := "stateless"
		if h.LLMMode {
			mode = "LLM mode"
		}
		fmt.Fprintf(sh.out, "Reachable: %s is an mcpv2 edge (peer %s, version %s, %s).\n", base, printableLine(h.PeerID), printableLine(h.Version), mode)
	}
	start := time.Now()
	res, refreshed, err := sh.call(ctx, addr, "ping", map[string]any{"payload": "ConnectTo"}, "")
	rtt := time.Since(start)
	if err != nil {
		if hint := sh.secretHint(err, addr); hint != "" {
			return fmt.Errorf("%s\n%s", describeCallErr(err, addr), hint)
		}
		return errors.New(describeCallErr(err, addr))
	}
	var pong struct {
		PeerID string `json:"peer_id"`
	}
	_ = json.Unmarshal(res, &pong)
	if addr.Kind == protocol.AddrHTTP {
		if refreshed {
			if addr.SessionID != "" {
				fmt.Fprintln(sh.out, "Stale session: the peer refused the sessionId in the address (expired, or issued under another secret); fetched a fresh session and retried once.")
			} else {
				fmt.Fprintln(sh.out, "Stale session: the peer refused the cached session; fetched a fresh one and retried once.")
			}
		}
		fmt.Fprintf(sh.out, "Connected: session accepted, authenticated ping in %.2f ms.\n", ms(rtt))
		return nil
	}
	via := ""
	if pid, err := peer.Decode(pong.PeerID); err == nil {
		if conns := sh.mesh.Host().Network().ConnsToPeer(pid); len(conns) > 0 {
			via = " via " + conns[0].RemoteMultiaddr().String()
		}
	}
	fmt.Fprintf(sh.out, "Connected over the mesh to %s%s: ping in %.2f ms.\n", printableLine(pong.PeerID), via, ms(rtt))
	return nil
}

// pingTo pings a peer once and prints the round-trip time.
func (sh *shell) pingTo(ctx context.Context, a shellArgs) error {
	if len(a.pos) != 1 {
		return errors.New("usage: PingTo <address>")
	}
	addr, err := sh.resolveTarget("PingTo", a.pos[0])
	if err != nil {
		return err
	}
	start := time.Now()
	res, refreshed, err := sh.call(ctx, addr, "ping", map[string]any{"payload": "PingTo"}, "")
	rtt := time.Since(start)
	if err != nil {
		return errors.New(describeCallErr(err, addr))
	}
	if refreshed {
		fmt.Fprintln(sh.out, staleNote)
	}
	var pong struct {
		PeerID string `json:"peer_id"`
	}
	_ = json.Unmarshal(res, &pong)
	fmt.Fprintf(sh.out, "pong from %s in %.2f ms\n", printableLine(pong.PeerID), ms(rtt))
	return nil
}

// sentTo asks a peer (ask), or uploads a file when the first argument names
// one (upload_file).
func (sh *shell) sentTo(ctx context.Context, a shellArgs) error {
	if len(a.pos) != 2 {
		hint := ""
		if len(a.pos) > 2 {
			hint = "; put a prompt of several words in quotes"
		}
		return fmt.Errorf("usage: SentTo \"prompt\" <address> [--provider P] | SentTo FILE <address> (got %d arguments%s)", len(a.pos), hint)
	}
	what := a.pos[0]
	if rest, ok := strings.CutPrefix(what, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			if _, err := os.Stat(filepath.Join(home, rest)); err == nil {
				what = filepath.Join(home, rest)
			}
		}
	}
	addr, err := sh.resolveTarget("SentTo", a.pos[1])
	if err != nil {
		return err
	}
	if fi, err := os.Stat(what); err == nil && !fi.IsDir() {
		return sh.upload(ctx, what, addr)
	} else if err == nil {
		return fmt.Errorf("SentTo: %s is a directory; send a file or a prompt", what)
	}
	if what == "" || strings.TrimSpace(what) == "" {
		return errors.New("SentTo: the prompt is empty")
	}
	if !strings.ContainsAny(what, " \t\n") && strings.ContainsAny(what, "./") {
		fmt.Fprintf(sh.out, "(no file named %q here: sending it as a prompt)\n", what)
	}
	key := peerKey(addr)
	if a.opts["new"] == "true" {
		delete(sh.convs, key)
	}
	args := map[string]any{"query": what}
	if conv := sh.convs[key]; conv != "" {
		args["conversation_id"] = conv
	}
	res, refreshed, err := sh.call(ctx, addr, "ask", args, a.opts["provider"])
	if err != nil {
		return errors.New(describeCallErr(err, addr))
	}
	if refreshed {
		fmt.Fprintln(sh.out, staleNote)
	}
	var r struct {
		Response       *string `json:"response"`
		Provider       string  `json:"provider"`
		Model          string  `json:"model"`
		Turn           int     `json:"turn"`
		ConversationID string  `json:"conversation_id"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Response == nil {
		// A custom ask, or one shaped for a provider: show it as it came,
		// compacted (no carriage return between its tokens) and escaped.
		var buf bytes.Buffer
		if err := json.Compact(&buf, res); err != nil {
			return fmt.Errorf("SentTo: the peer answered invalid JSON: %w", err)
		}
		fmt.Fprintf(sh.out, "%s\n", printableJSON(buf.Bytes()))
		return nil
	}
	if r.ConversationID != "" {
		sh.convs[key] = r.ConversationID
	}
	fmt.Fprintln(sh.out, printable(*r.Response))
	meta := []string{r.Provider}
	if r.Model != "" {
		meta[0] += "/" + r.Model
	}
	if r.ConversationID != "" {
		meta = append(meta, fmt.Sprintf("turn %d of conversation %s", r.Turn, r.ConversationID))
	}
	fmt.Fprintf(sh.out, "  (%s)\n", printableLine(strings.Join(meta, ", ")))
	return nil
}

// peerKey names a peer for the conversation table.
func peerKey(a protocol.Address) string {
	if a.Kind == protocol.AddrMesh {
		return "mesh:" + a.PeerID
	}
	return "edge:" + net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
}

// upload sends the file at path with upload_file: UTF-8 text as it is,
// anything else in base64.
func (sh *shell) upload(ctx context.Context, path string, addr protocol.Address) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("SentTo: %w", err)
	}
	// The content travels inside one JSON message; base64 grows it by a third.
	if limit := sh.cfg.MaxMessage*3/4 - 4096; len(data) > limit {
		return fmt.Errorf("SentTo: %s has %d bytes, more than one message carries (%d; --max-message); `mcpv2 send FILE ADDR` streams large files over the mesh", path, len(data), limit)
	}
	args := map[string]any{"filename": filepath.Base(path)}
	if utf8.Valid(data) {
		args["content"], args["encoding"] = string(data), "utf-8"
	} else {
		args["content"], args["encoding"] = base64.StdEncoding.EncodeToString(data), "base64"
	}
	res, refreshed, err := sh.call(ctx, addr, "upload_file", args, "")
	if err != nil {
		return errors.New(describeCallErr(err, addr))
	}
	if refreshed {
		fmt.Fprintln(sh.out, staleNote)
	}
	var r struct {
		Filename string `json:"filename"`
		Size     int64  `json:"size"`
		SHA256   string `json:"sha256"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return fmt.Errorf("SentTo: the peer's answer is not an upload_file result: %.200s", res)
	}
	sum := sha256.Sum256(data)
	check := "matches the local file"
	if hex.EncodeToString(sum[:]) != r.SHA256 || r.Size != int64(len(data)) {
		check = fmt.Sprintf("DOES NOT match the local file (%d bytes, sha256 %x)", len(data), sum)
	}
	fmt.Fprintf(sh.out, "Sent %s to %s: stored as %s, %d bytes, sha256 %s (%s)\n", printableLine(path), addr, printableLine(r.Filename), r.Size, printableLine(r.SHA256), check)
	return nil
}

// payTo sends a payment request with the pay skill.
func (sh *shell) payTo(ctx context.Context, a shellArgs) error {
	if len(a.pos) != 2 {
		return errors.New("usage: PayTo <amount> <address> [--currency C] [--memo M]")
	}
	amount, err := strconv.ParseFloat(a.pos[0], 64)
	if err != nil || math.IsNaN(amount) || math.IsInf(amount, 0) || amount <= 0 {
		return fmt.Errorf("PayTo: the amount must be a positive number, not %q", a.pos[0])
	}
	addr, err := sh.resolveTarget("PayTo", a.pos[1])
	if err != nil {
		return err
	}
	args := map[string]any{"amount": amount}
	if c := a.opts["currency"]; c != "" {
		args["currency"] = c
	}
	if m := a.opts["memo"]; m != "" {
		args["memo"] = m
	}
	res, refreshed, err := sh.call(ctx, addr, "pay", args, "")
	if err != nil {
		return errors.New(describeCallErr(err, addr))
	}
	if refreshed {
		fmt.Fprintln(sh.out, staleNote)
	}
	var r struct {
		Status        string  `json:"status"`
		TransactionID string  `json:"transaction_id"`
		Stub          bool    `json:"stub"`
		Amount        float64 `json:"amount"`
		Currency      string  `json:"currency"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Status == "" {
		return fmt.Errorf("PayTo: the peer's answer is not a pay result: %.200s", res)
	}
	stub := ""
	if r.Stub {
		stub = " (a stub: nothing moved)"
	}
	fmt.Fprintf(sh.out, "Payment of %s %s to %s: %s, transaction %s%s\n",
		strconv.FormatFloat(r.Amount, 'f', -1, 64), printableLine(r.Currency), addr, printableLine(r.Status), printableLine(r.TransactionID), stub)
	return nil
}
