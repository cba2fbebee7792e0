package custom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/node/a2aclient"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// A handler of type "a2a" forwards the skill to an external A2A agent (one
// that is not an mcpv2 node) by URL, with node/a2aclient:
//
//	{"type": "a2a", "url": "https://agent.example", "skill"?: "echo", "timeout_s"?: 30,
//	 "card_ttl_s"?: 600, "headers"?: {"Authorization": "Bearer ${ENV:AGENT_KEY}"},
//	 "card_key"?: "<PeerID or public JWK as JSON>"}
//
// The agent's card is resolved at the first call (and again after
// card_ttl_s, or after a call fails for another reason than the task's
// own state, its timeout or its caller's cancellation), verified when
// signed; with card_key the card must be signed with that key (see
// a2aclient.WithCardKey: the only way a signature says who wrote the
// card). Concurrent calls share one fetch of the card, without waiting
// behind it past their own end, and a card that could not be read is not
// asked for again for cardRetry. The message names "skill" (default: the
// mcpv2 skill's own name); the answer is a2aclient's Result. The headers
// go only to the url's origin (a2aclient.WithHeaders). Every request keeps
// to the node's outbound scope (WithA2AHTTPClient).

type a2aJSON struct {
	Type     string            `json:"type"`
	URL      string            `json:"url"`
	Skill    *string           `json:"skill"`
	TimeoutS *float64          `json:"timeout_s"`
	CardTTLS *float64          `json:"card_ttl_s"`
	Headers  map[string]string `json:"headers"`
	CardKey  string            `json:"card_key"`
}

// DefaultCardTTL is how long an a2a skill keeps the agent's card.
const DefaultCardTTL = 10 * time.Minute

// cardRetry is how long an a2a skill answers a card it could not read
// with that failure before it asks the agent again.
const cardRetry = 5 * time.Second

// a2aSkill is one a2a handler: its client and the agent's cached card.
type a2aSkill struct {
	name, url, skill string
	timeout, ttl     time.Duration
	client           *a2aclient.Client
	l                *Loader

	mu      sync.Mutex
	card    *a2aclient.Card
	failErr error      // the last card fetch's failure, until failAt+cardRetry
	failAt  time.Time  //
	fetch   *cardFetch // the card fetch in flight, if any
}

// cardFetch is one fetch of the card, shared by the calls that wait for it.
type cardFetch struct {
	done  chan struct{} // closed when card, err and retry are set
	card  *a2aclient.Card
	err   error
	retry bool // the fetcher's caller gave up: waiters fetch again
}

// cardError is a failure to read the agent's card.
type cardError struct{ err error }

func (e *cardError) Error() string { return "the agent's card: " + e.err.Error() }
func (e *cardError) Unwrap() error { return e.err }

func newA2A(name string, raw json.RawMessage, l *Loader) (skills.Handler, error) {
	var aj a2aJSON
	if err := decodeStrict(raw, &aj); err != nil {
		return nil, jsonError(raw, err)
	}
	if aj.URL == "" {
		return nil, fieldf("url", "missing")
	}
	u, err := netscope.CheckURL(aj.URL)
	if err != nil {
		return nil, fieldf("url", "%w", err)
	}
	timeout, err := parseTimeout(aj.TimeoutS)
	if err != nil {
		return nil, err
	}
	ttl := DefaultCardTTL
	if aj.CardTTLS != nil {
		if v := *aj.CardTTLS; math.IsNaN(v) || v < 0 || v > 7*24*3600 {
			return nil, fieldf("card_ttl_s", "%v is out of range [0, 604800]", v)
		}
		ttl = time.Duration(*aj.CardTTLS * float64(time.Second))
	}
	skill := name
	if aj.Skill != nil {
		skill = *aj.Skill
	}
	header, err := parseHeaders(aj.Headers, a2aclient.CheckHeader)
	if err != nil {
		return nil, err
	}
	opts := []a2aclient.Option{a2aclient.WithHeaders(header), a2aclient.WithTimeout(timeout), a2aclient.WithLogger(l.cfg.log)}
	if hc := l.cfg.a2aClient; hc != nil {
		opts = append(opts, a2aclient.WithHTTPClient(hc)) // else a2aclient's own: no target but public ones
	}
	if aj.CardKey != "" {
		key, err := a2aclient.ParseCardKey(aj.CardKey)
		if err != nil {
			return nil, fieldf("card_key", "%w", err)
		}
		opts = append(opts, a2aclient.WithCardKey(key))
	}
	client, err := a2aclient.New(opts...)
	if err != nil {
		return nil, err
	}
	s := &a2aSkill{name: name, url: u.String(), skill: skill, timeout: timeout, ttl: ttl, client: client, l: l}
	return s.call, nil
}

// cardFor returns the cached card, resolving it when missing or older
// than the TTL: one fetch at a time, bounded by rctx, shared by the calls
// that arrive meanwhile; each of those waits only until its own rctx
// ends. A failure is answered for cardRetry, unless it was the fetching
// caller's own cancellation (ctx ended): then a waiter fetches again.
func (s *a2aSkill) cardFor(ctx, rctx context.Context) (*a2aclient.Card, error) {
	for {
		s.mu.Lock()
		if s.card != nil && time.Since(s.card.FetchedAt) < s.ttl {
			card := s.card
			s.mu.Unlock()
			return card, nil
		}
		if s.failErr != nil && time.Since(s.failAt) < cardRetry {
			err := s.failErr
			s.mu.Unlock()
			return nil, &cardError{err}
		}
		if f := s.fetch; f != nil {
			s.mu.Unlock()
			select {
			case <-f.done:
			case <-rctx.Done():
				return nil, rctx.Err()
			}
			if f.retry {
				continue
			}
			if f.err != nil {
				return nil, &cardError{f.err}
			}
			return f.card, nil
		}
		f := &cardFetch{done: make(chan struct{})}
		s.fetch = f
		s.mu.Unlock()
		card, err := s.client.Card(rctx, s.url)
		s.mu.Lock()
		s.fetch, f.card, f.err = nil, card, err
		switch {
		case err == nil:
			s.card, s.failErr = card, nil
		case ctx.Err() == nil:
			s.failErr, s.failAt = err, time.Now()
		default:
			f.retry = true
		}
		close(f.done)
		s.mu.Unlock()
		if err != nil {
			return nil, &cardError{err}
		}
		return card, nil
	}
}

// forget drops the cached card (a failed call may mean the agent moved).
func (s *a2aSkill) forget(card *a2aclient.Card) {
	s.mu.Lock()
	if s.card == card {
		s.card = nil
	}
	s.mu.Unlock()
}

func (s *a2aSkill) call(ctx context.Context, args json.RawMessage) (any, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	card, err := s.cardFor(ctx, rctx)
	if err == nil {
		var res json.RawMessage
		if res, err = s.client.Call(rctx, card, s.skill, args); err == nil {
			return res, nil
		}
		var te *a2aclient.TaskError
		if !errors.As(err, &te) && rctx.Err() == nil { // not the task's end, a timeout or the caller's cancel
			s.forget(card)
		}
	}
	return nil, s.fail(ctx, rctx, err)
}

// fail words an error for the caller: the task's state and the agent's
// own words, or what failed; the agent's address is logged, never sent
// (as for http skills).
func (s *a2aSkill) fail(ctx, rctx context.Context, err error) error {
	s.l.cfg.log.Debug("custom a2a call failed", "skill", s.name, "err", err)
	var te *a2aclient.TaskError
	var re *a2aclient.RPCError
	var ce *cardError
	var why string
	switch {
	case ctx.Err() != nil:
		why = "canceled"
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		why = fmt.Sprintf("timed out after %v", s.timeout)
	case errors.As(err, &te):
		why = fmt.Sprintf("the agent's task %s %s", te.TaskID, te.State)
		if te.Text != "" {
			why += ": " + protocol.Clip(te.Text, 300)
		}
	case errors.As(err, &re):
		why = fmt.Sprintf("the agent answered %s with error %d: %s", re.Method, re.Code, protocol.Clip(re.Message, 300))
	case errors.Is(err, netscope.ErrRefused):
		s.l.cfg.log.Warn("custom a2a skill: the agent's address is outside the outbound scope", "skill", s.name, "err", err)
		why = "the agent's address is outside the node's outbound scope (" + netscope.Flag + "; see the node's log)"
	case errors.Is(err, a2aclient.ErrBadSignature):
		s.l.cfg.log.Warn("custom a2a skill: the agent's card signature does not verify", "skill", s.name, "err", err)
		why = "the agent's card signature does not verify"
	case errors.As(err, &ce):
		s.l.cfg.log.Warn("custom a2a skill: the agent's card could not be read", "skill", s.name, "err", err)
		why = fmt.Sprintf("the agent's card could not be read (see the node's log; asked again after %v)", cardRetry)
	default:
		s.l.cfg.log.Warn("custom a2a skill: the agent failed", "skill", s.name, "err", err)
		why = "the call to the agent failed (see the node's log)"
	}
	return protocol.Errorf(protocol.CodeToolExecution, "a2a skill %q: %s", s.name, why)
}
