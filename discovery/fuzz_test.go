package discovery

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
)

// The seed corpus in testdata/fuzz/FuzzCardValidator was written by a
// throwaway program with the key seedKey("fuzz") (and seedKey("fuzz-other")
// for the forgeries): a valid envelope, a forged signer, a peer_id mismatch,
// a wrong codec, a wrong domain, a malformed JSON payload, a truncated
// envelope, garbage, an empty value and an oversized value.

// FuzzCardValidator feeds arbitrary bytes to the validator as the card of
// a fixed peer. It must never panic, Select must never prefer an invalid
// value, and whatever Validate accepts must verify independently: a libp2p
// envelope that opens under the card domain, signed by the key's peer, of
// the card payload type, holding a card of that peer.
func FuzzCardValidator(f *testing.F) {
	fk := seedKey(f, "fuzz")
	id := keyID(f, fk)
	key := CardKey(id)
	good := testCard(id, "good", []string{"ping"}, "demo")
	good.Seq = 1
	goodEnv := mustSeal(f, good, fk)
	f.Add(goodEnv)

	f.Fuzz(func(t *testing.T, value []byte) {
		err := CardValidator{}.Validate(key, value)
		i, serr := CardValidator{}.Select(key, [][]byte{value, goodEnv})
		if serr != nil {
			t.Fatalf("Select with a valid value failed: %v", serr)
		}
		if err != nil {
			if i != 1 {
				t.Fatalf("Select preferred a value Validate refused (%v)", err)
			}
			var ce *cardError
			if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "discovery: card for ") {
				t.Fatalf("error %q is not a card error", err)
			}
			return
		}
		if len(value) > MaxCardSize {
			t.Fatalf("accepted %d bytes, over MaxCardSize", len(value))
		}
		var rec CardRecord
		env, cerr := record.ConsumeTypedEnvelope(value, &rec)
		if cerr != nil {
			t.Fatalf("accepted a value that does not open as a card envelope: %v", cerr)
		}
		signer, err := peer.IDFromPublicKey(env.PublicKey)
		if err != nil || signer != id {
			t.Fatalf("accepted a value signed by %s, not %s", signer, id)
		}
		if string(env.PayloadType) != CardCodec {
			t.Fatalf("accepted payload type %q", env.PayloadType)
		}
		if cid, err := peer.Decode(rec.Card.PeerID); err != nil || cid != id {
			t.Fatalf("accepted a card of peer %q", rec.Card.PeerID)
		}
	})
}

// readCorpus returns the value of a one-[]byte seed corpus file.
func readCorpus(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzCardValidator", name))
	if err != nil {
		t.Fatal(err)
	}
	body, ok := strings.CutPrefix(string(b), "go test fuzz v1\n")
	if !ok {
		t.Fatalf("%s: not a Go fuzz corpus file", name)
	}
	lit, ok := strings.CutPrefix(strings.TrimSpace(body), "[]byte(")
	if !ok || !strings.HasSuffix(lit, ")") {
		t.Fatalf("%s: not one []byte value", name)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return []byte(s)
}

// TestFuzzCorpus checks that the committed seeds are what their names say,
// so that the corpus keeps covering both sides of the validator.
func TestFuzzCorpus(t *testing.T) {
	key := CardKey(keyID(t, seedKey(t, "fuzz")))
	for name, want := range map[string]error{
		"valid_envelope":   nil,
		"forged_signer":    ErrCardSigner,
		"peer_id_mismatch": ErrCardPeerID,
		"wrong_codec":      ErrCardFormat,
		"wrong_domain":     ErrCardSignature,
		"malformed_json":   ErrCardFormat,
		"truncated":        ErrCardSignature,
		"garbage":          ErrCardSignature,
		"empty":            ErrCardSignature,
		"oversized":        ErrCardTooLarge,
	} {
		err := CardValidator{}.Validate(key, readCorpus(t, name))
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("seed %s: Validate = %v, want %v", name, err, want)
		}
	}
	ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzCardValidator"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 10 {
		t.Errorf("%d seed files, want the 10 checked here", len(ents))
	}
}
