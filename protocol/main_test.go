package protocol

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base32"
	"flag"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// update rewrites the golden files under testdata/golden instead of
// comparing against them: go test ./protocol/ -run Golden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// golden compares got with testdata/golden/name, or rewrites the file when
// -update is set.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended)\ngot:  %s\nwant: %s", path, got, want)
	}
}

const testBase58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// base58btc encodes b the way multibase/go-base58 do (leading zero bytes
// become '1').
func base58btc(b []byte) string {
	n := new(big.Int).SetBytes(b)
	var out []byte
	radix, mod := big.NewInt(58), new(big.Int)
	for n.Sign() > 0 {
		n.DivMod(n, radix, mod)
		out = append(out, testBase58[mod.Int64()])
	}
	for _, c := range b {
		if c != 0 {
			break
		}
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

// base58Decode is the inverse of base58btc; ok is false for a bad character.
func base58Decode(s string) ([]byte, bool) {
	n := new(big.Int)
	for _, c := range s {
		i := strings.IndexRune(testBase58, c)
		if i < 0 {
			return nil, false
		}
		n.Mul(n, big.NewInt(58)).Add(n, big.NewInt(int64(i)))
	}
	zeros := len(s) - len(strings.TrimLeft(s, "1"))
	return append(make([]byte, zeros), n.Bytes()...), true
}

// ed25519PubKeyProto is the libp2p protobuf encoding of an Ed25519 public
// key: field 1 (KeyType) = 1 (Ed25519), field 2 (Data) = 32 bytes.
func ed25519PubKeyProto(pub ed25519.PublicKey) []byte {
	return append([]byte{0x08, 0x01, 0x12, 0x20}, pub...)
}

// testPub returns a deterministic Ed25519 public key for name.
func testPub(name string) ed25519.PublicKey {
	seed := sha256.Sum256([]byte("mcpv2 test key " + name))
	return ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
}

// edPeerID returns the real PeerID of a deterministic Ed25519 key: the
// identity multihash (0x00, length 0x24) of the protobuf public key, in
// base58btc: 52 characters starting 12D3KooW.
func edPeerID(name string) string {
	mh := append([]byte{0x00, 0x24}, ed25519PubKeyProto(testPub(name))...)
	return base58btc(mh)
}

// qmPeerID returns a PeerID of the sha2-256 multihash form (as for RSA keys):
// 46 characters starting Qm.
func qmPeerID(name string) string {
	sum := sha256.Sum256([]byte("mcpv2 test rsa key " + name))
	return base58btc(append([]byte{0x12, 0x20}, sum[:]...))
}

// cidPeerID returns the PeerID of edPeerID(name) as a CIDv1 (libp2p-key
// codec 0x72) in base32 multibase: "b" + lower-case base32 without padding.
func cidPeerID(name string) string {
	mh := append([]byte{0x00, 0x24}, ed25519PubKeyProto(testPub(name))...)
	cid := append([]byte{0x01, 0x72}, mh...)
	return "b" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(cid))
}

// TestPeerIDGenerators checks the helpers against a PeerID produced by
// go-libp2p, so that the address tests use realistic identities.
func TestPeerIDGenerators(t *testing.T) {
	const real = "12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"
	raw, ok := base58Decode(real)
	if !ok || len(raw) != 38 || string(raw[:6]) != "\x00\x24\x08\x01\x12\x20" {
		t.Fatalf("real PeerID decodes to % x; want identity multihash of an Ed25519 key", raw)
	}
	if got := base58btc(raw); got != real {
		t.Fatalf("base58btc round trip = %q, want %q", got, real)
	}
	for _, name := range []string{"a", "b", "relay", "target"} {
		id := edPeerID(name)
		if len(id) != 52 || !strings.HasPrefix(id, "12D3KooW") {
			t.Errorf("edPeerID(%q) = %q; want 52 chars starting 12D3KooW", name, id)
		}
		if q := qmPeerID(name); len(q) != 46 || !strings.HasPrefix(q, "Qm") {
			t.Errorf("qmPeerID(%q) = %q; want 46 chars starting Qm", name, q)
		}
		if c := cidPeerID(name); !strings.HasPrefix(c, "bafz") {
			t.Errorf("cidPeerID(%q) = %q; want bafz…", name, c)
		}
	}
}
