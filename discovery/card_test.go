package discovery

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
	"github.com/multiformats/go-multibase"

	"github.com/mcpv2/mcpv2/protocol"
)

// otherRecord is a record with a chosen domain, codec and payload, to build
// envelopes that are well signed but not cards.
type otherRecord struct {
	domain, codec string
	payload       []byte
}

func (r *otherRecord) Domain() string                 { return r.domain }
func (r *otherRecord) Codec() []byte                  { return []byte(r.codec) }
func (r *otherRecord) MarshalRecord() ([]byte, error) { return r.payload, nil }
func (r *otherRecord) UnmarshalRecord(b []byte) error { r.payload = b; return nil }

func sealOther(t *testing.T, key crypto.PrivKey, domain, codec string, payload []byte) []byte {
	t.Helper()
	env, err := record.Seal(&otherRecord{domain, codec, payload}, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cardOfSize returns a card for id whose envelope signed by key is exactly
// size bytes, by growing the description.
func cardOfSize(t *testing.T, id peer.ID, key crypto.PrivKey, size int) []byte {
	t.Helper()
	c := testCard(id, "big", []string{"ping"})
	n := 0
	for range 64 {
		c.Description = strings.Repeat("x", n)
		got := len(mustSeal(t, c, key))
		if got == size {
			return mustSeal(t, c, key)
		}
		// One description byte is one envelope byte, except where a varint
		// length grows; step by the difference, at least one.
		step := size - got
		if step == 0 {
			step = 1
		}
		n += step
		if n < 0 {
			break
		}
	}
	t.Fatalf("cannot build a %d-byte envelope", size)
	return nil
}

func TestCardValidatorValidate(t *testing.T) {
	keyA, keyB := seedKey(t, "A"), seedKey(t, "B")
	idA, idB := keyID(t, keyA), keyID(t, keyB)
	keyOfA := CardKey(idA)
	good := testCard(idA, "a", []string{"ping", "translate"}, "demo")
	cidForm, err := peer.ToCid(idA).StringOfBase(multibase.Base32)
	if err != nil {
		t.Fatal(err)
	}
	goodJSON, err := (&CardRecord{Card: good}).MarshalRecord()
	if err != nil {
		t.Fatal(err)
	}
	tampered := mustSeal(t, good, keyA)
	tampered[len(tampered)-1] ^= 0x01 // last byte of the signature

	wrongPeer := good
	wrongPeer.PeerID = idB.String()
	noPeer := good
	noPeer.PeerID = ""

	tests := []struct {
		name    string
		key     string
		value   []byte
		want    error  // nil: valid
		wantMsg string // a part of the error message
	}{
		{"good card", keyOfA, mustSeal(t, good, keyA), nil, ""},
		{"exactly MaxCardSize", keyOfA, cardOfSize(t, idA, keyA, MaxCardSize), nil, ""},
		{"forged: signed by another key", keyOfA, mustSeal(t, good, keyB), ErrCardSigner,
			"discovery: card for " + idA.String() + ": signed by " + idB.String() + ", not by the key's peer"},
		{"forged: B's own card filed under A's key", keyOfA, mustSeal(t, testCard(idB, "b", []string{"ping"}), keyB), ErrCardSigner, "signed by " + idB.String()},
		{"tampered signature", keyOfA, tampered, ErrCardSignature, "does not verify"},
		{"oversized by one byte", keyOfA, cardOfSize(t, idA, keyA, MaxCardSize+1), ErrCardTooLarge, "16385 bytes, over the 16384-byte limit"},
		{"oversized garbage is refused before parsing", keyOfA, make([]byte, MaxCardSize+100), ErrCardTooLarge, "over the"},
		{"wrong namespace", "/pk/" + idA.String(), mustSeal(t, good, keyA), ErrCardKey, "not in the /mcpv2card/ namespace"},
		{"no PeerID in key", "/mcpv2card/not-a-peer", mustSeal(t, good, keyA), ErrCardKey, "does not end in a PeerID"},
		{"binary PeerID in key", "/mcpv2card/" + string(idA), mustSeal(t, good, keyA), ErrCardKey, ""},
		{"CID form of PeerID in key", "/mcpv2card/" + cidForm, mustSeal(t, good, keyA), ErrCardKey, "canonical"},
		{"empty key", "", mustSeal(t, good, keyA), ErrCardKey, ""},
		{"card peer_id is another peer", keyOfA, mustSeal(t, wrongPeer, keyA), ErrCardPeerID, "peer_id is \"" + idB.String() + "\""},
		{"card peer_id empty", keyOfA, mustSeal(t, noPeer, keyA), ErrCardPeerID, ""},
		{"garbage bytes", keyOfA, []byte("this is not an envelope"), ErrCardSignature, "not a signed envelope"},
		{"empty value", keyOfA, nil, ErrCardSignature, ""},
		{"wrong domain", keyOfA, sealOther(t, keyA, "libp2p-peer-record", CardCodec, goodJSON), ErrCardSignature, "does not verify under the \"mcpv2-card\" domain"},
		{"wrong codec", keyOfA, sealOther(t, keyA, CardDomain, "/other/1.0.0", goodJSON), ErrCardFormat, "payload type"},
		{"malformed card JSON", keyOfA, sealOther(t, keyA, CardDomain, CardCodec, []byte(`{"name":`)), ErrCardFormat, "not a card"},
		{"JSON array payload", keyOfA, sealOther(t, keyA, CardDomain, CardCodec, []byte(`[1,2]`)), ErrCardFormat, "not a JSON object"},
		{"JSON null payload", keyOfA, sealOther(t, keyA, CardDomain, CardCodec, []byte(`null`)), ErrCardFormat, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CardValidator{}.Validate(tc.key, tc.value)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v; want valid", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Validate error = %v; want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "discovery: card for ") {
				t.Errorf("error %q does not start with \"discovery: card for \"", err)
			}
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
		})
	}
}

func TestOpenCardRoundTrip(t *testing.T) {
	key := seedKey(t, "A")
	id := keyID(t, key)
	want := testCard(id, "a", []string{"ping"}, "demo")
	want.Seq, want.IssuedAt = 7, 1700000000
	got, err := openCard(CardKey(id), mustSeal(t, want, key))
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 7 || got.IssuedAt != 1700000000 || got.PeerID != id.String() || len(got.Skills) != 1 || got.Skills[0].Tags[0] != "demo" {
		t.Fatalf("round trip: got %+v", got)
	}
	// The envelope is a plain libp2p signed envelope: the library opens it.
	var rec CardRecord
	env, err := record.ConsumeTypedEnvelope(mustSeal(t, want, key), &rec)
	if err != nil {
		t.Fatal(err)
	}
	if string(env.PayloadType) != CardCodec || rec.Card.Name != "a" {
		t.Fatalf("ConsumeTypedEnvelope: payload type %q, card %+v", env.PayloadType, rec.Card)
	}
}

func TestCardValidatorSelect(t *testing.T) {
	keyA, keyB := seedKey(t, "A"), seedKey(t, "B")
	idA := keyID(t, keyA)
	key := CardKey(idA)
	seq := func(n uint64, name string) []byte {
		c := testCard(idA, name, []string{"ping"})
		c.Seq = n
		return mustSeal(t, c, keyA)
	}
	forged := testCard(idA, "forged", []string{"ping"})
	forged.Seq = 99
	forgedEnv := mustSeal(t, forged, keyB)

	tests := []struct {
		name    string
		values  [][]byte
		want    int
		wantErr bool
	}{
		{"higher seq first", [][]byte{seq(5, "a"), seq(3, "a")}, 0, false},
		{"higher seq second (stale first)", [][]byte{seq(3, "a"), seq(5, "a")}, 1, false},
		{"highest of many", [][]byte{seq(1, "a"), seq(9, "a"), seq(4, "a"), seq(9, "b")}, 1, false},
		{"tie picks the first", [][]byte{seq(5, "a"), seq(5, "b")}, 0, false},
		{"seq 0 alone", [][]byte{seq(0, "a")}, 0, false},
		{"a forged higher seq is never selected", [][]byte{forgedEnv, seq(3, "a")}, 1, false},
		{"garbage is never selected", [][]byte{[]byte("junk"), seq(2, "a")}, 1, false},
		{"nothing valid", [][]byte{[]byte("junk"), forgedEnv}, 0, true},
		{"no values", nil, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CardValidator{}.Select(key, tc.values)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Select = %d; want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Select = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestCIDs(t *testing.T) {
	a, b := SkillCID("translate"), TagCID("translate")
	if a.Equals(b) {
		t.Fatal("skill and tag CIDs of the same word are equal")
	}
	if a.Version() != 1 || a.Type() != 0x55 {
		t.Fatalf("SkillCID: version %d codec %#x; want CIDv1 raw (0x55)", a.Version(), a.Type())
	}
	// Derived by hand, as another implementation would: CIDv1 (0x01), raw
	// codec (0x55), sha2-256 multihash (0x12, 32 bytes), base32 multibase.
	cidOf := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		b := append([]byte{0x01, 0x55, 0x12, 0x20}, sum[:]...)
		return "b" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
	}
	if got, want := SkillCID("ping").String(), cidOf("mcpv2:skill:ping"); got != want {
		t.Fatalf("SkillCID(ping) = %s, want %s", got, want)
	}
	if got, want := TagCID("demo").String(), cidOf("mcpv2:tag:demo"); got != want {
		t.Fatalf("TagCID(demo) = %s, want %s", got, want)
	}
	if !SkillCID("x").Equals(SkillCID("x")) || SkillCID("x").Equals(SkillCID("X")) {
		t.Fatal("SkillCID must be deterministic and case-sensitive")
	}
}

func TestCardCIDsDedup(t *testing.T) {
	c := protocol.AgentCard{Skills: []protocol.SkillDescriptor{
		{Name: "a", Tags: []string{"t1", "t2"}},
		{Name: "b", Tags: []string{"t1", ""}},
		{Name: "a"},
		{Name: "", Tags: []string{"t3"}},
	}}
	got := cardCIDs(c)
	want := []string{SkillCID("a").String(), TagCID("t1").String(), TagCID("t2").String(), SkillCID("b").String(), TagCID("t3").String()}
	if len(got) != len(want) {
		t.Fatalf("cardCIDs: %d CIDs, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("cardCIDs[%d] = %s, want %s", i, got[i], want[i])
		}
	}
}
