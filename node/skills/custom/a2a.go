package custom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/node/a2aclient"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// A handler of type "a2a" forwards the skill to an external A2A agent (one
// that is not an mcpv2 node) by URL, with node/a2aclient:
//
//	{"type": "a2a", "url": "https://agent.example", "skill"?: "echo", "timeout_s"?: 30,
//	 "card_ttl_s"?: 600, "headers"?: {"Authorization": "Bearer ${ENV:AGENT_KEY}"}}
//
// The agent's card is resolved at the first call (and again after
// card_ttl_s, or after a call fails for another reason than the task's
// own state), verified when signed; the message names "skill" (default:
// the mcpv2 skill's own name); the answer is a2aclient's Result. Every
// request keeps to the node's outbound scope (WithA2AHTTPClient).

type a2aJSON struct {
	Type     string            `json:"type"`
	URL      string            `json:"url"`
	Skill    *string           `json:"skill"`
	TimeoutS *float64          `json:"timeout_s"`
	CardTTLS *float64          `json:"card_ttl_s"`
	Headers  map[string]string `json:"headers"`
}

// DefaultCardTTL is how long an a2a skill keeps the agent's card.
const DefaultCardTTL = 10 * time.Minute

// a2aSkill is one a2a handler: its client and the agent's cached card.
type a2aSkill struct {
	name, url, skill string
	timeout, ttl     time.Duration
	client           *a2aclient.Client
	l                *Loader

	mu   sync.Mutex
	card *a2aclient.Card
}

func newA2A(name string, raw json.RawMessage, l *Loader) (skills.Handler, error) {
	var aj a2aJSON
	if err := decodeStrict(raw, &aj); err != nil {
		return nil, jsonError(raw, err)
	}
	if aj.URL == "" {
		return nil, fieldf("url", "missing")
	}
	u, err := url.Parse(aj.URL)
	switch {
	case err != nil:
		return nil, fieldf("url", "%w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fieldf("url", "scheme %q is not allowed (want http or https)", u.Scheme)
	case u.Host == "":
		return nil, fieldf("url", "no host")
	case u.User != nil:
		return nil, fieldf("url", "credentials in the URL are not allowed (use headers with ${ENV:NAME})")
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
	header := http.Header{}
	for k, v := range aj.Headers {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, fieldf("headers", "%q is not a valid header name", k)
		}
		switch http.CanonicalHeaderKey(k) {
		case "Host", "Content-Type", "Content-Length", "Transfer-Encoding", "Connection", "Accept", "A2a-Version":
			return nil, fieldf("headers."+k, "may not be set")
		}
		val, err := expandEnv(v)
		if err != nil {
			return nil, fieldf("headers."+k, "%w", err)
		}
		if !httpguts.ValidHeaderFieldValue(val) {
			return nil, fieldf("headers."+k, "not a valid header value")
		}
		header.Set(k, val)
	}
	hc := l.cfg.a2aClient
	if hc == nil {
		hc = netscope.New(nil).Client(0)
	}
	client, err := a2aclient.New(a2aclient.WithHTTPClient(hc), a2aclient.WithHeaders(header),
		a2aclient.WithTimeout(timeout), a2aclient.WithLogger(l.cfg.log))
	if err != nil {
		return nil, err
	}
	s := &a2aSkill{name: name, url: u.String(), skill: skill, timeout: timeout, ttl: ttl, client: client, l: l}
	return s.call, nil
}

// cardFor returns the cached card, resolving it when missing or older
// than the TTL.
func (s *a2aSkill) cardFor(ctx context.Context) (*a2aclient.Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.card != nil && time.Since(s.card.FetchedAt) < s.ttl {
		return s.card, nil
	}
	card, err := s.client.Card(ctx, s.url)
	if err != nil {
		return nil, err
	}
	s.card = card
	return card, nil
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
	card, err := s.cardFor(rctx)
	if err == nil {
		var res json.RawMessage
		if res, err = s.client.Call(rctx, card, s.skill, args); err == nil {
			return res, nil
		}
		var te *a2aclient.TaskError
		if !errors.As(err, &te) {
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
	default:
		s.l.cfg.log.Warn("custom a2a skill: the agent failed", "skill", s.name, "err", err)
		why = "the call to the agent failed (see the node's log)"
	}
	return protocol.Errorf(protocol.CodeToolExecution, "a2a skill %q: %s", s.name, why)
}
