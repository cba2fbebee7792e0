package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// The methods below are what the HTTP edge and the other faces need from a
// node (their Backend interfaces); they speak only protocol types.

// PeerID returns the node's PeerID as a string.
func (n *Node) PeerID() string { return n.host.ID().String() }

// Audit writes one audit line for a request a face refused before it reached
// Handle (bad session, rate limit, body too large), with the trace and span
// ids of ctx's span (the edge's span of the request).
func (n *Node) Audit(ctx context.Context, c protocol.Caller, method string, perr *protocol.Error, start time.Time) {
	n.audit(ctx, c, method, "", perr, start)
}

// Forward sends a raw slot or batch message from c to the mesh peer peerID
// (the edge's gateway) and returns its raw answer, nil when the message
// holds only notifications. It forwards with c's own grants (SPEC §6): a
// tools/call slot that c may not run here is answered -32009 by this node,
// with an audit line, and never leaves it, and so is a slot that carries a
// context.session of its own (only this node adds one). The node's mesh
// session, minted for peerID alone, goes only with a secret holder's
// slots; anyone else's are marked context.forwarded, and the peer runs
// them as a caller forwarded by this node ("via:<PeerID>" in its policy),
// never with this node's own grants. Each forwarded slot gets a wire id
// unique to this node and the traceparent of ctx's span (the peer's span
// of the call is its child), and the answer carries the caller's ids.
func (n *Node) Forward(ctx context.Context, c Caller, peerID string, msg []byte) ([]byte, error) {
	start := time.Now()
	pid, err := peer.Decode(peerID)
	if err != nil {
		return nil, fmt.Errorf("node: forward: %w %q: %v", protocol.ErrBadAddress, peerID, err)
	}
	req, perr := protocol.ParseRequest(msg)
	if perr != nil {
		return nil, perr
	}
	raws := []json.RawMessage{msg}
	if req.IsBatch {
		if err := json.Unmarshal(msg, &raws); err != nil || len(raws) != len(req.Slots) {
			return nil, protocol.Errorf(protocol.CodeParseError, "parse error: the batch could not be split")
		}
	}
	traceparent := Traceparent(ctx) // the caller's span is the parent of the peer's
	session, forwarded := "", c.Kind.String()
	if c.Kind == protocol.CallerSecretHolder {
		session, forwarded = n.client.meshSession(pid, protocol.PurposeRPC), ""
	}
	local := make([]*protocol.Response, len(req.Slots)) // answered here
	remote := make([]bool, len(req.Slots))              // forwarded, an answer expected
	refused := make([]bool, len(req.Slots))             // refused here (its audit line counts it)
	var fwd, orig, want []json.RawMessage
	for i := range req.Slots {
		s := &req.Slots[i]
		if perr := n.gatewayGrant(c, s); perr != nil {
			n.audit(ctx, c, "gateway "+s.Method, callName(s), perr, start)
			refused[i] = true
			if !s.IsNotification() {
				r := protocol.ErrorResponse(s.ID, perr)
				local[i] = &r
			}
			continue
		}
		raw, id := raws[i], s.ID
		if s.Err == nil {
			if !s.IsNotification() {
				id = n.client.wireID()
			}
			if raw, err = rewriteSlot(raw, id, session, forwarded, traceparent); err != nil {
				return nil, protocol.Errorf(protocol.CodeParseError, "parse error: slot %d could not be re-encoded", i)
			}
		}
		fwd = append(fwd, raw)
		if !s.IsNotification() {
			remote[i] = true
			orig, want = append(orig, s.ID), append(want, id)
		}
	}
	var resps []protocol.Response
	if len(fwd) > 0 {
		if _, err := n.client.Connect(ctx, protocol.Address{Kind: protocol.AddrMesh, PeerID: pid.String()}); err != nil {
			return nil, n.peerFailed(pid, ReasonUnreachable, err)
		}
		out := fwd[0]
		if req.IsBatch {
			if out, err = json.Marshal(fwd); err != nil {
				return nil, fmt.Errorf("node: forward: encode: %w", err)
			}
		}
		if _, resps, err = n.client.send(ctx, pid, out, want); err != nil {
			return nil, n.peerFailed(pid, sendReason(err), err)
		}
		if len(resps) != len(want) {
			// The peer refused the message as a whole (matchIDs allows
			// nothing else): its one error answers every forwarded slot.
			refusal := resps[0]
			resps = make([]protocol.Response, len(want))
			for k := range resps {
				resps[k] = protocol.ErrorResponse(orig[k], refusal.Error)
			}
		}
	}
	// Each forwarded slot counts once, by its peer's answer (callFace).
	face, _, count := callFace(ctx, &c, "gateway ")
	took := time.Since(start)
	list := make([]protocol.Response, 0, len(req.Slots))
	k := 0
	for i := range req.Slots {
		switch {
		case local[i] != nil:
			list = append(list, *local[i])
		case remote[i]:
			r := resps[k]
			if count {
				n.metrics.count(n, face, &c, callName(&req.Slots[i]), true, r.Error, false, took)
			}
			if !isNull(r.ID) {
				r.ID = orig[k]
			}
			list = append(list, r)
			k++
		case count && !refused[i]: // a notification that went on
			n.metrics.count(n, face, &c, callName(&req.Slots[i]), true, nil, false, took)
		}
	}
	out, err := protocol.EncodeResponses(req.IsBatch, list)
	if err != nil {
		return nil, fmt.Errorf("node: forward: encode answer: %w", err)
	}
	return out, nil
}

// gatewayGrant applies the caller's grants on this node to a slot it asks
// the gateway to forward: a slot that carries a context.session is refused
// (a mesh session is this node's to add, for the peer it calls; one the
// caller brings was minted for someone else), a tools/call needs grant,
// and everything else goes on for the peer to judge.
func (n *Node) gatewayGrant(c Caller, s *protocol.Slot) *protocol.Error {
	if s.Context != nil && s.Context.Session != "" {
		return &protocol.Error{Code: protocol.CodeNotPermitted,
			Message: "not permitted: a forwarded slot may not carry a context.session: this node adds its own mesh session, for the peer it calls, to a secret holder's slots; send the call without one (as a secret holder of this node for every skill)",
			Data:    map[string]string{"skill": callName(s), "caller": c.Kind.String(), "reason": "session"}}
	}
	name := callName(s)
	if name == "" {
		return nil
	}
	return n.grant(c, "", protocol.PurposeRPC, name)
}

// callName returns the skill a valid tools/call slot names, else "".
func callName(s *protocol.Slot) string {
	if s.Err != nil || s.Method != protocol.MethodToolsCall {
		return ""
	}
	p, perr := protocol.ParseCallParams(s.Params)
	if perr != nil {
		return ""
	}
	return p.Name
}

// rewriteSlot returns the slot object raw with its id set to id (unless id
// is nil: a notification), and context.session, context.forwarded and
// context.traceparent set to session, forwarded and traceparent when they
// are not empty.
func rewriteSlot(raw, id json.RawMessage, session, forwarded, traceparent string) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	if id != nil {
		obj["id"] = id
	}
	if session != "" || forwarded != "" || traceparent != "" {
		ctxObj := map[string]json.RawMessage{}
		if cr, ok := obj["context"]; ok && !isNull(cr) {
			if err := json.Unmarshal(cr, &ctxObj); err != nil {
				return nil, err
			}
		}
		if session != "" { // the caller's own were refused (gatewayGrant)
			ctxObj["session"], _ = json.Marshal(session)
		}
		if forwarded != "" {
			ctxObj["forwarded"], _ = json.Marshal(forwarded)
		}
		if traceparent != "" {
			ctxObj["traceparent"], _ = json.Marshal(traceparent)
		}
		b, err := json.Marshal(ctxObj)
		if err != nil {
			return nil, err
		}
		obj["context"] = b
	}
	return json.Marshal(obj)
}

// AuditLog returns the audit lines q selects, oldest first, for the edge's
// GET /mcpv2/audit. A bad q.Outcome is a CodeInvalidParams error.
func (n *Node) AuditLog(ctx context.Context, q protocol.AuditQuery) ([]json.RawMessage, error) {
	f := store.AuditFilter{Since: q.Since, Caller: q.Caller, Skill: q.Skill, Outcome: q.Outcome, Trace: q.Trace}
	if err := f.Check(); err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: %v", err)
	}
	recs, _, err := store.TailAudit(ctx, n.cfg.DataDir, f, max(q.Limit, 1))
	if err != nil {
		return nil, err
	}
	lines := make([]json.RawMessage, 0, len(recs))
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		lines = append(lines, b)
	}
	return lines, nil
}

// FilesChanged returns a channel closed at the next change of the stored
// files (a write, a committed upload, a delete), for the MCP face's
// resource-list notifications: take a new channel after each close.
func (n *Node) FilesChanged() <-chan struct{} { return n.store.Files().Changed() }

// Sign signs data with the node's Ed25519 key (the A2A card's JWS; the
// PeerID names the key).
func (n *Node) Sign(data []byte) ([]byte, error) {
	k := n.host.Peerstore().PrivKey(n.host.ID())
	if k == nil {
		return nil, errors.New("node: sign: no private key")
	}
	return k.Sign(data)
}

// SaveTask, Task, TaskEvents and ListTasks keep the tasks of the faces
// (A2A) in the node's store; see store.SaveTask and the others.
func (n *Node) SaveTask(t protocol.StoredTask, event json.RawMessage) (uint64, error) {
	return n.store.SaveTask(t, event)
}

// Task returns a face's task; see SaveTask.
func (n *Node) Task(id string) (protocol.StoredTask, error) { return n.store.Task(id) }

// TaskEvents returns a task's events after a sequence number; see SaveTask.
func (n *Node) TaskEvents(id string, after uint64, max int) ([]protocol.TaskEvent, error) {
	return n.store.TaskEvents(id, after, max)
}

// ListTasks lists an owner's tasks; see SaveTask.
func (n *Node) ListTasks(owner string, q protocol.TaskQuery) ([]protocol.StoredTask, error) {
	return n.store.ListTasks(owner, q)
}

// SetA2ACard sets how the node answers agent/a2a-card: fn builds and signs
// its A2A card for the edge of PeerID edge that serves it at base (the A2A
// face's CardFor). Without it the method is not found. Call before the
// node is called.
func (n *Node) SetA2ACard(fn func(base, version, edge string, cred *protocol.EdgeCredentials) (json.RawMessage, error)) {
	n.cardMu.Lock()
	n.a2aCardFn = fn
	n.cardMu.Unlock()
}

// maxA2ABase caps the base URL an agent/a2a-card names, and each issuer
// URL of its credentials.
const maxA2ABase = 512

// httpURL parses s as an http(s) URL with a host, of at most maxA2ABase
// bytes, without query or fragment.
func httpURL(s string) (*url.URL, bool) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(s) > maxA2ABase || u.RawQuery != "" || u.Fragment != "" {
		return nil, false
	}
	return u, true
}

// maxCardIssuers caps the OpenID Connect issuers an agent/a2a-card names.
const maxCardIssuers = 8

// PeerA2ACard asks the mesh peer peerID, as this node, for its A2A card for
// this node's edge at base, which accepts cred (the A2A face's peer cards;
// agent/a2a-card).
func (n *Node) PeerA2ACard(ctx context.Context, peerID, base, version string, cred *protocol.EdgeCredentials) (json.RawMessage, error) {
	params, err := json.Marshal(protocol.A2ACardParams{Base: base, Version: version, Credentials: cred})
	if err != nil {
		return nil, err
	}
	return n.client.callOne(ctx, protocol.Address{Kind: protocol.AddrMesh, PeerID: peerID}, protocol.MethodA2ACard, params, protocol.CallOptions{})
}

// a2aCard answers agent/a2a-card: only to a mesh peer that asks for itself
// (an edge that fronts this node at base, …/peers/<this PeerID>), signed
// for that edge: a node signs no card naming a URL it was not asked for by
// the edge behind it.
func (n *Node) a2aCard(c Caller, params json.RawMessage) (json.RawMessage, *protocol.Error) {
	if c.Kind != protocol.CallerPeer {
		return nil, &protocol.Error{Code: protocol.CodeNotPermitted,
			Message: fmt.Sprintf("not permitted: %s is answered to mesh peers only, for the edge that serves this node at …/peers/%s; an HTTP caller gets the card from that edge's /peers/%s/.well-known/agent-card.json",
				protocol.MethodA2ACard, n.PeerID(), n.PeerID()),
			Data: map[string]string{"caller": c.Kind.String()}}
	}
	n.cardMu.Lock()
	fn := n.a2aCardFn
	n.cardMu.Unlock()
	if fn == nil {
		return nil, protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %q: this node serves no A2A card", protocol.MethodA2ACard)
	}
	var p protocol.A2ACardParams
	if err := protocol.Unmarshal(params, &p); err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: %s", protocol.JSONErrorText(err))
	}
	u, ok := httpURL(p.Base)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: base must be an http(s) URL of at most %d bytes, without query or fragment", maxA2ABase)
	}
	if p.Version != "1.0" && p.Version != "0.3" {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: version must be 1.0 or 0.3")
	}
	if want := "/peers/" + n.PeerID(); !strings.HasSuffix(u.Path, want) {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: base must be the asking edge's face of this node, ending in %s", want)
	}
	if cr := p.Credentials; cr != nil {
		if len(cr.OIDCIssuers) > maxCardIssuers {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: credentials name %d OpenID Connect issuers, more than %d", len(cr.OIDCIssuers), maxCardIssuers)
		}
		for _, iss := range cr.OIDCIssuers {
			if _, ok := httpURL(iss); !ok {
				return nil, protocol.Errorf(protocol.CodeInvalidParams, "invalid params: credentials: an issuer must be an http(s) URL of at most %d bytes, without query or fragment", maxA2ABase)
			}
		}
	}
	card, err := fn(p.Base, p.Version, c.ID, p.Credentials)
	if err != nil {
		n.log.Error("a2a card", "err", err)
		return nil, protocol.Errorf(protocol.CodeInternal, "internal error: the card could not be made")
	}
	return card, nil
}

// SubscribeAudit returns the audit records the node writes from now on
// (every call, from every face, in the order of audit.jsonl), and a cancel
// that ends the subscription and closes records. A subscriber that does
// not keep up loses records: records has buf slots (1–4096), a send never
// blocks the call that writes, and dropped counts the records lost. Close
// of the node closes records too. At most store.MaxAuditSubscribers (64)
// subscriptions are open at once; past that, or after Close, it fails.
func (n *Node) SubscribeAudit(buf int) (records <-chan store.AuditRecord, dropped func() uint64, cancel func(), err error) {
	return n.store.SubscribeAudit(buf)
}
