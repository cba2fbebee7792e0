package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/node/a2aclient"
	"github.com/mcpv2/mcpv2/protocol"
)

// a2aAgent is an ADDR that names an external A2A agent (not an mcpv2
// edge): its client and resolved card.
type a2aAgent struct {
	client *a2aclient.Client
	card   *a2aclient.Card
}

// target is what call, card and ping run against: the session and address
// of a mesh peer or an mcpv2 edge, or an A2A agent.
type target struct {
	s     *session
	addr  protocol.Address
	agent *a2aAgent // non-nil: ADDR is an A2A agent
}

// withTarget is the one address resolver of call, card and ping: it reads
// ADDR (the first argument) and runs fn under the command's timeout with
// either a session to a mesh peer or an mcpv2 edge, or an A2A agent:
//
//   - an http(s) URL that is no edge address (a path other than /mcpv2,
//     such as https://agent.example/a2a or …/agent-card.json) is an A2A
//     agent;
//   - an http(s) URL without the /mcpv2 path is asked for the edge's
//     health; an edge answers it, else, when the answer is 404 or 405 or
//     not an mcpv2 health document (an A2A agent's 404; notAnEdge), the
//     agent's card is looked for (a2aclient.Card): found, ADDR is that
//     agent;
//   - anything else (mcpv2://, /mcpv2, a multiaddr, a PeerID) is the mesh
//     or an edge, as before.
//
// The CLI's own requests to an agent are the user's: the outbound scope
// (--outbound-allow) binds a node's requests, not these.
func withTarget(c *cli.Context, fn func(ctx context.Context, t target) error) error {
	if c.NArg() < 1 {
		return fmt.Errorf("%s: missing ADDR (usage: %s)", c.Command.Name, c.Command.UsageText)
	}
	raw := c.Args().First()
	addr, perr := protocol.ParseAddress(raw)
	web := strings.HasPrefix(raw, "http://") || strings.HasPrefix(raw, "https://")
	if perr != nil && !web {
		return perr
	}
	ctx, cancel := context.WithTimeout(c.Context, timeoutOr(c, callTimeout))
	defer cancel()
	if perr != nil { // an http(s) URL that no edge has: an A2A agent
		ag, err := resolveA2A(ctx, c, raw)
		if err != nil {
			return err
		}
		return fn(ctx, target{agent: ag})
	}
	s, err := openSessionFor(c, addr.Kind == protocol.AddrMesh)
	if err != nil {
		return err
	}
	defer s.Close()
	if addr.Kind == protocol.AddrMesh {
		if err := s.connect(ctx, c, addr); err != nil {
			return err
		}
		return fn(ctx, target{s: s, addr: addr})
	}
	if web && !strings.Contains(strings.TrimPrefix(strings.TrimPrefix(raw, "http://"), "https://"), "/mcpv2") {
		if _, herr := s.edge.Health(ctx, addr); notAnEdge(herr) && ctx.Err() == nil {
			ag, aerr := resolveA2A(ctx, c, raw)
			if aerr != nil {
				return fmt.Errorf("%s is neither an mcpv2 edge (%v) nor an A2A agent (%w)", raw, herr, aerr)
			}
			return fn(ctx, target{agent: ag})
		}
	}
	return fn(ctx, target{s: s, addr: addr})
}

// notAnEdge says a health request's failure means no mcpv2 edge is
// there: 404 or 405 (an A2A agent has no /mcpv2/health), or an answer
// that is no mcpv2 health document. An unreachable host, or an edge that
// is busy (429, 503) or unwell, is still the edge.
func notAnEdge(herr error) bool {
	if herr == nil || errors.Is(herr, edge.ErrUnreachable) {
		return false
	}
	var he *edge.HTTPError
	if errors.As(herr, &he) {
		return he.StatusCode == http.StatusNotFound || he.StatusCode == http.StatusMethodNotAllowed
	}
	return true
}

// resolveA2A resolves the card of the A2A agent at raw; --key, when set,
// is sent as a bearer token.
func resolveA2A(ctx context.Context, c *cli.Context, raw string) (*a2aAgent, error) {
	h := http.Header{}
	if k := c.String("key"); k != "" {
		h.Set("Authorization", "Bearer "+k)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	cl, err := a2aclient.New(a2aclient.WithHTTPClient(&http.Client{Transport: tr}), a2aclient.WithHeaders(h),
		a2aclient.WithTimeout(timeoutOr(c, callTimeout)))
	if err != nil {
		return nil, err
	}
	card, err := cl.Card(ctx, raw)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	return &a2aAgent{client: cl, card: card}, nil
}

// a2aSummary is the line on stderr that says which agent answered.
func a2aSummary(card *a2aclient.Card) string {
	return fmt.Sprintf("mcpv2: %s is an A2A %s agent (card %s; endpoint %s)\n", printableLine(card.URL), card.ProtocolVersion, printableLine(card.SignatureSummary()), printableLine(card.Endpoint))
}
