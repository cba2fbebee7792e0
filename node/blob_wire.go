package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

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
// Frames are transport.WriteFrame's (an unsigned varint length, then JSON).
// The receiver appends to a partial upload kept under a hidden name in its
// file store and commits it (an atomic rename) only when the whole file
// hashes to the declared sha256: 1.0.0's header, or 1.1.0's trailer (and
// its header's too, when it has one). A broken stream leaves the partial
// upload in place; the same sender sending the same file again resumes at
// N, the receiver's offset.
//
// In 1.1.0 a header without sha256 keys the partial upload by sender, name
// and size alone, so the bytes kept may be of another file: when N > 0 the
// receiver's offset frame carries prefix_sha256, the SHA-256 of the N bytes
// it holds. The sender hashes its own first N bytes (a local read) and
// appends only when they agree; its running hash then goes on over the
// bytes it sends, and becomes the trailer. When they differ it resets the
// stream without sending a byte and opens a new one whose header says
// "restart":true: the receiver then drops what it holds of that upload and
// answers offset 0 (and does not offer a stored file, below). A stored file
// of the header's name and size (and sha256, when declared), with no kept
// partial upload of it, is offered as {"offset":size,"prefix_sha256":its
// hash}: a sender whose file hashes the same sends just the trailer, and
// the receiver answers with the stored file. A sender that declares
// sha256 in a 1.1.0 header (it knows the hash already) may skip the prefix
// check: its upload is keyed by that hash, and the commit checks it.
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

// MaxBlobHeader caps the header frame of a blob stream, in bytes.
const MaxBlobHeader = 4 << 10

// maxBlobTrailer caps the trailer frame of a 1.1.0 blob stream, in bytes.
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
	// optional in 1.1.0, whose trailer carries it.
	SHA256 string `json:"sha256,omitempty"`
	// Session is an optional mesh session token (SPEC §6), which grants the
	// transfer like a policy grant of upload_file.
	Session string `json:"session,omitempty"`
	// Restart (1.1.0 only) tells the receiver to drop the bytes it holds of
	// this upload and start it from zero: the sender found they are not the
	// start of its file.
	Restart bool `json:"restart,omitempty"`
}

// blobOffset is the receiver's answer to the header.
type blobOffset struct {
	Offset *int64 `json:"offset,omitempty"`
	// PrefixSHA256 (1.1.0, when Offset > 0) is the hex SHA-256 of the
	// Offset bytes the receiver holds.
	PrefixSHA256 string          `json:"prefix_sha256,omitempty"`
	Error        *protocol.Error `json:"error,omitempty"`
	// Dropped names the sender's older unfinished uploads the receiver
	// removed to admit this one.
	Dropped []store.DroppedUpload `json:"dropped,omitempty"`
}

// blobTrailer is the sender's last frame in 1.1.0.
type blobTrailer struct {
	SHA256 string `json:"sha256"`
}

// blobResult is the receiver's final frame: the stored file, or an error.
type blobResult struct {
	Filename string          `json:"filename"`
	Size     int64           `json:"size"`
	SHA256   string          `json:"sha256"`
	Error    *protocol.Error `json:"error,omitempty"`
}

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
	return decodeBlobHeader(b, false)
}

// DecodeBlobHeader11 decodes and checks a header frame of
// /mcpv2/blob/1.1.0, as DecodeBlobHeader does, except that sha256 is
// optional (64 lowercase hex digits when present) and the boolean member
// restart is allowed. It is a pure function, safe to call concurrently.
func DecodeBlobHeader11(b []byte) (BlobHeader, *protocol.Error) {
	return decodeBlobHeader(b, true)
}

func decodeBlobHeader(b []byte, v11 bool) (BlobHeader, *protocol.Error) {
	if len(b) > MaxBlobHeader {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidRequest, "blob: header of %d bytes exceeds the %d-byte cap", len(b), MaxBlobHeader)
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		return BlobHeader{}, protocol.Errorf(protocol.CodeParseError, "blob: the header is not UTF-8 JSON")
	}
	var h BlobHeader
	seen, err := decodeMembers(b, func(key string, raw json.RawMessage) error {
		switch key {
		case "name":
			return decodeString(raw, &h.Name)
		case "sha256":
			return decodeString(raw, &h.SHA256)
		case "session":
			return decodeString(raw, &h.Session)
		case "size":
			var err error
			if h.Size, err = strconv.ParseInt(string(raw), 10, 64); err != nil {
				return errors.New("size must be an integer number of bytes")
			}
			return nil
		case "restart":
			if v11 {
				switch string(raw) {
				case "true", "false":
					h.Restart = string(raw) == "true"
					return nil
				}
				return errors.New("must be true or false")
			}
		}
		return errUnknownMember
	})
	if err == nil {
		required := []string{"name", "size", "sha256"}
		if v11 {
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
	if (!v11 || seen["sha256"]) && !store.ValidSHA256(h.SHA256) {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidParams, "blob: sha256 must be 64 lowercase hex digits")
	}
	return h, nil
}

// DecodeBlobTrailer decodes and checks the trailer frame of
// /mcpv2/blob/1.1.0: UTF-8 JSON, exactly {"sha256":"<64 lowercase hex
// digits>"} with nothing else, at most 1 KiB. It returns the hash. Errors
// are CodeParseError, CodeInvalidRequest or CodeInvalidParams, as
// DecodeBlobHeader's. It is a pure function, safe to call concurrently.
func DecodeBlobTrailer(b []byte) (string, *protocol.Error) {
	if len(b) > maxBlobTrailer {
		return "", protocol.Errorf(protocol.CodeInvalidRequest, "blob: trailer of %d bytes exceeds the %d-byte cap", len(b), maxBlobTrailer)
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		return "", protocol.Errorf(protocol.CodeParseError, "blob: the trailer is not UTF-8 JSON")
	}
	var sum string
	seen, err := decodeMembers(b, func(key string, raw json.RawMessage) error {
		if key == "sha256" {
			return decodeString(raw, &sum)
		}
		return errUnknownMember
	})
	if err == nil && !seen["sha256"] {
		err = errors.New(`member "sha256" is missing`)
	}
	if err != nil {
		return "", protocol.Errorf(protocol.CodeInvalidRequest, "blob: invalid trailer: %v", err)
	}
	if !store.ValidSHA256(sum) {
		return "", protocol.Errorf(protocol.CodeInvalidParams, "blob: the trailer's sha256 must be 64 lowercase hex digits")
	}
	return sum, nil
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
