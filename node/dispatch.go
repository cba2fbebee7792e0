package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
	"github.com/mcpv2/mcpv2/transport"
)

// Caller is who sent a request to Handle: protocol.Caller, so that the
// faces (edge, MCP, A2A) can name it without importing node.
type Caller = protocol.Caller

// maxConcurrentSlots bounds how many slots of one batch run at once.
const maxConcurrentSlots = 8

// Handle runs one request message (a slot or a batch) for caller and returns
// the response message, nil when nothing is to be sent (notifications). When
// the message is refused as a whole (parse error, batch rules, rate limit),
// refused is that error and out is its one error response. Every face of the
// node (mesh, HTTP edge, MCP) enters here. Safe for concurrent use.
func (n *Node) Handle(ctx context.Context, c Caller, msg []byte) (out []byte, refused *protocol.Error) {
	return n.AppendHandle(ctx, c, msg, nil)
}

// AppendHandle is Handle appending the response to dst: a face that writes
// responses from a buffer of its own (transport.GetBuffer) passes it here.
// out is nil when nothing is to be sent. Neither msg nor dst is kept.
func (n *Node) AppendHandle(ctx context.Context, c Caller, msg, dst []byte) (out []byte, refused *protocol.Error) {
	start := time.Now()
	req, perr := protocol.ParseRequest(msg)
	if perr == nil {
		if ok, wait := n.limits.allow(c.ID, len(req.Slots), start); !ok {
			perr = &protocol.Error{Code: protocol.CodeRateLimited,
				Message: fmt.Sprintf("rate limited: retry after %dms", wait.Milliseconds()),
				Data:    map[string]any{"retry_after_ms": wait.Milliseconds()}}
		}
	}
	if perr != nil {
		n.audit(ctx, c, "", "", perr, start)
		b, _ := protocol.AppendResponses(dst, false, []protocol.Response{protocol.ErrorResponse(nil, perr)})
		n.metrics.messageBytes(&c, len(msg), len(b)-len(dst))
		return b, perr
	}

	var list []protocol.Response
	var one [1]protocol.Response // a lone slot's response, not on the heap
	if len(req.Slots) == 1 {
		// A lone slot runs inline: no goroutine, no stack to grow. Its
		// result is written into a pooled buffer, given back once the
		// response holds a copy.
		scratch := transport.GetBuffer(responseBuffer)
		defer func() { transport.ReleaseFrame(scratch) }()
		if answered := n.runSlot(ctx, c, &req.Slots[0], &one[0], &scratch); answered {
			list = one[:]
		}
	} else {
		list = n.runBatch(ctx, c, req.Slots)
	}
	if len(list) == 0 {
		n.metrics.messageBytes(&c, len(msg), 0)
		return nil, nil
	}
	b, err := protocol.AppendResponses(dst, req.IsBatch, list)
	if err != nil {
		n.log.Error("encode responses", "err", err)
		perr := protocol.Errorf(protocol.CodeInternal, "internal error")
		b, _ = protocol.AppendResponses(dst, false, []protocol.Response{protocol.ErrorResponse(nil, perr)})
		return b, perr
	}
	n.metrics.messageBytes(&c, len(msg), len(b)-len(dst))
	return b, nil
}

// runBatch runs the slots of a batch, at most maxConcurrentSlots at once,
// and returns their responses in slot order (none for notifications).
func (n *Node) runBatch(ctx context.Context, c Caller, slots []protocol.Slot) []protocol.Response {
	resps := make([]protocol.Response, len(slots))
	answered := make([]bool, len(slots))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxConcurrentSlots)
	for i := range slots {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			answered[i] = n.runSlot(ctx, c, &slots[i], &resps[i], nil)
		}()
	}
	wg.Wait()
	list := resps[:0]
	for i := range resps {
		if answered[i] {
			list = append(list, resps[i])
		}
	}
	return list
}

// runSlot runs one slot and sets *resp to its response; answered is false
// for a notification, which gets none. A panic in a skill becomes
// CodeInternal for that slot alone. With scratch, a skill's result is
// appended to *scratch (Registry.AppendCall) and the response's result
// refers to it: the caller keeps it until the response is encoded; nil:
// the result is a buffer of its own.
func (n *Node) runSlot(ctx context.Context, c Caller, s *protocol.Slot, resp *protocol.Response, scratch *[]byte) (answered bool) {
	start := time.Now()
	ctx, span := n.startSpan(ctx, s)
	var skill string
	var result json.RawMessage
	var perr *protocol.Error
	var v *verdict // what the guard found in the arguments
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("skill panicked", "skill", skill, "panic", r)
			result, perr = nil, protocol.Errorf(protocol.CodeInternal, "internal error")
		}
		n.auditVerdict(ctx, c, s.Method, skill, perr, start, v)
		n.endSpan(span, c, skill, perr)
		if s.IsNotification() { // ParseRequest gives every invalid slot id null
			answered = false
			return
		}
		answered = true
		if perr != nil {
			*resp = protocol.ErrorResponse(s.ID, perr)
			return
		}
		*resp = protocol.Response{JSONRPC: "2.0", ID: s.ID, Result: result}
	}()
	if s.Err != nil {
		perr = s.Err
		return
	}
	c = forwardedBy(c, s)
	var provider string
	if s.Context != nil {
		provider = s.Context.Provider
	}
	switch s.Method {
	case protocol.MethodToolsList:
		result, perr = marshalResult(map[string]any{"tools": n.reg.List()})
	case protocol.MethodAgentCard:
		result, perr = marshalResult(n.Card())
	case protocol.MethodA2ACard:
		result, perr = n.a2aCard(c, s.Params)
	case protocol.MethodToolsCall:
		var p protocol.CallParams
		if p, perr = protocol.ParseCallParams(s.Params); perr != nil {
			return
		}
		skill = p.Name
		if perr = n.authorize(c, s, protocol.PurposeRPC, skill); perr != nil {
			return
		}
		if ok, wait := n.policy.allowSkill(c.ID, skill, start); !ok {
			perr = &protocol.Error{Code: protocol.CodeRateLimited,
				Message: fmt.Sprintf("rate limited: this node's policy limits %q per caller; retry after %dms", skill, wait.Milliseconds()),
				Data:    map[string]any{"retry_after_ms": wait.Milliseconds(), "skill": skill}}
			return
		}
		if v, perr = n.screen(ctx, skill, p.Arguments); perr != nil {
			return
		}
		kind := c.Kind
		if s.Context != nil && s.Context.Session != "" && kind == protocol.CallerPeer {
			kind = protocol.CallerSecretHolder // authorize verified it
		}
		cctx := skills.WithCallInfo(ctx, skills.CallInfo{Caller: c.ID, Via: c.Via, Provider: provider, Kind: kind})
		var err error
		if scratch != nil {
			if *scratch, err = n.reg.AppendCall(cctx, (*scratch)[:0], skill, p.Arguments); err == nil {
				result = *scratch
			}
		} else {
			result, err = n.reg.Call(cctx, skill, p.Arguments)
		}
		perr = protocol.AsError(err)
	default:
		perr = protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %q", s.Method)
	}
	return
}

// meshPeer is the caller of a stream a mesh peer opened.
func meshPeer(conn network.Conn) Caller {
	id := conn.RemotePeer().String()
	return Caller{ID: id, Via: "mesh", Remote: conn.RemoteMultiaddr().String(), Kind: protocol.CallerPeer, Owner: "peer:" + id}
}

// forwardedBy returns the caller of slot s that mesh peer c sent: c
// itself, or, when c forwards it for a caller of its own who is not a
// secret holder (context.forwarded), the forwarded caller "via:<c's
// PeerID>", who owns nothing here and may run only what the policy grants
// that key, "http" or "*". A face's caller (c not a peer) is left as it is:
// only a mesh peer forwards.
func forwardedBy(c Caller, s *protocol.Slot) Caller {
	if c.Kind != protocol.CallerPeer || s.Context == nil || s.Context.Forwarded == "" {
		return c
	}
	return Caller{ID: protocol.PolicyVia + c.ID, Via: "mesh", Remote: c.Remote, Kind: protocol.CallerForwarded}
}

// authorize applies SPEC §6 to a tools/call slot (or a blob transfer, with
// purpose protocol.PurposeBlob): the skill must exist, then grant decides.
func (n *Node) authorize(c Caller, s *protocol.Slot, purpose, skill string) *protocol.Error {
	if _, ok := n.reg.Lookup(skill); !ok {
		return n.reg.NotFound(skill)
	}
	var session string
	if s.Context != nil {
		session = s.Context.Session
	}
	return n.grant(c, session, purpose, skill)
}

// grant is the one authorization rule of every face (SPEC §6): may c, which
// presented the mesh session token session ("" for none) for purpose, run
// skill? A mesh peer's valid session — a version 2 token minted with the
// shared secret by that peer for this node and purpose — grants every
// skill; otherwise the caller's kind decides: a secret holder may run
// anything, a mesh peer what the policy grants its PeerID or "*", a caller
// a peer forwards what it grants "via:<PeerID>", "http" or "*", an
// anonymous edge session what it grants "http" or "*". A forwarded
// caller's session is not honoured. The open skills need no grant. A "*"
// (every skill) in a policy or a key's --grant does not reach the
// pseudo-skills (security_audit, read_resource, discover_agents,
// list_agents): those are granted by name only (grantsSkill).
func (n *Node) grant(c Caller, session, purpose, skill string) *protocol.Error {
	if session != "" && c.Kind != protocol.CallerForwarded {
		if len(n.secret) == 0 {
			return protocol.Errorf(protocol.CodeInvalidSession, "invalid session: this node accepts no mesh sessions (it has no --secret)")
		}
		if _, err := protocol.VerifyMeshToken(n.secret, session, c.ID, n.PeerID(), purpose, n.now(), n.clockSkew); err != nil {
			if errors.Is(err, protocol.ErrTokenSignature) {
				// The edge's words for the same refusal (ErrTokenSignature's),
				// and what to do: on the mesh the caller mints its session
				// with its own --secret.
				return protocol.Errorf(protocol.CodeInvalidSession, "%v; a call carries a session minted with the caller's --secret (MCPV2_SECRET): "+
					"give the one this node runs with, or none to call as a plain peer", err)
			}
			return protocol.Errorf(protocol.CodeInvalidSession, "%v", err)
		}
		return nil
	}
	switch c.Kind {
	case protocol.CallerSecretHolder:
		return nil
	case protocol.CallerPeer:
		if n.policy.Allows(c.ID, skill) {
			return nil
		}
		return &protocol.Error{Code: protocol.CodeNotPermitted,
			Message: fmt.Sprintf("not permitted: peer %s is not granted skill %q. To allow it, either run both sides with the same --secret, "+
				"or grant the caller's PeerID (`mcpv2 id` prints it) in this node's policy file (policy.json in its data dir, or its --policy) and restart it: "+
				"{\"grants\": {\"%s\": [\"%s\"]}}", c.ID, skill, c.ID, skill),
			Data: map[string]string{"skill": skill, "caller": c.Kind.String()}}
	case protocol.CallerForwarded:
		if n.policy.Allows(c.ID, skill) || n.policy.Allows(protocol.PolicyHTTP, skill) {
			return nil
		}
		return &protocol.Error{Code: protocol.CodeNotPermitted,
			Message: fmt.Sprintf("not permitted: a caller forwarded by peer %s (its gateway, a face or an orchestration, for a caller who is not a secret holder there) may not run skill %q. "+
				"To allow it, grant it to the callers that peer forwards, or to every HTTP caller, in this node's policy file (policy.json in its data dir, or its --policy) and restart it: "+
				"{\"grants\": {\"%s\": [\"%s\"]}}", strings.TrimPrefix(c.ID, protocol.PolicyVia), skill, c.ID, skill),
			Data: map[string]string{"skill": skill, "caller": c.Kind.String()}}
	case protocol.CallerKey, protocol.CallerOIDC:
		if grantsSkill(c.Grants, skill) || n.policy.Allows(c.ID, skill) ||
			slices.ContainsFunc(c.Principals, func(p string) bool { return n.policy.Allows(p, skill) }) {
			return nil
		}
		what, how := "API key "+strings.TrimPrefix(c.ID, protocol.PolicyKey), "a key made with --grant (mcpv2 key add NAME --grant "+skill+"), or grant it"
		if c.Kind == protocol.CallerOIDC {
			what, how = "OpenID Connect subject "+strings.TrimPrefix(c.ID, protocol.PolicyOIDC), "grant it to the subject, or to a scope its tokens carry (\"scope:<name>\"),"
		}
		return &protocol.Error{Code: protocol.CodeNotPermitted,
			Message: fmt.Sprintf("not permitted: %s is not granted skill %q. To allow it, use %s in this node's policy file (policy.json in its data dir, or its --policy) and restart it: "+
				"{\"grants\": {\"%s\": [\"%s\"]}}", protocol.Clip(what, 120), skill, how, protocol.Clip(c.ID, 120), skill),
			Data: map[string]string{"skill": skill, "caller": c.Kind.String()}}
	default:
		if n.policy.Allows(protocol.PolicyHTTP, skill) {
			return nil
		}
		return &protocol.Error{Code: protocol.CodeNotPermitted,
			Message: fmt.Sprintf("not permitted: an anonymous HTTP caller may not run skill %q. To run it, authenticate: send an API key the node's owner made for you "+
				"(mcpv2 key add NAME --grant %s) as Authorization: Bearer KEY, or an OpenID Connect access token when the node names an issuer (its "+
				"/.well-known/oauth-protected-resource says), or a session minted with the node's --secret (mcpv2 call|send … --secret S); "+
				"or grant it to every HTTP caller in this node's policy file (policy.json in its data dir, or its --policy) and restart it: "+
				"{\"grants\": {\"http\": [\"%s\"]}}", skill, skill, skill),
			Data: map[string]string{"skill": skill, "caller": c.Kind.String()}}
	}
}

// audit writes the audit line of a call that started at start, with the
// trace and span ids of ctx's span (traceFields).
func (n *Node) audit(ctx context.Context, c Caller, method, skill string, perr *protocol.Error, start time.Time) {
	n.auditVerdict(ctx, c, method, skill, perr, start, nil)
}

// auditVerdict is audit with what the guard found (v may be nil). Every
// request's outcome passes here, whatever its face, with its inner lines:
// the metrics count the request here once (callFace says which line).
func (n *Node) auditVerdict(ctx context.Context, c Caller, method, skill string, perr *protocol.Error, start time.Time, v *verdict) {
	took := time.Since(start)
	n.metrics.countLine(ctx, n, &c, method, skill, perr, v != nil && v.blocked, took)
	rec := store.AuditRecord{
		Time: start.UTC(), Caller: c.ID, Via: c.Via, Auth: c.Kind.String(), Method: method, Skill: skill,
		Outcome: "ok", DurationMS: float64(took.Microseconds()) / 1000, Remote: c.Remote,
	}
	if perr != nil {
		rec.Outcome, rec.Code = "error", perr.Code
	}
	v.auditFields(&rec)
	traceFields(ctx, &rec)
	if err := n.store.Audit(rec); err != nil {
		n.log.Error("audit log write failed", "err", err)
	}
}

func marshalResult(v any) (json.RawMessage, *protocol.Error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "internal error")
	}
	return b, nil
}
