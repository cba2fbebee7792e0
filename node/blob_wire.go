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
// Frames are transport.WriteFrame's (an unsigned varint length, then JSON).
// The receiver appends to a partial upload kept under a hidden name in its
// file store and commits it (an atomic rename) only when the whole file
// hashes to the declared sha256. A broken stream leaves the partial upload
// in place; the same sender sending the same file again resumes at N, the
// receiver's offset.
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

// maxBlobReply caps a reply frame read by the sender.
const maxBlobReply = 64 << 10

// BlobHeader is the first frame of a /mcpv2/blob/1.0.0 stream: what the
// sender is about to send.
type BlobHeader struct {
	// Name is the plain file name to store the content under.
	Name string `json:"name"`
	// Size is the content's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the content's SHA-256 in lowercase hex.
	SHA256 string `json:"sha256"`
	// Session is an optional mesh session token (SPEC §6), which grants the
	// transfer like a policy grant of upload_file.
	Session string `json:"session,omitempty"`
}

// blobOffset is the receiver's answer to the header.
type blobOffset struct {
	Offset *int64          `json:"offset,omitempty"`
	Error  *protocol.Error `json:"error,omitempty"`
	// Dropped names the sender's older unfinished uploads the receiver
	// removed to admit this one.
	Dropped []store.DroppedUpload `json:"dropped,omitempty"`
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

// DecodeBlobHeader decodes and checks a blob header frame. It accepts UTF-8
// JSON (SPEC §2), exactly
// one JSON object with the members name, size, sha256 and optionally session,
// each once, spelt exactly so (encoding/json alone would take "NAME" for
// name), and nothing after it. The name must pass store.ValidateName, the size
// must be a non-negative integer, and sha256 must be 64 lowercase hex digits.
// Errors: CodeParseError when the frame is not JSON, CodeInvalidRequest when
// it is not such an object or exceeds MaxBlobHeader, CodeInvalidParams for a
// bad name, size or sha256. It is a pure function, safe to call concurrently.
func DecodeBlobHeader(b []byte) (BlobHeader, *protocol.Error) {
	if len(b) > MaxBlobHeader {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidRequest, "blob: header of %d bytes exceeds the %d-byte cap", len(b), MaxBlobHeader)
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		return BlobHeader{}, protocol.Errorf(protocol.CodeParseError, "blob: the header is not UTF-8 JSON")
	}
	h, err := decodeHeaderMembers(b)
	if err != nil {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidRequest, "blob: invalid header: %v", err)
	}
	if err := store.ValidateName(h.Name); err != nil {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidParams, "blob: %v", err)
	}
	if h.Size < 0 {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidParams, "blob: size %d is negative", h.Size)
	}
	if !store.ValidSHA256(h.SHA256) {
		return BlobHeader{}, protocol.Errorf(protocol.CodeInvalidParams, "blob: sha256 must be 64 lowercase hex digits")
	}
	return h, nil
}

// decodeHeaderMembers walks the object's members with the tokenizer, so that
// duplicates, case variants and unknown members are refused. b is valid JSON.
func decodeHeaderMembers(b []byte) (BlobHeader, error) {
	var h BlobHeader
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return h, errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return h, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return h, fmt.Errorf("member %q appears twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return h, err
		}
		switch key {
		case "name":
			err = decodeString(raw, &h.Name)
		case "sha256":
			err = decodeString(raw, &h.SHA256)
		case "session":
			err = decodeString(raw, &h.Session)
		case "size":
			h.Size, err = strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				err = errors.New("size must be an integer number of bytes")
			}
		default:
			return h, fmt.Errorf("unknown member %.40q", key)
		}
		if err != nil {
			return h, fmt.Errorf("member %q: %v", key, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return h, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return h, errors.New("data after the header object")
	}
	for _, k := range []string{"name", "size", "sha256"} {
		if !seen[k] {
			return h, fmt.Errorf("member %q is missing", k)
		}
	}
	return h, nil
}

func decodeString(raw json.RawMessage, dst *string) error {
	if len(raw) == 0 || raw[0] != '"' {
		return errors.New("must be a string")
	}
	return json.Unmarshal(raw, dst)
}
