package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
	mh "github.com/multiformats/go-multihash"

	"github.com/mcpv2/mcpv2/protocol"
)

// Card record constants (SPEC §4).
const (
	// CardNamespace is the DHT record namespace of agent cards: a card lives
	// under "/" + CardNamespace + "/" + PeerID (see [CardKey]).
	CardNamespace = "mcpv2card"
	// CardDomain is the signature domain of a card envelope: a signature made
	// for another domain never verifies as a card.
	CardDomain = "mcpv2-card"
	// CardCodec is the payload type of a card envelope.
	CardCodec = "/mcpv2/card/1.0.0"
	// MaxCardSize is the largest card record, in bytes of the whole signed
	// envelope. A larger value is refused before it is parsed.
	MaxCardSize = 16 << 10
)

// CID prefixes of the provider records announced for skills and tags.
const (
	skillCIDPrefix = "mcpv2:skill:"
	tagCIDPrefix   = "mcpv2:tag:"
)

// Errors of [CardValidator]. A validation error wraps one of them and names
// the key's peer and what was wrong, for instance
// "discovery: card for 12D3…A: signed by 12D3…X, not by the key's peer".
var (
	// ErrCardKey means the key is not "/mcpv2card/<PeerID>" with the PeerID
	// in its canonical (base58) form.
	ErrCardKey = errors.New("not a card key")
	// ErrCardTooLarge means the value is over MaxCardSize.
	ErrCardTooLarge = errors.New("card too large")
	// ErrCardSignature means the value is not a signed envelope that verifies
	// under the card domain.
	ErrCardSignature = errors.New("bad card signature")
	// ErrCardSigner means the envelope verifies but was signed by a peer
	// other than the key's.
	ErrCardSigner = errors.New("wrong card signer")
	// ErrCardFormat means the envelope's payload type is not CardCodec or its
	// payload is not a card in JSON.
	ErrCardFormat = errors.New("malformed card")
	// ErrCardPeerID means the card's peer_id is not the key's peer.
	ErrCardPeerID = errors.New("card peer_id mismatch")
)

// cardError is a validation error: a message that names the peer and the
// fault, wrapping the sentinel kind and, when there is one, the cause.
type cardError struct {
	msg   string
	kind  error
	cause error
}

func (e *cardError) Error() string {
	if e.cause != nil {
		return e.msg + ": " + e.cause.Error()
	}
	return e.msg
}

func (e *cardError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}

// cardErr builds a cardError for the card under key (already reduced to a
// peer name or the raw key).
func cardErr(subject string, kind, cause error, format string, args ...any) error {
	return &cardError{
		msg:   fmt.Sprintf("discovery: card for %s: ", subject) + fmt.Sprintf(format, args...),
		kind:  kind,
		cause: cause,
	}
}

// CardKey returns the DHT key of id's card: "/mcpv2card/" + id.String().
func CardKey(id peer.ID) string {
	return "/" + CardNamespace + "/" + id.String()
}

// SkillCID returns the CID whose providers are the agents with a skill named
// name: a CIDv1 (raw codec) of the SHA2-256 multihash of "mcpv2:skill:"+name.
// The name is used as given, so lookups are case-sensitive.
func SkillCID(name string) cid.Cid { return nameCID(skillCIDPrefix + name) }

// TagCID returns the CID whose providers are the agents with a skill tagged
// tag: a CIDv1 (raw codec) of the SHA2-256 multihash of "mcpv2:tag:"+tag.
func TagCID(tag string) cid.Cid { return nameCID(tagCIDPrefix + tag) }

func nameCID(s string) cid.Cid {
	sum, err := mh.Sum([]byte(s), mh.SHA2_256, -1)
	if err != nil {
		// SHA2-256 at its default length cannot fail.
		panic("discovery: sha2-256 multihash: " + err.Error())
	}
	return cid.NewCidV1(cid.Raw, sum)
}

// CardRecord is an agent card as a libp2p record (core/record.Record), the
// payload of a card's signed envelope. Its payload bytes are the card's JSON.
type CardRecord struct {
	// Card is the agent card.
	Card protocol.AgentCard
}

// Domain returns [CardDomain].
func (r *CardRecord) Domain() string { return CardDomain }

// Codec returns [CardCodec] as bytes.
func (r *CardRecord) Codec() []byte { return []byte(CardCodec) }

// MarshalRecord returns the card's JSON.
func (r *CardRecord) MarshalRecord() ([]byte, error) { return json.Marshal(r.Card) }

// UnmarshalRecord parses the card's JSON into r.Card. It refuses anything but
// one JSON object.
func (r *CardRecord) UnmarshalRecord(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("card is not a JSON object")
	}
	var c protocol.AgentCard
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	r.Card = c
	return nil
}

var _ record.Record = (*CardRecord)(nil)

// sealCard signs card with key in a card envelope and returns the envelope's
// bytes, the value stored in the DHT. It does not check the card; the
// validator does.
func sealCard(card protocol.AgentCard, key crypto.PrivKey) ([]byte, error) {
	env, err := record.Seal(&CardRecord{Card: card}, key)
	if err != nil {
		return nil, err
	}
	return env.Marshal()
}

// parseCardKey returns the peer a card key names.
func parseCardKey(key string) (peer.ID, error) {
	rest, ok := strings.CutPrefix(key, "/"+CardNamespace+"/")
	if !ok {
		return "", cardErr(fmt.Sprintf("key %q", truncate(key, 80)), ErrCardKey, nil, "the key is not in the /%s/ namespace", CardNamespace)
	}
	id, err := peer.Decode(rest)
	if err != nil {
		return "", cardErr(fmt.Sprintf("key %q", truncate(key, 80)), ErrCardKey, err, "the key does not end in a PeerID")
	}
	if id.String() != rest {
		return "", cardErr(fmt.Sprintf("key %q", truncate(key, 80)), ErrCardKey, nil, "the PeerID is not in its canonical form %s", id)
	}
	return id, nil
}

// openCard fully verifies value as the card stored under key and returns
// the card. It is the validator's Validate, returning what it verified.
func openCard(key string, value []byte) (protocol.AgentCard, error) {
	id, err := parseCardKey(key)
	if err != nil {
		return protocol.AgentCard{}, err
	}
	if len(value) > MaxCardSize {
		return protocol.AgentCard{}, cardErr(id.String(), ErrCardTooLarge, nil, "the record is %d bytes, over the %d-byte limit", len(value), MaxCardSize)
	}
	// rawPayload never fails to unmarshal, so an error here is about the
	// envelope itself: it does not parse, or its signature does not verify
	// under the card domain.
	var raw rawPayload
	env, err := record.ConsumeTypedEnvelope(value, &raw)
	if err != nil {
		if env == nil {
			return protocol.AgentCard{}, cardErr(id.String(), ErrCardSignature, err, "not a signed envelope")
		}
		return protocol.AgentCard{}, cardErr(id.String(), ErrCardSignature, err, "the envelope does not verify under the %q domain", CardDomain)
	}
	signer, err := peer.IDFromPublicKey(env.PublicKey)
	if err != nil {
		return protocol.AgentCard{}, cardErr(id.String(), ErrCardSignature, err, "the envelope's public key has no PeerID")
	}
	if signer != id {
		return protocol.AgentCard{}, cardErr(id.String(), ErrCardSigner, nil, "signed by %s, not by the key's peer", signer)
	}
	if !bytes.Equal(env.PayloadType, []byte(CardCodec)) {
		return protocol.AgentCard{}, cardErr(id.String(), ErrCardFormat, nil, "payload type %q, want %q", truncate(string(env.PayloadType), 64), CardCodec)
	}
	var rec CardRecord
	if err := rec.UnmarshalRecord(raw); err != nil {
		return protocol.AgentCard{}, cardErr(id.String(), ErrCardFormat, err, "the payload is not a card")
	}
	cardID, err := peer.Decode(rec.Card.PeerID)
	if err != nil || cardID != id {
		return protocol.AgentCard{}, cardErr(id.String(), ErrCardPeerID, nil, "the card's peer_id is %q, not the key's peer", truncate(rec.Card.PeerID, 80))
	}
	return rec.Card, nil
}

// rawPayload is a card envelope's payload kept as bytes, so that opening an
// envelope checks its signature apart from its payload.
type rawPayload []byte

func (*rawPayload) Domain() string { return CardDomain }

func (*rawPayload) Codec() []byte { return []byte(CardCodec) }

func (r *rawPayload) MarshalRecord() ([]byte, error) { return *r, nil }

func (r *rawPayload) UnmarshalRecord(b []byte) error {
	*r = b
	return nil
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// CardValidator is the DHT record validator of the "mcpv2card" namespace
// (record.Validator of go-libp2p-record). The zero value is ready to use and
// it is safe for concurrent use.
type CardValidator struct{}

// Validate refuses value as the record under key unless: key is
// "/mcpv2card/<PeerID>" (canonical form); value is at most MaxCardSize bytes
// (checked before parsing); value is a signed envelope that verifies under
// CardDomain; its signer is the key's peer; its payload type is CardCodec;
// its payload is a card in JSON whose peer_id is the key's peer. The error
// wraps one of the ErrCard* sentinels.
func (CardValidator) Validate(key string, value []byte) error {
	_, err := openCard(key, value)
	return err
}

// Select returns the index of the best of values for key: the valid card
// with the highest seq; among equal seqs, the first. Invalid values are
// never selected; if none is valid, Select fails.
func (CardValidator) Select(key string, values [][]byte) (int, error) {
	best, bestSeq := -1, uint64(0)
	var firstErr error
	for i, v := range values {
		c, err := openCard(key, v)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if best < 0 || c.Seq > bestSeq {
			best, bestSeq = i, c.Seq
		}
	}
	if best < 0 {
		if firstErr == nil {
			firstErr = errors.New("discovery: select card: no values")
		}
		return 0, firstErr
	}
	return best, nil
}
