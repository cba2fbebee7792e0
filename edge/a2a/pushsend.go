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
	"maps"
	"net/http"
	"net/url"
	"slices"
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
	// pushTimeout bounds one try (a POST) to a webhook: a webhook answers
	// in a few seconds, or the try has failed. A try that times out is not
	// tried again: the config's circuit opens (pushBreak).
	pushTimeout = 5 * time.Second
	// pushBreak is how long a config's circuit stays open once a
	// notification to it was dropped after its tries (or a timeout): its
	// next notifications are dropped unsent, with no audit line of their
	// own (the one of the drop that opened it says so); the first one
	// after it is tried again.
	pushBreak = time.Minute
	// pushJWTLife is how long a notification's JWT is valid.
	pushJWTLife = 5 * time.Minute
	// pushWorkers is how many notifications are sent at once (each
	// task's in order, one at a time).
	pushWorkers = 8
	// pushPerOwner caps the workers the notifications of one owner's
	// tasks hold at once, and pushPerHost those of one webhook host
	// (host:port): slow webhooks of one caller, or of one host, hold up
	// only their own, never every caller's.
	pushPerOwner = 2
	pushPerHost  = 2
	// pushQueue caps the notifications of one task waiting to be sent,
	// and pushQueueBytes their bodies (a v0.3 body is the whole task); past
	// either a notification is dropped (with an audit line), but one always
	// waits, whatever its size.
	pushQueue      = 64
	pushQueueBytes = 4 << 20
	// pushIndexMax caps the tasks whose configs the pusher remembers (of
	// tasks that have not ended); past it, it forgets them all and reads
	// them again as their events come.
	pushIndexMax = 4096
)

// pushJob is one event of a task to notify its webhooks of.
type pushJob struct {
	seq     uint64
	configs []pushConfig
	body    map[string][]byte // by config version: "1.0", "0.3"
	size    int               // the bytes of body
	hosts   []string          // of the configs' URLs (host:port), each once
}

// pushQueueT is the notifications of one task waiting to be sent, in order.
type pushQueueT struct {
	taskID string
	owner  string // who set the configs: the task's owner
	jobs   []pushJob
	bytes  int  // of the jobs' bodies
	queued bool // in ready, or a worker sends its first job
}

// pusher sends the notifications of the faces of a node (the node's own
// and its mesh peers'): a pool of workers that take one notification of
// a task at a time, the tasks in turn, each task's in order; an owner's
// tasks hold at most pushPerOwner workers at once, a webhook host at most
// pushPerHost, and a webhook that failed is not waited on again for
// pushBreak.
type pusher struct {
	store  *pushIndex
	scope  *netscope.Scope
	hc     *http.Client
	sign   func([]byte) ([]byte, error)
	peerID string
	// jwks is JWKS(peerID), what serveJWKS answers (jwksErr: why there
	// is none), made once: the key never changes.
	jwks     json.RawMessage
	jwksErr  error
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
	ready  []*pushQueueT
	owners map[string]int       // workers busy with each owner's notifications
	hosts  map[string]int       // workers busy with each webhook host
	broken map[string]time.Time // config (task id, NUL, config id) → its circuit is open until
	closed bool
	// started is set when the first notification starts the workers: a
	// node whose callers never set a webhook runs none (issue 25).
	started bool
}

// newPusher makes the pool over the face's Backend b, which implements
// PushStore; its workers start with the first notification.
func newPusher(b Backend, store PushStore, cfg config, log *slog.Logger) *pusher {
	scope := netscope.New(cfg.outboundAllow)
	hc := scope.Client(0)
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p := &pusher{store: &pushIndex{PushStore: store, byTask: map[string][]pushConfig{}}, scope: scope, hc: hc, sign: b.Sign, peerID: b.PeerID(), audit: b.Audit, log: log,
		attempts: cfg.pushAttempts, backoff: cfg.pushBackoff, queues: map[string]*pushQueueT{},
		owners: map[string]int{}, hosts: map[string]int{}, broken: map[string]time.Time{}}
	p.jwks, p.jwksErr = JWKS(p.peerID)
	p.cond = sync.NewCond(&p.mu)
	p.ctx, p.cancel = context.WithCancel(context.Background())
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

// pushIndex is the PushStore the faces use: it remembers the configs of
// each task that has events or whose configs were read, so that an event
// of a task without configs reads nothing; a config set or deleted
// through it is read again. The slices it returns are shared: read-only.
type pushIndex struct {
	PushStore
	mu     sync.Mutex
	ver    uint64 // counts the changes, so that a read that raced one is not kept
	byTask map[string][]pushConfig
}

// SavePushConfig keeps the config, and forgets what the index held of the
// task.
func (x *pushIndex) SavePushConfig(taskID, id string, config json.RawMessage, max int) error {
	defer x.forget(taskID, true)
	return x.PushStore.SavePushConfig(taskID, id, config, max)
}

// DeletePushConfig deletes the config, and forgets what the index held of
// the task.
func (x *pushIndex) DeletePushConfig(taskID, id string) (bool, error) {
	defer x.forget(taskID, true)
	return x.PushStore.DeletePushConfig(taskID, id)
}

// forget drops task id's entry; changed says its configs changed.
func (x *pushIndex) forget(id string, changed bool) {
	x.mu.Lock()
	delete(x.byTask, id)
	if changed {
		x.ver++
	}
	x.mu.Unlock()
}

// configs returns task id's configs: remembered, or read (once per task,
// and again after a change).
func (x *pushIndex) configs(id string) ([]pushConfig, error) {
	x.mu.Lock()
	cs, ok := x.byTask[id]
	ver := x.ver
	x.mu.Unlock()
	if ok {
		return cs, nil
	}
	raws, err := x.PushStore.PushConfigs(id)
	if err != nil {
		return nil, err
	}
	cs = nil
	for _, r := range raws {
		var c pushConfig
		if json.Unmarshal(r, &c) == nil {
			cs = append(cs, c)
		}
	}
	x.mu.Lock()
	if x.ver == ver { // no config changed while it was read
		if len(x.byTask) >= pushIndexMax {
			clear(x.byTask)
		}
		x.byTask[id] = cs
	}
	x.mu.Unlock()
	return cs, nil
}

// notify queues event ev of task t (saved, with its seq) for the task's
// webhooks, if it has any. It does not block on the network, and reads
// the task's configs once (pushIndex), not for each event.
func (p *pusher) notify(t *Task, ev Event) {
	cs, err := p.store.configs(t.ID)
	if t.Status.State.Terminal() { // its last event: nothing more to remember
		defer p.store.forget(t.ID, false)
	}
	if err != nil {
		p.log.Error("a2a: push configs", "task", t.ID, "err", err)
		return
	}
	if len(cs) == 0 {
		return
	}
	job := pushJob{seq: ev.Seq, body: map[string][]byte{}}
	for _, c := range cs {
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
			job.size += len(b)
		}
		job.configs = append(job.configs, c)
		if h := webhookHost(c.URL); !slices.Contains(job.hosts, h) {
			job.hosts = append(job.hosts, h)
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	q := p.queues[t.ID]
	if q == nil {
		q = &pushQueueT{taskID: t.ID, owner: nonEmpty(cs[0].CallerOwner, "task:"+t.ID)}
		p.queues[t.ID] = q
	}
	if len(q.jobs) >= pushQueue || (len(q.jobs) > 0 && q.bytes+job.size > pushQueueBytes) {
		p.mu.Unlock()
		for _, c := range job.configs {
			p.dropped(t.ID, job, c, 0, fmt.Errorf("%d notifications of the task (%d bytes) wait already", len(q.jobs), q.bytes), false)
		}
		return
	}
	q.jobs = append(q.jobs, job)
	q.bytes += job.size
	if !p.started { // under p.mu, before close can see closed and wait
		p.started = true
		for range pushWorkers {
			p.wg.Add(1)
			go p.work()
		}
	}
	if !q.queued {
		q.queued = true
		p.ready = append(p.ready, q)
		p.cond.Signal()
	}
	p.mu.Unlock()
}

// webhookHost is the host:port of a webhook's URL, what pushPerHost
// counts.
func webhookHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Host
}

// pick takes the first ready task whose owner and webhook hosts have
// workers to spare, or nil.
func (p *pusher) pick() *pushQueueT {
	for i, q := range p.ready {
		if p.owners[q.owner] >= pushPerOwner {
			continue
		}
		if slices.ContainsFunc(q.jobs[0].hosts, func(h string) bool { return p.hosts[h] >= pushPerHost }) {
			continue
		}
		p.ready = slices.Delete(p.ready, i, i+1)
		return q
	}
	return nil
}

// work sends one notification of a ready task at a time, then puts the
// task back in turn if more of its notifications wait.
func (p *pusher) work() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		var q *pushQueueT
		for !p.closed {
			if q = p.pick(); q != nil {
				break
			}
			p.cond.Wait()
		}
		if p.closed {
			p.mu.Unlock()
			return
		}
		job := q.jobs[0]
		q.jobs = q.jobs[1:]
		q.bytes -= job.size
		p.owners[q.owner]++
		for _, h := range job.hosts {
			p.hosts[h]++
		}
		p.mu.Unlock()
		for _, c := range job.configs {
			p.deliver(q.taskID, job, c)
		}
		p.mu.Lock()
		release(p.owners, q.owner)
		for _, h := range job.hosts {
			release(p.hosts, h)
		}
		if len(q.jobs) > 0 {
			p.ready = append(p.ready, q)
		} else {
			q.queued = false
			delete(p.queues, q.taskID)
		}
		p.cond.Broadcast() // a worker's owner and hosts are free again
		p.mu.Unlock()
	}
}

// release counts one worker less for key k of m.
func release(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// errPermanent marks a failure that a retry would not mend.
var errPermanent = errors.New("not retried")

// errTimeout marks a try that the webhook did not answer in pushTimeout.
var errTimeout = errors.New("no answer in time")

// deliver posts job to webhook c: tried up to p.attempts times, with a
// backoff that doubles, but not again after a timeout; then dropped, with
// one audit line, and the config's circuit opens for pushBreak. A
// notification to a config whose circuit is open is dropped unsent.
func (p *pusher) deliver(taskID string, job pushJob, c pushConfig) {
	key := taskID + "\x00" + c.ID
	p.mu.Lock()
	until, open := p.broken[key]
	if open && time.Now().After(until) {
		delete(p.broken, key)
		open = false
	}
	p.mu.Unlock()
	if open {
		p.log.Debug("a2a: push notification dropped unsent: the webhook failed lately", "task", taskID, "event", job.seq, "url", protocol.Clip(c.URL, 200), "until", until)
		return
	}
	body := job.body[c.Version]
	wait := p.backoff
	var err error
	n := 0
	for n < p.attempts {
		n++
		if err = p.post(taskID, c, body); err == nil {
			return
		}
		if errors.Is(err, errPermanent) || errors.Is(err, errTimeout) || n == p.attempts {
			break
		}
		p.log.Debug("a2a: push notification failed; retrying", "task", taskID, "url", c.URL, "attempt", n, "err", err)
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
	p.mu.Lock()
	now := time.Now()
	if len(p.broken) >= pushIndexMax {
		maps.DeleteFunc(p.broken, func(_ string, t time.Time) bool { return now.After(t) })
	}
	p.broken[key] = now.Add(pushBreak)
	p.mu.Unlock()
	p.dropped(taskID, job, c, n, err, true)
}

// dropped writes the one audit line of a notification that was not
// delivered; broke says the config's circuit opened with it.
func (p *pusher) dropped(taskID string, job pushJob, c pushConfig, attempts int, err error, broke bool) {
	msg := fmt.Sprintf("push notification dropped: task %s event %d to %s: ", taskID, job.seq, protocol.Clip(c.URL, 200))
	if attempts > 0 {
		msg += fmt.Sprintf("%d attempts failed, the last: %v", attempts, err)
	} else {
		msg += err.Error()
	}
	if broke {
		msg += fmt.Sprintf("; the config's notifications of the next %s are dropped unsent", pushBreak)
	}
	p.log.Warn("a2a: "+msg, "task", taskID)
	// The line is the caller's who set the config; its remote is the
	// webhook's host (the log line says the rest: the task, the event,
	// the last error).
	caller := protocol.Caller{ID: nonEmpty(c.Caller, "a2a-push"), Via: "a2a", Owner: c.CallerOwner, Kind: c.CallerKind}
	if u, err := url.Parse(c.URL); err == nil {
		caller.Remote = u.Host
	}
	p.audit(p.ctx, caller, PushAuditMethod, &protocol.Error{Code: protocol.CodeInternal, Message: protocol.Clip(msg, 1000)}, time.Now())
}

// post makes one try: POST body to c.URL with the config's
// authentication. A 2xx answer delivers; a refusal by the outbound scope
// or a 4xx other than 408 and 429 is permanent.
func (p *pusher) post(taskID string, c pushConfig, body []byte) error {
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
		jwt, err := p.jwt(c.URL, taskID, body)
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
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w (%s): %v", errTimeout, pushTimeout, err)
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
	m, err := jwks(id)
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// jwks is JWKS as a JSON object, for a card to hold inline.
func jwks(id string) (map[string]any, error) {
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
	return map[string]any{"keys": []any{map[string]any{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(raw),
		"kid": id, "alg": "EdDSA", "use": "sig"}}}, nil
}

// serveJWKS answers GET of JWKSPath: the key of the node's push
// notifications' JWTs (open, as the card is).
func (f *Face) serveJWKS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		f.e.Refuse(w, r, http.StatusMethodNotAllowed, protocol.Errorf(protocol.CodeInvalidRequest, "invalid request: method %s is not allowed on %s; use GET", protocol.Clip(r.Method, 20), r.URL.Path))
		return
	}
	b, err := f.push.jwks, f.push.jwksErr
	if err != nil {
		f.log.Error("a2a: jwks", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": rpcError{Code: protocol.CodeInternal, Message: "internal error: the key set could not be made"}})
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(b)
}
