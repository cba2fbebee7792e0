package a2a

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/protocol"
)

// Push-notification delivery.
const (
	// JWKSPath serves the node's public key as a JWK Set (RFC 7517): the
	// key of the JWTs its push notifications carry.
	JWKSPath = "/.well-known/jwks.json"
	// PushExtension is the URI of the card's capability extension that
	// names, in its params, the JWKS URL (jwksUrl) and the JWT issuer
	// (issuer: the node's PeerID) of its push notifications.
	PushExtension = "urn:mcpv2:a2a:push:v1"
	// PushAuditMethod is the method of the audit line of a notification
	// that was dropped (outcome error, code -32603, remote the webhook's
	// host).
	PushAuditMethod = "a2a push"
	// TokenHeader carries the client's token of a config back to its
	// webhook.
	TokenHeader = "X-A2A-Notification-Token"
	// DefaultPushAttempts is how often a notification is tried before it
	// is dropped (with an audit line).
	DefaultPushAttempts = 4
	// DefaultPushBackoff is the pause before the second try; it doubles
	// for each next one, up to maxPushBackoff.
	DefaultPushBackoff = 250 * time.Millisecond
	maxPushBackoff     = 10 * time.Second
	// pushTimeout bounds one POST to a webhook.
	pushTimeout = 10 * time.Second
	// pushJWTLife is how long a notification's JWT is valid.
	pushJWTLife = 5 * time.Minute
	// pushWorkers is how many webhooks are called at once (each task's
	// notifications in order, one at a time).
	pushWorkers = 8
	// pushQueue caps the notifications of one task waiting to be sent;
	// past it a notification is dropped (with an audit line).
	pushQueue = 64
)

// pushJob is one event of a task to notify its webhooks of.
type pushJob struct {
	taskID  string
	seq     uint64
	configs []pushConfig
	body    map[string][]byte // by config version: "1.0", "0.3"
}

// pushQueueT is the notifications of one task waiting to be sent, in order.
type pushQueueT struct {
	jobs      []pushJob
	scheduled bool // in ready, or a worker drains it
}

// pusher sends the notifications of the faces of a node (the node's own
// and its mesh peers'): a pool of workers, each task's notifications in
// order; a slow or dead webhook holds up only its own task's.
type pusher struct {
	store    PushStore
	scope    *netscope.Scope
	hc       *http.Client
	sign     func([]byte) ([]byte, error)
	peerID   string
	audit    func(ctx context.Context, c protocol.Caller, method string, perr *protocol.Error, start time.Time)
	log      *slog.Logger
	attempts int
	backoff  time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond
	queues map[string]*pushQueueT
	ready  []string
	closed bool
}

// newPusher starts the pool over the face's Backend b, which implements
// PushStore.
func newPusher(b Backend, store PushStore, cfg config, log *slog.Logger) *pusher {
	scope := netscope.New(cfg.outboundAllow)
	hc := scope.Client(0)
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p := &pusher{store: store, scope: scope, hc: hc, sign: b.Sign, peerID: b.PeerID(), audit: b.Audit, log: log,
		attempts: cfg.pushAttempts, backoff: cfg.pushBackoff, queues: map[string]*pushQueueT{}}
	p.cond = sync.NewCond(&p.mu)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for range pushWorkers {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

// close stops the pool: the notifications in flight are abandoned, the
// ones waiting dropped. It waits for the workers.
func (p *pusher) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.hc.CloseIdleConnections()
}

// notify queues event ev of task t (saved, with its seq) for the task's
// webhooks, if it has any. It does not block on the network.
func (p *pusher) notify(t *Task, ev Event) {
	raws, err := p.store.PushConfigs(t.ID)
	if err != nil {
		p.log.Error("a2a: push configs", "task", t.ID, "err", err)
		return
	}
	if len(raws) == 0 {
		return
	}
	job := pushJob{taskID: t.ID, seq: ev.Seq, body: map[string][]byte{}}
	for _, r := range raws {
		var c pushConfig
		if json.Unmarshal(r, &c) != nil {
			continue
		}
		if _, ok := job.body[c.Version]; !ok {
			var v any
			if c.Version == "0.3" { // v0.3: the task as it is now
				v = t.v03(-1)
			} else { // v1.0: the StreamResponse, as a stream has it
				v = ev.v1()
			}
			b, err := json.Marshal(v)
			if err != nil {
				continue
			}
			job.body[c.Version] = b
		}
		job.configs = append(job.configs, c)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	q := p.queues[t.ID]
	if q == nil {
		q = &pushQueueT{}
		p.queues[t.ID] = q
	}
	if len(q.jobs) >= pushQueue {
		p.mu.Unlock()
		for _, c := range job.configs {
			p.dropped(job, c, 0, fmt.Errorf("%d notifications of the task wait already", pushQueue))
		}
		return
	}
	q.jobs = append(q.jobs, job)
	if !q.scheduled {
		q.scheduled = true
		p.ready = append(p.ready, t.ID)
		p.cond.Signal()
	}
	p.mu.Unlock()
}

// work drains the queues of the tasks that are ready, one task at a time.
func (p *pusher) work() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		for len(p.ready) == 0 && !p.closed {
			p.cond.Wait()
		}
		if p.closed {
			p.mu.Unlock()
			return
		}
		id := p.ready[0]
		p.ready = p.ready[1:]
		p.mu.Unlock()
		p.drain(id)
	}
}

// drain sends task id's notifications in order until its queue is empty.
func (p *pusher) drain(id string) {
	for {
		p.mu.Lock()
		q := p.queues[id]
		if q == nil || len(q.jobs) == 0 || p.closed {
			delete(p.queues, id)
			p.mu.Unlock()
			return
		}
		job := q.jobs[0]
		q.jobs = q.jobs[1:]
		p.mu.Unlock()
		for _, c := range job.configs {
			p.deliver(job, c)
		}
	}
}

// errPermanent marks a failure that a retry would not mend.
var errPermanent = errors.New("not retried")

// deliver posts job to webhook c: tried up to p.attempts times, with a
// backoff that doubles; then dropped, with one audit line.
func (p *pusher) deliver(job pushJob, c pushConfig) {
	body := job.body[c.Version]
	wait := p.backoff
	var err error
	n := 0
	for n < p.attempts {
		n++
		if err = p.post(job, c, body); err == nil {
			return
		}
		if errors.Is(err, errPermanent) || n == p.attempts {
			break
		}
		p.log.Debug("a2a: push notification failed; retrying", "task", job.taskID, "url", c.URL, "attempt", n, "err", err)
		select {
		case <-p.ctx.Done():
			return // stopping: the notification is abandoned
		case <-time.After(wait):
		}
		wait = min(wait*2, maxPushBackoff)
	}
	if p.ctx.Err() != nil {
		return
	}
	p.dropped(job, c, n, err)
}

// dropped writes the one audit line of a notification that was not
// delivered.
func (p *pusher) dropped(job pushJob, c pushConfig, attempts int, err error) {
	msg := fmt.Sprintf("push notification dropped: task %s event %d to %s: ", job.taskID, job.seq, protocol.Clip(c.URL, 200))
	if attempts > 0 {
		msg += fmt.Sprintf("%d attempts failed, the last: %v", attempts, err)
	} else {
		msg += err.Error()
	}
	p.log.Warn("a2a: "+msg, "task", job.taskID)
	// The line is the caller's who set the config; its remote is the
	// webhook's host (the log line says the rest: the task, the event,
	// the last error).
	caller := protocol.Caller{ID: nonEmpty(c.Caller, "a2a-push"), Via: "a2a", Owner: c.CallerOwner}
	if u, err := url.Parse(c.URL); err == nil {
		caller.Remote = u.Host
	}
	p.audit(p.ctx, caller, PushAuditMethod, &protocol.Error{Code: protocol.CodeInternal, Message: protocol.Clip(msg, 1000)}, time.Now())
}

// post makes one try: POST body to c.URL with the config's
// authentication. A 2xx answer delivers; a refusal by the outbound scope
// or a 4xx other than 408 and 429 is permanent.
func (p *pusher) post(job pushJob, c pushConfig, body []byte) error {
	ctx, cancel := context.WithTimeout(p.ctx, pushTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", errPermanent, err)
	}
	ct := "application/a2a+json"
	if c.Version == "0.3" {
		ct = "application/json"
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("User-Agent", "mcpv2-a2a-push")
	if c.Credentials != "" {
		req.Header.Set("Authorization", c.Scheme+" "+c.Credentials)
	} else {
		jwt, err := p.jwt(c.URL, job.taskID, body)
		if err != nil {
			return fmt.Errorf("%w: %v", errPermanent, err)
		}
		req.Header.Set("Authorization", "Bearer "+jwt)
	}
	if c.Token != "" {
		req.Header.Set(TokenHeader, c.Token)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		if errors.Is(err, netscope.ErrRefused) {
			return fmt.Errorf("%w: %v", errPermanent, err)
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return nil
	case s >= 400 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests:
		return fmt.Errorf("%w: the webhook answered %s", errPermanent, resp.Status)
	default:
		return fmt.Errorf("the webhook answered %s", resp.Status)
	}
}

// jwt is a notification's JWT (RFC 7519), EdDSA with the node's key, kid
// and iss its PeerID, aud the webhook's URL, valid pushJWTLife, a jti of
// its own, the task's id and the SHA-256 of the body (hex), so that a
// receiver ties the token to this one notification.
func (p *pusher) jwt(aud, taskID string, body []byte) (string, error) {
	now := time.Now()
	h, _ := json.Marshal(map[string]string{"alg": "EdDSA", "typ": "JWT", "kid": p.peerID})
	sum := sha256.Sum256(body)
	cl, _ := json.Marshal(map[string]any{"iss": p.peerID, "aud": aud, "iat": now.Unix(), "exp": now.Add(pushJWTLife).Unix(),
		"jti": newID(), "taskId": taskID, "request_body_sha256": hex.EncodeToString(sum[:])})
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(cl)
	sig, err := p.sign([]byte(in))
	if err != nil {
		return "", fmt.Errorf("sign the notification's JWT: %w", err)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// JWKS is the JWK Set of the node of PeerID id: its Ed25519 key (OKP,
// RFC 8037), kid the PeerID, as JWKSPath serves it.
func JWKS(id string) (json.RawMessage, error) {
	pid, err := peer.Decode(id)
	if err != nil {
		return nil, fmt.Errorf("a2a: jwks: %q is not a PeerID: %w", protocol.Clip(id, 80), err)
	}
	pub, err := pid.ExtractPublicKey()
	if err != nil || pub.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("a2a: jwks: PeerID %s holds no Ed25519 key", id)
	}
	raw, err := pub.Raw()
	if err != nil {
		return nil, fmt.Errorf("a2a: jwks: %w", err)
	}
	return json.Marshal(map[string]any{"keys": []any{map[string]any{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(raw),
		"kid": id, "alg": "EdDSA", "use": "sig"}}})
}

// serveJWKS answers GET of JWKSPath: the key of the node's push
// notifications' JWTs (open, as the card is).
func (f *Face) serveJWKS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		f.e.Refuse(w, r, http.StatusMethodNotAllowed, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: method %s is not allowed on %s; use GET", protocol.Clip(r.Method, 20), r.URL.Path))
		return
	}
	b, err := JWKS(f.b.PeerID())
	if err != nil {
		f.log.Error("a2a: jwks", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": rpcError{Code: protocol.CodeInternal, Message: "internal error: the key set could not be made"}})
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(b)
}
