// Package cardsig is the one canonical form of a signed A2A agent card
// (A2A §8.4): the JWS payloads a card's signature covers. The A2A face
// signs its cards with it (edge/a2a) and the node's A2A client verifies
// the cards of other agents with it (node/a2aclient), so the two cannot
// drift apart.
package cardsig

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Payloads returns the payloads a signature of card (decoded JSON) may
// cover, the one a signer signs first: RFC 8785 (JCS) canonical JSON of
// the card without its "signatures" and without its empty members (empty
// strings, lists and objects, and null, recursively), as the A2A SDKs
// canonicalize a card before they verify it (@a2a-js/sdk's cleanEmpty);
// then, when it differs, the same with the empty members, which older
// mcpv2 nodes signed. card is not changed.
func Payloads(card map[string]any) ([][]byte, error) {
	c := make(map[string]any, len(card))
	for k, v := range card {
		if k != "signatures" {
			c[k] = v
		}
	}
	var out [][]byte
	for _, v := range []any{dropEmpty(c), c} {
		if v == nil {
			v = map[string]any{}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("card: %w", err)
		}
		if b, err = jcs.Transform(b); err != nil {
			return nil, fmt.Errorf("card: canonical JSON: %w", err)
		}
		if len(out) == 0 || !bytes.Equal(out[0], b) {
			out = append(out, b)
		}
	}
	return out, nil
}

// dropEmpty is v (decoded JSON) without its empty members, nil when
// nothing is left.
func dropEmpty(v any) any {
	switch x := v.(type) {
	case string:
		if x == "" {
			return nil
		}
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if e := dropEmpty(e); e != nil {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e := dropEmpty(e); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}
