package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/zeebo/blake3"
)

// Hash names a content hash by which the store checks uploads and knows
// files: SHA-256, the integrity hash of blob protocols 1.0.0 and 1.1.0, or
// BLAKE3-256, that of 1.2.0. Both give 32 bytes, written as 64 lowercase
// hex digits. Its value is the JSON member name of the digest in FileInfo
// and on the wire.
//
// A file knows the digests it was verified with: one written by Files.Write
// or committed from a SHA-256 upload knows its SHA-256, one committed from
// a BLAKE3 upload its BLAKE3. The other is computed from the file the first
// time a reader asks for it (Files.Open and Files.List always give the
// SHA-256; Files.OpenHash the digest asked for) and remembered while the
// file is unchanged, like every digest: in memory, so after a restart each
// is computed again when first asked for.
type Hash string

// The hashes the store knows.
const (
	// HashSHA256 is SHA-256 (crypto/sha256).
	HashSHA256 Hash = "sha256"
	// HashBLAKE3 is BLAKE3 with a 256-bit output (github.com/zeebo/blake3,
	// which uses the CPU's vector instructions: about twice SHA-256's
	// speed with SHA-NI, more without).
	HashBLAKE3 Hash = "blake3"
)

// HashNone asks Files.OpenHash for no digest: it gives the ones the store
// knows and computes none, for a reader that reads the content anyway and
// does not report a digest (process_instructions).
const HashNone Hash = ""

// Known reports whether h is one of the hashes the store knows.
func (h Hash) Known() bool { return h == HashSHA256 || h == HashBLAKE3 }

// New returns a new hash.Hash of h. It panics on a hash that is not Known:
// callers check what they got from outside first.
func (h Hash) New() hash.Hash {
	switch h {
	case HashSHA256:
		return sha256.New()
	case HashBLAKE3:
		return blake3.New()
	}
	panic("store: unknown hash " + string(h))
}

// Pick returns whichever of sha256 and blake3 holds a digest of h: the one
// place that maps a hash to the field of a struct that has one per hash
// (FileInfo, and the blob protocol's frames), so that no caller switches on
// the hash itself. It returns nil for a hash not Known.
func (h Hash) Pick(sha256, blake3 *string) *string {
	switch h {
	case HashSHA256:
		return sha256
	case HashBLAKE3:
		return blake3
	}
	return nil
}

// Valid reports whether sum is a digest of h in lowercase hex: 64 digits
// for either hash the store knows. It is false for a hash not Known.
func (h Hash) Valid(sum string) bool { return h.Known() && validHex32(sum) }

// validHex32 reports whether s is 32 bytes in lowercase hex (64 digits).
func validHex32(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// HashPrefix writes the first n bytes of r into w, in reads at offsets (a
// file's own offset does not move), and stops early with ctx's error when
// ctx ends. An r shorter than n gives an error wrapping
// io.ErrUnexpectedEOF. It is how the store and the blob sender hash the
// start of a file: the store to describe a file or resume an upload, the
// sender to check a receiver's prefix digest. Safe for concurrent use.
func HashPrefix(ctx context.Context, w io.Writer, r io.ReaderAt, n int64) error {
	bp := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(bp)
	buf := *bp
	for pos := int64(0); pos < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk := buf[:min(int64(len(buf)), n-pos)]
		m, err := r.ReadAt(chunk, pos)
		if m < len(chunk) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read at %d of %d bytes: %w", pos+int64(m), n, err)
		}
		w.Write(chunk) // a hash.Hash's Write never fails
		pos += int64(m)
	}
	return nil
}

// hashSum returns the lowercase hex digest of h of the first n bytes of r,
// as HashPrefix reads them.
func hashSum(ctx context.Context, h Hash, r io.ReaderAt, n int64) (string, error) {
	w := h.New()
	if err := HashPrefix(ctx, w, r, n); err != nil {
		return "", err
	}
	return hex.EncodeToString(w.Sum(nil)), nil
}

// hashBuffer is HashPrefix's read size: large enough that BLAKE3 hashes
// many chunks per call, where its vector instructions pay.
const hashBuffer = 256 << 10

// hashBufs holds HashPrefix's buffers, so that rehashing files does not
// allocate a buffer each time.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, hashBuffer); return &b }}
