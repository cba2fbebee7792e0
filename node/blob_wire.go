package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/mcpv2/mcpv2/node/store"
	"github.com/mcpv2/mcpv2/protocol"
)

// The wire format of /mcpv2/blob/1.0.0 (SPEC §2), one stream per transfer:
//
//	sender → receiver  frame  {"name","size","sha256","session"?}   (BlobHeader, at most MaxBlobHeader bytes)
//	receiver → sender  frame  {"offset":N,"dropped"?:[…]} or {"error":{"code","message","data"?}}
//	sender → receiver  raw    bytes N..size of the file, then a half-close
//	receiver → sender  frame  {"filename","size","sha256"} or {"error":{…}}
//
// and of /mcpv2/blob/1.1.0, where the sender need not know the hash before
// its first byte:
//
//	sender → receiver  frame  {"name","size","sha256"?,"session"?,"restart"?}
//	receiver → sender  frame  {"offset":N,"prefix_sha256"?,"dropped"?:[…]} or {"error":{…}}
//	sender → receiver  raw    bytes N..size of the file
//	sender → receiver  frame  {"sha256"}   (the trailer: the whole file's hash), then a half-close
//	receiver → sender  frame  {"filename","size","sha256"} or {"error":{…}}
//
// and of /mcpv2/blob/1.2.0, which is 1.1.0 with BLAKE3-256 (32 bytes of
// output, 64 lowercase hex digits; github.com/zeebo/blake3) wherever 1.1.0
// has SHA-256, each member named for its hash:
//
//	sender → receiver  frame  {"name","size","blake3"?,"session"?,"restart"?}
//	receiver → sender  frame  {"offset":N,"prefix_blake3"?,"dropped"?:[…]} or {"error":{…}}
//	sender → receiver  raw    bytes N..size of the file
//	sender → receiver  frame  {"blake3"}   (the trailer), then a half-close
//	receiver → sender  frame  {"filename","size","blake3"} or {"error":{…}}
//
// A 1.2.0 header or trailer with a sha256 member is refused, as a 1.1.0 one
// with blake3 is: each version has one hash. Why 1.2.0: both ends hash every
// byte, and SHA-256 (about 1.7 GB/s a core here, with SHA-NI) competes with
// both ends' stream encryption for the cores; BLAKE3 hashes about twice as
// fast with the vector instructions of the same CPU (more without SHA-NI).
// A sender offers 1.2.0, 1.1.0 and 1.0.0 in that order and multistream
// picks the first the receiver serves (blobProtocols); a node serves all
// three (blobVersions).
//
// Frames are transport.WriteFrame's (an unsigned varint length, then JSON).
// The receiver appends to a partial upload kept under a hidden name in its
// file store and commits it (an atomic rename) only when the whole file
// hashes to the declared digest: 1.0.0's header, or the trailer of 1.1.0 and
// 1.2.0 (and their header's too, when it has one). A broken stream leaves
// the partial upload in place; the same sender sending the same file again
// resumes at N, the receiver's offset.
//
// In 1.1.0 and 1.2.0 a header without a hash keys the partial upload by
// sender, name and size alone, so the bytes kept may be of another file:
// when N > 0 the receiver's offset frame carries prefix_sha256 (1.1.0) or
// prefix_blake3 (1.2.0), the hash of the N bytes it holds. The sender hashes
// its own first N bytes (a local read) and appends only when they agree;
// its running hash then goes on over the bytes it sends, and becomes the
// trailer. When they differ it resets the stream without sending a byte and
// opens a new one whose header says "restart":true: the receiver then drops
// what it holds of that upload and answers offset 0 (and does not offer a
// stored file, below). A stored file of the header's name and size (and
// hash, when declared), with no kept partial upload of it, is offered as
// {"offset":size,"prefix_<hash>":its digest}: a sender whose file hashes the
// same sends just the trailer, and the receiver answers with the stored
// file. A sender that declares the hash in the header (it knows it already)
// may skip the prefix check: its upload is keyed by that digest, and the
// commit checks it.
//
// What the receiver's store records (store.Hash): a file knows the digests
// it was verified with. One received over 1.2.0 knows its BLAKE3 and not
// its SHA-256; one received over 1.0.0 or 1.1.0, or by upload_file, its
// SHA-256. The other is computed from the file the first time a reader
// needs it, and kept while the file is unchanged: list_files and read_file
// always answer with sha256 (so a BLAKE3-received file is hashed by SHA-256
// once, on the first of them, after the transfer) and list_files adds
// "blake3" when it is known; a 1.1.0 sender offered a file that arrived
// over 1.2.0 gets its SHA-256, and a 1.2.0 sender offered one that arrived
// otherwise gets its BLAKE3, each computed once. An unfinished upload
// without a declared hash has the same key in every version, so one begun
// over 1.1.0 resumes over 1.2.0 and the other way round: the receiver
// rehashes the kept bytes by the resuming stream's hash for its prefix
// member. A declared hash keys the upload with its algorithm
// (store.PartName).
//
// Disk bounds: an upload counts at its declared size against its sender's
// cap on unfinished uploads (Config.MaxPartial). To admit it, the receiver
// drops that sender's oldest partial uploads that are not in progress and
// names them in the offset frame's optional "dropped" member
// ([{"name"?,"size"?,"have"}], store.DroppedUpload; a sender that does not
// know the member ignores it, so the protocol version is unchanged). An
// upload over the cap alone, one that does not fit beside the sender's
// transfers in progress, or one over the store quota (Config.MaxStore) is
// refused with -32004 and data {"quota","limit_bytes","used_bytes","need_bytes"}.
//
// Every decoder here caps the frame's size and names what was wrong. The
// receiver's (header, trailer) refuse unknown members; the sender's (offset
// frame, final answer) ignore them, so that a receiver may add members, as
// "dropped" was added, without a new version.

// blobVersion is what one version of the blob protocol is on the wire.
type blobVersion struct {
	// id is the libp2p protocol ID.
	id libp2pproto.ID
	// alg is the integrity hash. Its name is the member of the header, the
	// trailer and the final answer that carries a digest, and, after
	// "prefix_", the offset frame's member for the kept bytes' digest.
	alg store.Hash
	// trailer: the hash may come last, in a trailer frame (1.1.0 on). The
	// header's is then optional, it may say "restart", and a resume is
	// checked by the prefix digest.
	trailer bool
}

// The blob protocol versions.
var (
	blob10 = &blobVersion{id: protocol.BlobProtocolID, alg: store.HashSHA256}
	blob11 = &blobVersion{id: protocol.BlobProtocolID11, alg: store.HashSHA256, trailer: true}
	blob12 = &blobVersion{id: protocol.BlobProtocolID12, alg: store.HashBLAKE3, trailer: true}
	// blobVersions are the versions a node serves, newest first.
	blobVersions = []*blobVersion{blob12, blob11, blob10}
)

// blobVersionOf returns the version of protocol id, nil when it is none.
func blobVersionOf(id libp2pproto.ID) *blobVersion {
	for _, v := range blobVersions {
		if v.id == id {
			return v
		}
	}
	return nil
}

// prefixMember is the offset frame's member for the kept bytes' digest.
func (v *blobVersion) prefixMember() string { return "prefix_" + string(v.alg) }

// MaxBlobHeader caps the header frame of a blob stream, in bytes.
const MaxBlobHeader = 4 << 10

// maxBlobTrailer caps the trailer frame of a 1.1.0 or 1.2.0 blob stream,
// in bytes.
const maxBlobTrailer = 1 << 10

// maxBlobReply caps a reply frame read by the sender.
const maxBlobReply = 64 << 10

// BlobHeader is the first frame of a blob stream: what the sender is about
// to send.
type BlobHeader struct {
	// Name is the plain file name to store the content under.
	Name string `json:"name"`
	// Size is the content's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the content's SHA-256 in lowercase hex. Required in 1.0.0;
	// optional in 1.1.0, whose trailer carries it; never in 1.2.0.
	SHA256 string `json:"sha256,omitempty"`
	// BLAKE3 is the content's BLAKE3-256 in lowercase hex: optional in
	// 1.2.0, whose trailer carries it; never in 1.0.0 or 1.1.0.
	BLAKE3 string `json:"blake3,omitempty"`
	// Session is an optional mesh session token (SPEC §6), which grants the
	// transfer like a policy grant of upload_file.
	Session string `json:"session,omitempty"`
	// Restart (1.1.0 and 1.2.0) tells the receiver to drop the bytes it
	// holds of this upload and start it from zero: the sender found they
	// are not the start of its file.
	Restart bool `json:"restart,omitempty"`
}

// sum returns the header's declared digest of alg, empty when none.
func (h BlobHeader) sum(alg store.Hash) string { return *alg.Pick(&h.SHA256, &h.BLAKE3) }

// blobOffset is the receiver's answer to the header.
type blobOffset struct {
	Offset *int64 `json:"offset,omitempty"`
	// PrefixSHA256 (1.1.0) and PrefixBLAKE3 (1.2.0), when Offset > 0, are
	// the hex digest of the Offset bytes the receiver holds.
	PrefixSHA256 string          `json:"prefix_sha256,omitempty"`
	PrefixBLAKE3 string          `json:"prefix_blake3,omitempty"`
	Error        *protocol.Error `json:"error,omitempty"`
	// Dropped names the sender's older unfinished uploads the receiver
	// removed to admit this one.
	Dropped []store.DroppedUpload `json:"dropped,omitempty"`
}

// prefix returns the prefix digest of alg, which must be Known (as every
// blobVersion's is), for reading or setting.
func (o *blobOffset) prefix(alg store.Hash) *string {
	return alg.Pick(&o.PrefixSHA256, &o.PrefixBLAKE3)
}

// blobTrailer is the sender's last frame in 1.1.0 ({"sha256"}) and 1.2.0
// ({"blake3"}): one of the two is set.
type blobTrailer struct {
	SHA256 string `json:"sha256,omitempty"`
	BLAKE3 string `json:"blake3,omitempty"`
}

// trailerFrame encodes the trailer of a stream hashed by alg.
func trailerFrame(alg store.Hash, sum string) []byte {
	var t blobTrailer
	*alg.Pick(&t.SHA256, &t.BLAKE3) = sum
	return jsonFrame(t)
}

// blobResult is the receiver's final frame: the stored file with the digest
// of the stream's version (sha256 in 1.0.0 and 1.1.0, blake3 in 1.2.0), or
// an error.
type blobResult struct {
	Filename string          `json:"filename"`
	Size     int64           `json:"size"`
	SHA256   string          `json:"sha256,omitempty"`
	BLAKE3   string          `json:"blake3,omitempty"`
	Error    *protocol.Error `json:"error,omitempty"`
}

// resultFrame encodes the final frame of a stored file over v: its digest
// of v's hash alone, which info must carry.
func resultFrame(v *blobVersion, info store.FileInfo) []byte {
	r := blobResult{Filename: info.Filename, Size: info.Size}
	*v.alg.Pick(&r.SHA256, &r.BLAKE3) = info.Sum(v.alg)
	return jsonFrame(r)
}

// sum returns the result's digest of alg.
func (r blobResult) sum(alg store.Hash) string { return *alg.Pick(&r.SHA256, &r.BLAKE3) }

// blobErrorFrame encodes {"error":{…}}.
func blobErrorFrame(perr *protocol.Error) []byte {
	b, _ := json.Marshal(struct {
		Error *protocol.Error `json:"error"`
	}{perr})
	return b
}

// DecodeBlobHeader decodes and checks a header frame of /mcpv2/blob/1.0.0.
// It accepts UTF-8 JSON (SPEC §2), exactly one JSON object with the members
// name, size, sha256 and optionally session, each once, spelt exactly so
// (encoding/json alone would take "NAME" for name), and nothing after it.
// The name must pass store.ValidateName, the size must be a non-negative
// integer, and sha256 must be 64 lowercase hex digits. Errors:
// CodeParseError when the frame is not JSON, CodeInvalidRequest when it is
// not such an object or exceeds MaxBlobHeader, CodeInvalidParams for a bad
// name, size or sha256. It is a pure function, safe to call concurrently.
func DecodeBlobHeader(b []byte) (BlobHeader, *protocol.Error) {
	return decodeBlobHeader(b, blob10)
}

// DecodeBlobHeader11 decodes and checks a header frame of
// /mcpv2/blob/1.1.0, as DecodeBlobHeader does, except that sha256 is
// optional (64 lowercase hex digits when present) and the boolean member
// restart is allowed. It is a pure function, safe to call concurrently.
func DecodeBlobHeader11(b []byte) (BlobHeader, *protocol.Error) {
	return decodeBlobHeader(b, blob11)
}

// decodeBlobHeader decodes and checks a header frame of version v as
// DecodeBlobHeader does for 1.0.0 and DecodeBlobHeader11 for 1.1.0; for
// 1.2.0 as DecodeBlobHeader11, with the optional member blake3 (the
// BLAKE3-256, 64 lowercase hex digits) in place of sha256, which it
// refuses. It is a pure function, safe to call concurrently.
func decodeBlobHeader(b []byte, v *blobVersion) (BlobHeader, *protocol.Error) {
	if len(b) > MaxBlobHeader {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidRequest, "blob: header of %d bytes exceeds the %d-byte cap", len(b), MaxBlobHeader)
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		return BlobHeader{}, protocol.Errorf(protocol.CodeParseError, "blob: the header is not UTF-8 JSON")
	}
	var h BlobHeader
	var sum string
	hashKey := string(v.alg)
	seen, err := decodeMembers(b, func(key string, raw json.RawMessage) error {
		switch key {
		case "name":
			return decodeString(raw, &h.Name)
		case hashKey:
			return decodeString(raw, &sum)
		case "session":
			return decodeString(raw, &h.Session)
		case "size":
			var err error
			if h.Size, err = strconv.ParseInt(string(raw), 10, 64); err != nil {
				return errors.New("size must be an integer number of bytes")
			}
			return nil
		case "restart":
			if v.trailer {
				return decodeBool(raw, &h.Restart)
			}
		}
		return errUnknownMember
	})
	if err == nil {
		required := []string{"name", "size", hashKey}
		if v.trailer {
			required = required[:2]
		}
		for _, k := range required {
			if !seen[k] {
				err = fmt.Errorf("member %q is missing", k)
				break
			}
		}
	}
	if err != nil {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidRequest, "blob: invalid header: %v", err)
	}
	if err := store.ValidateName(h.Name); err != nil {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidParams, "blob: %v", err)
	}
	if h.Size < 0 {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidParams, "blob: size %d is negative", h.Size)
	}
	if seen[hashKey] && !v.alg.Valid(sum) {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidParams, "blob: %s must be 64 lowercase hex digits", v.alg)
	}
	*v.alg.Pick(&h.SHA256, &h.BLAKE3) = sum
	return h, nil
}

// DecodeBlobTrailer decodes and checks the trailer frame of
// /mcpv2/blob/1.1.0: UTF-8 JSON, exactly {"sha256":"<64 lowercase hex
// digits>"} with nothing else, at most 1 KiB. It returns the hash. Errors
// are CodeParseError, CodeInvalidRequest or CodeInvalidParams, as
// DecodeBlobHeader's. It is a pure function, safe to call concurrently.
func DecodeBlobTrailer(b []byte) (string, *protocol.Error) {
	return decodeBlobTrailer(b, store.HashSHA256)
}

// decodeBlobTrailer decodes and checks the trailer frame of a stream
// hashed by alg as DecodeBlobTrailer does that of 1.1.0: for 1.2.0 exactly
// {"blake3":"<64 lowercase hex digits>"}. It is a pure function, safe to
// call concurrently.
func decodeBlobTrailer(b []byte, alg store.Hash) (string, *protocol.Error) {
	if len(b) > maxBlobTrailer {
		return "", protocol.Errorf(protocol.CodeInvalidRequest, "blob: trailer of %d bytes exceeds the %d-byte cap", len(b), maxBlobTrailer)
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		return "", protocol.Errorf(protocol.CodeParseError, "blob: the trailer is not UTF-8 JSON")
	}
	var sum string
	seen, err := decodeMembers(b, func(key string, raw json.RawMessage) error {
		if key == string(alg) {
			return decodeString(raw, &sum)
		}
		return errUnknownMember
	})
	if err == nil && !seen[string(alg)] {
		err = fmt.Errorf("member %q is missing", alg)
	}
	if err != nil {
		return "", protocol.Errorf(protocol.CodeInvalidRequest, "blob: invalid trailer: %v", err)
	}
	if !alg.Valid(sum) {
		return "", protocol.Errorf(protocol.CodeInvalidParams, "blob: the trailer's %s must be 64 lowercase hex digits", alg)
	}
	return sum, nil
}

// decodeBlobOffset decodes and checks the receiver's answer to the header
// of a stream of version v for a file of size bytes: UTF-8 JSON, at most
// maxBlobReply bytes, one object with either "error" (a JSON-RPC error
// object: an integer code other than 0, a string message) or "offset" (an
// integer 0..size) and then, optionally, v's prefix member (1.1.0 and on;
// 64 lowercase hex digits) and "dropped" (an array of store.DroppedUpload).
// Other members are ignored; a member twice is an error. The error says
// what was wrong. It is a pure function, safe to call concurrently.
func decodeBlobOffset(b []byte, v *blobVersion, size int64) (blobOffset, error) {
	var o blobOffset
	var prefix string
	seen, err := decodeReply(b, func(key string, raw json.RawMessage) error {
		switch key {
		case "offset":
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				return errors.New("must be an integer number of bytes")
			}
			if n < 0 || n > size {
				return fmt.Errorf("%d is outside 0..%d, the file's size", n, size)
			}
			o.Offset = &n
			return nil
		case "error":
			return decodeError(raw, &o.Error)
		case "dropped":
			if len(raw) == 0 || raw[0] != '[' {
				return errors.New("must be an array")
			}
			return json.Unmarshal(raw, &o.Dropped)
		}
		if v.trailer && key == v.prefixMember() {
			if err := decodeString(raw, &prefix); err != nil {
				return err
			}
			if !v.alg.Valid(prefix) {
				return errors.New("must be 64 lowercase hex digits")
			}
			*o.prefix(v.alg) = prefix
		}
		return nil // unknown: ignored
	})
	switch {
	case err != nil:
	case seen["error"] && seen["offset"]:
		err = errors.New(`both "offset" and "error"`)
	case !seen["error"] && !seen["offset"]:
		err = errors.New(`neither "offset" nor "error"`)
	}
	if err != nil {
		return blobOffset{}, fmt.Errorf("the receiver's offset frame %.100q: %v", b, err)
	}
	return o, nil
}

// decodeBlobResult decodes and checks the receiver's final answer on a
// stream of version v: UTF-8 JSON, at most maxBlobReply bytes, one object
// with either "error" (as decodeBlobOffset's) or the stored file's
// "filename" (a valid name), "size" (an integer, at least 0) and v's hash
// member (64 lowercase hex digits). Other members are ignored; a member
// twice is an error. It is a pure function, safe to call concurrently.
func decodeBlobResult(b []byte, v *blobVersion) (blobResult, error) {
	var r blobResult
	var sum string
	seen, err := decodeReply(b, func(key string, raw json.RawMessage) error {
		switch key {
		case "filename":
			if err := decodeString(raw, &r.Filename); err != nil {
				return err
			}
			return store.ValidateName(r.Filename)
		case "size":
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil || n < 0 {
				return errors.New("must be a non-negative integer number of bytes")
			}
			r.Size = n
			return nil
		case string(v.alg):
			if err := decodeString(raw, &sum); err != nil {
				return err
			}
			if !v.alg.Valid(sum) {
				return errors.New("must be 64 lowercase hex digits")
			}
			return nil
		case "error":
			return decodeError(raw, &r.Error)
		}
		return nil // unknown: ignored
	})
	if err == nil && !seen["error"] {
		for _, k := range []string{"filename", "size", string(v.alg)} {
			if !seen[k] {
				err = fmt.Errorf("member %q is missing", k)
				break
			}
		}
	}
	if err == nil && seen["error"] && (seen["filename"] || seen[string(v.alg)]) {
		err = errors.New(`both a stored file and "error"`)
	}
	if err != nil {
		return blobResult{}, fmt.Errorf("the receiver's answer %.100q: %v", b, err)
	}
	*v.alg.Pick(&r.SHA256, &r.BLAKE3) = sum
	return r, nil
}

// decodeReply checks the size and encoding of a frame the sender reads and
// walks its members (as decodeMembers, which refuses a member twice).
func decodeReply(b []byte, member func(key string, raw json.RawMessage) error) (map[string]bool, error) {
	if len(b) > maxBlobReply {
		return nil, fmt.Errorf("%d bytes exceed the %d-byte cap", len(b), maxBlobReply)
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		return nil, errors.New("not UTF-8 JSON")
	}
	return decodeMembers(b, member)
}

// decodeError decodes an "error" member: an object with an integer code
// other than 0, a string message and optionally data.
func decodeError(raw json.RawMessage, dst **protocol.Error) error {
	var e struct {
		Code    *int    `json:"code"`
		Message *string `json:"message"`
		Data    any     `json:"data"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &e) != nil || e.Code == nil || *e.Code == 0 || e.Message == nil {
		return errors.New(`must be an object with an integer "code" other than 0 and a string "message"`)
	}
	*dst = &protocol.Error{Code: *e.Code, Message: *e.Message, Data: e.Data}
	return nil
}

// errUnknownMember is returned by a decodeMembers callback for a member it
// does not know.
var errUnknownMember = errors.New("unknown member")

// decodeMembers walks the members of the JSON object b (valid JSON) with the
// tokenizer, so that duplicates, case variants and unknown members are
// refused: member is called once per member with its raw value. It returns
// the names seen.
func decodeMembers(b []byte, member func(key string, raw json.RawMessage) error) (map[string]bool, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, fmt.Errorf("member %q appears twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if err := member(key, raw); errors.Is(err, errUnknownMember) {
			return nil, fmt.Errorf("unknown member %.40q", key)
		} else if err != nil {
			return nil, fmt.Errorf("member %q: %v", key, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the object")
	}
	return seen, nil
}

func decodeString(raw json.RawMessage, dst *string) error {
	if len(raw) == 0 || raw[0] != '"' {
		return errors.New("must be a string")
	}
	return json.Unmarshal(raw, dst)
}

func decodeBool(raw json.RawMessage, dst *bool) error {
	switch string(raw) {
	case "true", "false":
		*dst = string(raw) == "true"
		return nil
	}
	return errors.New("must be true or false")
}
