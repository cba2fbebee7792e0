package cardsig

import (
	"encoding/json"
	"testing"
)

// TestPayloads: the signatures and the empty members are left out of the
// first payload, kept in the second, and one payload only when the card
// has no empty member; numbers and key order are JCS's.
func TestPayloads(t *testing.T) {
	var card map[string]any
	if err := json.Unmarshal([]byte(`{"name":"a","url":"","skills":[{"id":"x","tags":[]}],"n":1.50,"signatures":[{"protected":"p"}]}`), &card); err != nil {
		t.Fatal(err)
	}
	p, err := Payloads(card)
	if err != nil || len(p) != 2 {
		t.Fatalf("%q %v", p, err)
	}
	if got, want := string(p[0]), `{"n":1.5,"name":"a","skills":[{"id":"x"}]}`; got != want {
		t.Errorf("payload 0: %s, want %s", got, want)
	}
	if got, want := string(p[1]), `{"n":1.5,"name":"a","skills":[{"id":"x","tags":[]}],"url":""}`; got != want {
		t.Errorf("payload 1: %s, want %s", got, want)
	}
	if _, ok := card["signatures"]; !ok {
		t.Error("the card was changed")
	}
	card = map[string]any{"name": "a"}
	if p, err := Payloads(card); err != nil || len(p) != 1 || string(p[0]) != `{"name":"a"}` {
		t.Errorf("a card without empty members: %q %v", p, err)
	}
}
