package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The hot path writes its few fixed JSON shapes (a slot, a response, an
// audit line) by appending to one buffer: encoding/json would reflect over
// the struct and re-scan every json.RawMessage member (params, results) to
// compact it, a pass over each payload for nothing, since those members are
// valid JSON where they are made. Tests hold each shape equal to
// encoding/json's output.

// AppendJSONString appends s as a JSON string, byte for byte what
// encoding/json writes. Plain printable ASCII, which PeerIDs, multiaddrs,
// method and skill names almost always are, is quoted as is (Verbatim);
// anything else goes through encoding/json, escapes and all.
func AppendJSONString(b []byte, s string) []byte {
	if !verbatimString(s) {
		// A string always encodes. The clone keeps s from escaping (to
		// the interface json.Marshal takes), so that a caller's slot or
		// record can stay on its stack.
		q, _ := json.Marshal(strings.Clone(s))
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// verbatimString reports that encoding/json writes the string s between
// quotes as it is: ASCII from space on, without a quote, a backslash or the
// HTML characters <, > and & (which it escapes). It looks at eight bytes at
// a time (the protocol's own fields, PeerIDs and multiaddrs, are some 50
// bytes long).
func verbatimString(s string) bool {
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		if escapeBits(w) != 0 {
			return false
		}
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if !verbatimByte(s[i]) {
			return false
		}
	}
	return true
}

func verbatimByte(c byte) bool {
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// escapeBits is nonzero when a byte of w is one encoding/json escapes
// (below 0x20, a quote, a backslash, <, >, &) or is >= 0x80, and never
// otherwise (see stopBits for how). Pairs that differ in one bit are
// tested together: a quote (0x22) or & (0x26) is 0x26 once bit 2 is set,
// < (0x3c) or > (0x3e) is 0x3e once bit 1 is.
func escapeBits(w uint64) uint64 {
	qa := (w | lsb*0x04) ^ (lsb * 0x26)
	lg := (w | lsb*0x02) ^ (lsb * 0x3e)
	bs := w ^ (lsb * '\\')
	return ((qa - lsb) | (lg - lsb) | (bs - lsb) | (w - lsb*0x20) | w) & msb
}

// AppendSlot appends the encoding of s: the members encoding/json writes for
// a Slot, in the same order. s.ID and s.Params are written as they are and
// must be valid JSON (or empty, and then left out); [Slot.Check] is for
// slots whose params come from outside.
func AppendSlot(b []byte, s *Slot) []byte {
	b = appendSlotHead(b, s)
	if len(s.Params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, s.Params...)
	}
	return appendSlotTail(b, s)
}

// AppendCallSlot is AppendSlot for a tools/call slot whose params are
// {"name":skill,"arguments":args} (AppendCallParams), written in place
// rather than built first; s.Params is not used. args must be valid JSON
// (or empty, and then left out).
func AppendCallSlot(b []byte, s *Slot, skill string, args json.RawMessage) []byte {
	b = appendSlotHead(b, s)
	b = append(b, `,"params":`...)
	b = AppendCallParams(b, skill, args)
	return appendSlotTail(b, s)
}

// appendSlotHead appends the members of s before its params.
func appendSlotHead(b []byte, s *Slot) []byte {
	b = append(b, `{"jsonrpc":`...)
	b = AppendJSONString(b, s.JSONRPC)
	if len(s.ID) > 0 {
		b = append(b, `,"id":`...)
		b = append(b, s.ID...)
	}
	b = append(b, `,"method":`...)
	return AppendJSONString(b, s.Method)
}

// appendSlotTail appends the members of s after its params, and closes it.
func appendSlotTail(b []byte, s *Slot) []byte {
	if c := s.Context; c != nil {
		b = append(b, `,"context":{`...)
		open := len(b)
		member := func(name, v string) {
			if v == "" {
				return
			}
			if len(b) > open {
				b = append(b, ',')
			}
			b = append(b, name...)
			b = AppendJSONString(b, v)
		}
		member(`"provider":`, c.Provider)
		member(`"session":`, c.Session)
		member(`"forwarded":`, c.Forwarded)
		member(`"traceparent":`, c.Traceparent)
		b = append(b, '}')
	}
	return append(b, '}')
}

// Check reports a slot whose id or params are not valid JSON, which
// AppendSlot would write as they are.
func (s *Slot) Check() error {
	if len(s.ID) > 0 && (!validID(s.ID) || !ValidJSON(s.ID)) {
		return fmt.Errorf("protocol: slot id %.40s is not a JSON string, number or null", s.ID)
	}
	if len(s.Params) > 0 && !ValidJSON(s.Params) {
		return fmt.Errorf("protocol: the params of %q are not valid JSON", s.Method)
	}
	return nil
}

// AppendCallParams appends tools/call params {"name":name,"arguments":args};
// args must be valid JSON (or empty, and then left out).
func AppendCallParams(b []byte, name string, args json.RawMessage) []byte {
	b = append(b, `{"name":`...)
	b = AppendJSONString(b, name)
	if len(args) > 0 {
		b = append(b, `,"arguments":`...)
		b = append(b, args...)
	}
	return append(b, '}')
}

// CallMessage is a one-slot tools/call message (id 1) of skill with args,
// as a face hands it to a node's Handle.
func CallMessage(skill string, args json.RawMessage) []byte {
	return append(AppendCallParams([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`), skill, args), '}')
}

// OneResult reads the answer to a one-slot message: its result, or its
// error; refused is a whole-message refusal (Handle's), returned as it is.
func OneResult(out []byte, refused *Error) (json.RawMessage, *Error) {
	if refused != nil {
		return nil, refused
	}
	resps, err := ParseResponses(out)
	if err != nil || len(resps) != 1 {
		return nil, Errorf(CodeInternal, "internal error: the node's answer could not be read")
	}
	if resps[0].Error != nil {
		return nil, resps[0].Error
	}
	return resps[0].Result, nil
}
