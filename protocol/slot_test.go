package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// noID marks an expected slot without an id member (a notification).
const noID = "<none>"

// wantSlot is what a test expects of one parsed slot.
type wantSlot struct {
	id     string // the id exactly as it was on the wire, or noID
	method string // checked when code is 0
	code   int    // 0: no Err; else the code of Slot.Err
}

func checkSlots(t *testing.T, got []Slot, want []wantSlot) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d slots, want %d", len(got), len(want))
	}
	for i, w := range want {
		s := got[i]
		gotID := noID
		if s.ID != nil {
			gotID = string(s.ID)
		}
		if gotID != w.id {
			t.Errorf("slot %d: id = %s, want %s", i, gotID, w.id)
		}
		if s.IsNotification() != (w.id == noID) {
			t.Errorf("slot %d: IsNotification = %v, want %v", i, s.IsNotification(), w.id == noID)
		}
		switch {
		case w.code == 0 && s.Err != nil:
			t.Errorf("slot %d: unexpected Err %v", i, s.Err)
		case w.code != 0 && s.Err == nil:
			t.Errorf("slot %d: Err = nil, want code %d", i, w.code)
		case w.code != 0 && s.Err.Code != w.code:
			t.Errorf("slot %d: Err = %v, want code %d", i, s.Err, w.code)
		case w.code == 0 && s.Method != w.method:
			t.Errorf("slot %d: method = %q, want %q", i, s.Method, w.method)
		case w.code == 0 && s.JSONRPC != "2.0":
			t.Errorf("slot %d: jsonrpc = %q", i, s.JSONRPC)
		}
		if s.Err != nil && s.Err.Code == CodeInvalidRequest && s.ID == nil {
			// JSON-RPC 2.0 §5: an Invalid Request is answered, with a null
			// id when the id cannot be read; it is not a notification.
			t.Errorf("slot %d: invalid slot has no id, so it would get no response", i)
		}
	}
}

func TestParseRequest(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"query":"Hello"}},"context":{"provider":"gemini"}}`
	tests := []struct {
		name    string
		in      string
		isBatch bool
		slots   []wantSlot
	}{
		{"single object (SPEC example)", call, false, []wantSlot{{"2", "tools/call", 0}}},
		{"single notification", `{"jsonrpc":"2.0","method":"tools/list"}`, false, []wantSlot{{noID, "tools/list", 0}}},
		{"null id is not a notification", `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, false, []wantSlot{{"null", "tools/list", 0}}},
		{"string id verbatim", `{"jsonrpc":"2.0","id":"req-1","method":"agent/card"}`, false, []wantSlot{{`"req-1"`, "agent/card", 0}}},
		{"escaped string id verbatim", `{"jsonrpc":"2.0","id":"caf\u00e9\"x","method":"agent/card"}`, false, []wantSlot{{`"caf\u00e9\"x"`, "agent/card", 0}}},
		{"empty string id", `{"jsonrpc":"2.0","id":"","method":"agent/card"}`, false, []wantSlot{{`""`, "agent/card", 0}}},
		{"zero id", `{"jsonrpc":"2.0","id":0,"method":"agent/card"}`, false, []wantSlot{{`0`, "agent/card", 0}}},
		{"negative id", `{"jsonrpc":"2.0","id":-7,"method":"agent/card"}`, false, []wantSlot{{`-7`, "agent/card", 0}}},
		{"fraction and exponent id verbatim", `{"jsonrpc":"2.0","id":1.50e3,"method":"agent/card"}`, false, []wantSlot{{`1.50e3`, "agent/card", 0}}},
		{"huge number id verbatim", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"x"}`, false, []wantSlot{{`123456789012345678901234567890`, "x", 0}}},
		{"whitespace around", " \r\n\t" + call + "\n\n ", false, []wantSlot{{"2", "tools/call", 0}}},
		{"whitespace around a batch", "\n[ \n" + call + " ,\t" + call + "\n]\r\n", true, []wantSlot{{"2", "tools/call", 0}, {"2", "tools/call", 0}}},
		{"batch of one", "[" + call + "]", true, []wantSlot{{"2", "tools/call", 0}}},
		{"batch keeps order", `[{"jsonrpc":"2.0","id":"c","method":"m3"},{"jsonrpc":"2.0","id":"a","method":"m1"},{"jsonrpc":"2.0","method":"note"},{"jsonrpc":"2.0","id":"b","method":"m2"}]`,
			true, []wantSlot{{`"c"`, "m3", 0}, {`"a"`, "m1", 0}, {noID, "note", 0}, {`"b"`, "m2", 0}}},
		{"batch of notifications", `[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]`, true, []wantSlot{{noID, "a", 0}, {noID, "b", 0}}},
		{"every provider", `[{"jsonrpc":"2.0","id":1,"method":"x","context":{"provider":"claude"}},{"jsonrpc":"2.0","id":2,"method":"x","context":{"provider":"openai"}},{"jsonrpc":"2.0","id":3,"method":"x","context":{"provider":"gemini"}},{"jsonrpc":"2.0","id":4,"method":"x","context":{"provider":"deepseek"}}]`,
			true, []wantSlot{{"1", "x", 0}, {"2", "x", 0}, {"3", "x", 0}, {"4", "x", 0}}},
		{"unknown provider on a single slot", `{"jsonrpc":"2.0","id":9,"method":"tools/call","context":{"provider":"mistral"}}`, false, []wantSlot{{"9", "", CodeUnsupportedProvider}}},
		{"provider names are case-sensitive", `{"jsonrpc":"2.0","id":9,"method":"tools/call","context":{"provider":"Claude"}}`, false, []wantSlot{{"9", "", CodeUnsupportedProvider}}},
		{"malformed single object keeps its id", `{"jsonrpc":"1.0","id":"x","method":"tools/list"}`, false, []wantSlot{{`"x"`, "", CodeInvalidRequest}}},
		{"empty object", `{}`, false, []wantSlot{{"null", "", CodeInvalidRequest}}},
		{"malformed slots in a batch", `[
			{"jsonrpc":"2.0","id":1,"method":"tools/list"},
			42,
			{"jsonrpc":"1.0","id":3,"method":"tools/list"},
			{"jsonrpc":"2.0","id":4},
			{"jsonrpc":"2.0","id":{},"method":"tools/list"},
			{"jsonrpc":"2.0","id":[],"method":"tools/list"},
			{"jsonrpc":"2.0","id":true,"method":"tools/list"},
			{"jsonrpc":"2.0","id":8,"method":5},
			{"jsonrpc":"2.0","id":"nine","method":"tools/call","context":"gemini"},
			{"jsonrpc":"2.0","id":10,"method":"tools/call","context":{"provider":"mistral"}},
			{"jsonrpc":"2.0","method":"tools/list"},
			null,
			"slot",
			[],
			{"jsonrpc":"2.0","id":15,"method":"agent/card"},
			{"jsonrpc":2.0,"id":16,"method":"tools/list"},
			{"jsonrpc":"2.0","id":17,"method":"tools/call","context":{"provider":7}},
			{"jsonrpc":"2.0","id":false,"method":"tools/list"},
			{"id":19,"method":"tools/list"},
			{"jsonrpc":"2.0"},
			{"jsonrpc":"1.0","method":"tools/list"},
			{"jsonrpc":"2.0","method":"tools/call","context":{"provider":"bogus"}},
			{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"ping"},"context":{"provider":"claude","session":"abc.def"}},
			{"jsonrpc":"2.0","id":24,"method":""},
			{"jsonrpc":"2.0","id":25,"method":"tools/call","context":{"session":5}}
		]`, true, []wantSlot{
			{"1", "tools/list", 0},
			{"null", "", CodeInvalidRequest},    // not an object
			{"3", "", CodeInvalidRequest},       // jsonrpc 1.0
			{"4", "", CodeInvalidRequest},       // no method
			{"null", "", CodeInvalidRequest},    // id {}
			{"null", "", CodeInvalidRequest},    // id []
			{"null", "", CodeInvalidRequest},    // id true
			{"8", "", CodeInvalidRequest},       // method is a number
			{`"nine"`, "", CodeInvalidRequest},  // context is a string
			{"10", "", CodeUnsupportedProvider}, // unknown provider
			{noID, "tools/list", 0},             // a notification
			{"null", "", CodeInvalidRequest},    // null
			{"null", "", CodeInvalidRequest},    // a string
			{"null", "", CodeInvalidRequest},    // an array
			{"15", "agent/card", 0},             // intact after the bad ones
			{"16", "", CodeInvalidRequest},      // jsonrpc is a number
			{"17", "", CodeInvalidRequest},      // provider is a number
			{"null", "", CodeInvalidRequest},    // id false
			{"19", "", CodeInvalidRequest},      // jsonrpc missing
			{"null", "", CodeInvalidRequest},    // neither id nor method: invalid, answered with null id
			{"null", "", CodeInvalidRequest},    // jsonrpc 1.0 without id: invalid, not a notification
			{noID, "", CodeUnsupportedProvider}, // a valid notification with a bad provider: no response
			{"23", "tools/call", 0},             // intact
			{"24", "", CodeInvalidRequest},      // empty method
			{"25", "", CodeInvalidRequest},      // session is a number
		}},
		{"member names are case-sensitive", `[
			{"jsonrpc":"2.0","ID":5,"method":"tools/list"},
			{"jsonrpc":"2.0","id":6,"Method":"tools/list"},
			{"JSONRPC":"2.0","id":7,"method":"tools/list"},
			{"jsonrpc":"2.0","id":8,"method":"tools/call","context":{"Provider":"claude"}},
			{"jsonrpc":"2.0","id":9,"method":"tools/call","Params":{"name":"ping"}},
			{"jsonrpc":"2.0","ID":10,"method":7},
			{"jsonrpc":"2.0","id":11,"ID":12,"method":"tools/list"}
		]`, true, []wantSlot{
			{"null", "", CodeInvalidRequest}, // "ID" is not the id
			{"6", "", CodeInvalidRequest},
			{"7", "", CodeInvalidRequest},
			{"8", "", CodeInvalidRequest},
			{"9", "", CodeInvalidRequest},
			{"null", "", CodeInvalidRequest}, // wrong type, and "ID" is still not the id
			{"11", "", CodeInvalidRequest},   // the id is the exact "id"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, perr := ParseRequest([]byte(tc.in))
			if perr != nil {
				t.Fatalf("ParseRequest refused the message: %v", perr)
			}
			if req.IsBatch != tc.isBatch {
				t.Errorf("IsBatch = %v, want %v", req.IsBatch, tc.isBatch)
			}
			checkSlots(t, req.Slots, tc.slots)
		})
	}
}

func TestParseRequestFields(t *testing.T) {
	in := `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"query":"Hello"}},"context":{"provider":"gemini","session":"cGF5bG9hZA.00ff"}},` +
		`{"jsonrpc":"2.0","id":"t","method":"tools/list","params":{}}]`
	req, perr := ParseRequest([]byte(in))
	if perr != nil {
		t.Fatal(perr)
	}
	s := req.Slots[0]
	if string(s.Params) != `{"name":"ask","arguments":{"query":"Hello"}}` {
		t.Errorf("params = %s; want them verbatim", s.Params)
	}
	if s.Context == nil || s.Context.Provider != "gemini" || s.Context.Session != "cGF5bG9hZA.00ff" {
		t.Errorf("context = %+v", s.Context)
	}
	var p CallParams
	if err := json.Unmarshal(s.Params, &p); err != nil || p.Name != "ask" || string(p.Arguments) != `{"query":"Hello"}` {
		t.Errorf("CallParams = %+v, %v", p, err)
	}
	if s2 := req.Slots[1]; s2.Context != nil || string(s2.Params) != `{}` || string(s2.ID) != `"t"` {
		t.Errorf("slot 1 = %+v", s2)
	}
}

func TestParseRequestRefused(t *testing.T) {
	slot := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	batch := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = slot
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	tests := []struct {
		name string
		in   string
		code int
	}{
		{"101 slots", batch(MaxBatchSize + 1), CodeInvalidRequest},
		{"1000 slots", batch(1000), CodeInvalidRequest},
		{"101 notifications", "[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","method":"x"},`, 101), ",") + "]", CodeInvalidRequest},
		{"101 malformed slots", "[" + strings.TrimSuffix(strings.Repeat("1,", 101), ",") + "]", CodeInvalidRequest},
		{"empty array", `[]`, CodeInvalidRequest},
		{"empty array with whitespace", " [ \n ] ", CodeInvalidRequest},
		{"number", `42`, CodeInvalidRequest},
		{"string", `"tools/list"`, CodeInvalidRequest},
		{"null", `null`, CodeInvalidRequest},
		{"true", `true`, CodeInvalidRequest},
		{"empty input", ``, CodeParseError},
		{"only whitespace", " \n\t ", CodeParseError},
		{"truncated object", `{"jsonrpc":"2.0","id":1,"method":"tools/list"`, CodeParseError},
		{"truncated batch", `[` + slot + `,` + slot, CodeParseError},
		{"trailing comma", `[` + slot + `,]`, CodeParseError},
		{"two objects", slot + slot, CodeParseError},
		{"two objects separated by whitespace", slot + "\n" + slot, CodeParseError},
		{"trailing garbage", slot + "x", CodeParseError},
		{"single quotes", `{'jsonrpc':'2.0'}`, CodeParseError},
		{"invalid JSON inside a batch", `[` + slot + `,{"id":1,}]`, CodeParseError},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"x\"}", CodeParseError},
		{"non-JSON whitespace before (NBSP)", "\u00a0" + slot, CodeParseError},
		{"non-JSON whitespace after (NEL)", slot + "\u0085", CodeParseError},
		{"byte order mark", "\ufeff" + slot, CodeParseError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, perr := ParseRequest([]byte(tc.in))
			if perr == nil {
				t.Fatalf("ParseRequest accepted it: %d slots, batch %v", len(req.Slots), req.IsBatch)
			}
			if perr.Code != tc.code {
				t.Errorf("code = %d (%s), want %d", perr.Code, perr.Message, tc.code)
			}
			if len(req.Slots) != 0 {
				t.Errorf("a refused message still has %d slots; nothing may run", len(req.Slots))
			}
		})
	}
}

func TestParseRequestBatchLimit(t *testing.T) {
	for _, n := range []int{1, 2, 99, MaxBatchSize} {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i)
		}
		req, perr := ParseRequest([]byte("[" + strings.Join(parts, ",") + "]"))
		if perr != nil {
			t.Fatalf("%d slots refused: %v", n, perr)
		}
		if len(req.Slots) != n || !req.IsBatch {
			t.Fatalf("%d slots: got %d, batch %v", n, len(req.Slots), req.IsBatch)
		}
		for i, s := range req.Slots {
			if string(s.ID) != fmt.Sprint(i) || s.Err != nil {
				t.Fatalf("%d slots: slot %d = id %s err %v; want order kept", n, i, s.ID, s.Err)
			}
		}
	}
	if MaxBatchSize != 100 {
		t.Errorf("MaxBatchSize = %d, SPEC §2 says 100", MaxBatchSize)
	}
}

// TestParseRequestErrorTexts checks that refusals name the problem and that
// per-slot errors do not leak Go type names.
func TestParseRequestErrorTexts(t *testing.T) {
	req, _ := ParseRequest([]byte(`[{"jsonrpc":"2.0","id":1,"method":5},{"jsonrpc":"2.0","id":2,"method":"x","context":{"provider":"mistral"}}]`))
	if m := req.Slots[0].Err.Message; !strings.Contains(m, "method") {
		t.Errorf("wrong-type message = %q; want it to name the field", m)
	}
	if m := req.Slots[0].Err.Message; strings.Contains(m, "protocol.") || strings.Contains(m, "Go value") || strings.Contains(m, "json:") {
		t.Errorf("wrong-type message leaks Go internals: %q", m)
	}
	if m := req.Slots[1].Err.Message; !strings.Contains(m, "mistral") {
		t.Errorf("provider message = %q; want it to name the provider", m)
	}
	_, perr := ParseRequest([]byte("[" + strings.Repeat(`1,`, 100) + "1]"))
	if perr == nil || !strings.Contains(perr.Message, "101") || !strings.Contains(perr.Message, "100") {
		t.Errorf("oversize batch refusal = %v; want it to name 101 and the limit 100", perr)
	}
}

// allocated returns the bytes allocated on the heap while f ran. The
// package's tests do not run in parallel, so nothing else allocates much
// meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// allocSlack is what any message may allocate beyond allocFactor times its
// size: the refusal, the slot headers, the decoder's small state.
// raceSlotSlack is what each slot may add under the race detector, which
// makes sync.Pool drop a quarter of its items, so that the JSON decoder's
// pooled state (about 1.5 KiB) is sometimes made anew for a slot: still a
// constant per slot, and at most MaxBatchSize of them.
const (
	allocFactor   = 4
	allocSlack    = 64 << 10
	raceSlotSlack = 2 << 10
)

// allocLimit is how many bytes parsing a message of size bytes may
// allocate.
func allocLimit(size int) uint64 {
	limit := allocFactor*size + allocSlack
	if raceEnabled {
		limit += MaxBatchSize * raceSlotSlack
	}
	return uint64(limit)
}

// zeroArray returns `[0,0,…,0]` of exactly size bytes (size odd, >= 3).
func zeroArray(size int) []byte {
	b := make([]byte, 0, size)
	b = append(b, '[')
	b = append(b, bytes.Repeat([]byte("0,"), (size-3)/2)...)
	return append(b, '0', ']')
}

// TestParseRequestMemory is the attack of issue 7: an 8 MB message that
// decodes into millions of values must be refused with -32600 before any of
// them is materialized, allocating at most allocFactor times its size.
func TestParseRequestMemory(t *testing.T) {
	const size = 8_000_001
	slot := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{"payload":"x"}}}`
	members := func(prefix string, n int) string {
		b := make([]byte, 0, n*(len(prefix)+10))
		for i := range n {
			b = append(append(append(b, `,"`+prefix...), strconv.Itoa(i)...), `":0`...)
		}
		return string(b)
	}
	tests := []struct {
		name string
		in   []byte
		code int // 0: accepted
		text string
	}{
		{"8 MB array of zeros", zeroArray(size), CodeInvalidRequest, "4000000 slots exceeds the limit of 100"},
		{"8 MB of open brackets", bytes.Repeat([]byte("["), size), CodeInvalidRequest, "deeper than 64"},
		{"8 MB of open braces", bytes.Repeat([]byte(`{"a":`), size/5), CodeInvalidRequest, "deeper than 64"},
		{"a slot and a 4-million-element array in a batch", []byte("[" + slot + "," + string(zeroArray(size-len(slot)-3)) + "]"), 0, ""},
		{"one slot with a 4-million-element argument", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{"a":` + string(zeroArray(size-80)) + `}}}`), 0, ""},
		{"one slot of 262,144 members", []byte(`{"jsonrpc":"2.0","id":1,"method":"x"` + members("m", 1<<18) + `}`), 0, ""},
		{"a context of 262,144 members", []byte(`{"jsonrpc":"2.0","id":1,"method":"x","context":{"provider":"claude"` + members("c", 1<<18) + `}}`), 0, ""},
		{"262,144 members, one of them a case variant", []byte(`{"jsonrpc":"2.0","id":1,"method":"x"` + members("m", 1<<18) + `,"ID":2}`), 0, ""},
		{"100 slots of 80 kB", []byte("[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"x","params":`+string(zeroArray(80_001))+`},`, 100), ",") + "]"), 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var req Request
			var perr *Error
			n := allocated(func() { req, perr = ParseRequest(tc.in) })
			limit := allocLimit(len(tc.in))
			t.Logf("%d-byte message: %d bytes allocated (%.2f×)", len(tc.in), n, float64(n)/float64(len(tc.in)))
			if n > limit {
				t.Errorf("allocated %d bytes for a %d-byte message, want at most %d", n, len(tc.in), limit)
			}
			switch {
			case tc.code == 0 && perr != nil:
				t.Fatalf("refused: %v", perr)
			case tc.code != 0 && perr == nil:
				t.Fatalf("accepted %d slots, want code %d", len(req.Slots), tc.code)
			case tc.code != 0 && (perr.Code != tc.code || !strings.Contains(perr.Message, tc.text)):
				t.Fatalf("refusal %d %q, want %d naming %q", perr.Code, perr.Message, tc.code, tc.text)
			}
		})
	}
}

func TestParseRequestDepth(t *testing.T) {
	// nest wraps a ping slot's arguments in d levels of arrays, so that the
	// whole message nests d+3 deep (slot, params, arguments) or d+4 in a
	// batch.
	nest := func(d int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{"a":` +
			strings.Repeat("[", d) + strings.Repeat("]", d) + `}}}`
	}
	tests := []struct {
		name string
		in   string
		code int // 0: accepted
	}{
		{"64 levels in a slot", nest(MaxNestingDepth - 3), 0},
		{"65 levels in a slot", nest(MaxNestingDepth - 2), CodeInvalidRequest},
		{"64 levels in a batch", "[" + nest(MaxNestingDepth-4) + "]", 0},
		{"65 levels in a batch", "[" + nest(MaxNestingDepth-3) + "]", CodeInvalidRequest},
		{"65 levels of arrays", strings.Repeat("[", 65) + strings.Repeat("]", 65), CodeInvalidRequest},
		{"65 levels of objects, unterminated", strings.Repeat(`{"a":`, 65), CodeInvalidRequest},
		{"64 levels, unterminated", strings.Repeat("[", 64), CodeParseError},
		{"brackets inside strings do not nest", `{"jsonrpc":"2.0","id":"` + strings.Repeat("[{", 500) + `","method":"x"}`, 0},
		{"escaped quotes do not end strings", `{"jsonrpc":"2.0","id":"\"` + strings.Repeat("[", 100) + `\\","method":"x"}`, 0},
		{"commas inside strings and slots do not count", "[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","id":",,,","method":"x","params":[1,2,3]},`, 100), ",") + "]", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, perr := ParseRequest([]byte(tc.in))
			switch {
			case tc.code == 0 && perr != nil:
				t.Fatalf("refused: %v", perr)
			case tc.code == 0:
				for i, s := range req.Slots {
					if s.Err != nil {
						t.Fatalf("slot %d: %v", i, s.Err)
					}
				}
			case perr == nil:
				t.Fatalf("accepted, want code %d", tc.code)
			case perr.Code != tc.code:
				t.Fatalf("code %d (%s), want %d", perr.Code, perr.Message, tc.code)
			case tc.code == CodeInvalidRequest && !strings.Contains(perr.Message, "64"):
				t.Fatalf("refusal %q does not name the cap", perr.Message)
			}
		})
	}
}

// TestParseRequestEscapedNames checks the in-place member walk against
// names spelled with escapes: an escaped exact name is the member, an
// escaped case variant is refused.
func TestParseRequestEscapedNames(t *testing.T) {
	req, perr := ParseRequest([]byte(`[
		{"jsonrpc":"2.0","\u0069d":1,"method":"x"},
		{"jsonrpc":"2.0","id":2,"\u004dethod":"x"},
		{"jsonrpc":"2.0","id":3,"method":"x","context":{"\u0050rovider":"claude"}},
		{"jsonrpc":"2.0","id":4,"id":5,"method":"x","ID":6},
		{"jsonrpc":"2.0","id":7,"method":"x","context":{"provider":"claude"},"context":{"Session":"s"}},
		{"jsonrpc":"2.0","id":8,"method":"x","context":{"Session":"s"},"context":{"provider":"claude"}}
	]`))
	if perr != nil {
		t.Fatal(perr)
	}
	checkSlots(t, req.Slots, []wantSlot{
		{"1", "x", 0},
		{"2", "", CodeInvalidRequest},
		{"3", "", CodeInvalidRequest},
		{"5", "", CodeInvalidRequest}, // the last exact "id", as the decoder takes
		{"7", "", CodeInvalidRequest}, // the last context is the one checked
		{"8", "x", 0},
	})
	if m := req.Slots[1].Err.Message; !strings.Contains(m, "Method") {
		t.Errorf("message %q does not name the variant", m)
	}
}

func TestEncodeResponses(t *testing.T) {
	ok := Response{JSONRPC: "2.0", ID: json.RawMessage(`2`), Result: json.RawMessage(`{"pong":true}`)}
	bad := ErrorResponse(json.RawMessage(`"b"`), Errorf(CodeMethodNotFound, "method not found: %q", "x/y"))
	anon := ErrorResponse(nil, Errorf(CodeInvalidRequest, "invalid request"))
	withData := ErrorResponse(json.RawMessage(`7`), &Error{Code: CodeInvalidParams, Message: "invalid params", Data: map[string]any{"field": "query"}})
	tests := []struct {
		name    string
		isBatch bool
		resps   []Response
		want    string // "" means nil
	}{
		{"single result", false, []Response{ok}, `{"jsonrpc":"2.0","id":2,"result":{"pong":true}}`},
		{"single error", false, []Response{bad}, `{"jsonrpc":"2.0","id":"b","error":{"code":-32601,"message":"method not found: \"x/y\""}}`},
		{"nil id becomes null", false, []Response{anon}, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}`},
		{"error data", false, []Response{withData}, `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"invalid params","data":{"field":"query"}}}`},
		{"null result is kept", false, []Response{{JSONRPC: "2.0", ID: json.RawMessage(`1`), Result: json.RawMessage(`null`)}}, `{"jsonrpc":"2.0","id":1,"result":null}`},
		{"batch of one is an array", true, []Response{ok}, `[{"jsonrpc":"2.0","id":2,"result":{"pong":true}}]`},
		{"batch keeps order", true, []Response{bad, ok, anon}, `[{"jsonrpc":"2.0","id":"b","error":{"code":-32601,"message":"method not found: \"x/y\""}},{"jsonrpc":"2.0","id":2,"result":{"pong":true}},{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}]`},
		{"no response to a single notification", false, nil, ""},
		{"no response to a batch of notifications", true, nil, ""},
		{"empty slice", true, []Response{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeResponses(tc.isBatch, tc.resps)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if got != nil {
					t.Fatalf("got %s, want nil (send nothing)", got)
				}
				return
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			back, err := ParseResponses(got)
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != len(tc.resps) {
				t.Fatalf("ParseResponses: %d responses, want %d", len(back), len(tc.resps))
			}
			for i := range back {
				reenc, _ := json.Marshal(back[i])
				orig, _ := json.Marshal(tc.resps[i])
				if !bytes.Equal(reenc, orig) {
					t.Errorf("response %d: round trip %s, want %s", i, reenc, orig)
				}
			}
		})
	}
}

func TestParseResponses(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		ids     []string
		wantErr bool
	}{
		{"object", `{"jsonrpc":"2.0","id":1,"result":{}}`, []string{"1"}, false},
		{"array", `[{"jsonrpc":"2.0","id":"a","result":1},{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}]`, []string{`"a"`, "null"}, false},
		{"whitespace", "\n\t [ {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":true} ] \r\n", []string{"3"}, false},
		{"empty", ``, nil, true},
		{"whitespace only", "  \n", nil, true},
		{"not JSON", `{"jsonrpc":`, nil, true},
		{"bad array", `[{"jsonrpc":"2.0"},`, nil, true},
		{"wrong type", `[1,2]`, nil, true},
		{"error of the wrong type", `{"jsonrpc":"2.0","id":1,"error":"boom"}`, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := ParseResponses([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if !strings.HasPrefix(err.Error(), "protocol: ") {
					t.Errorf("error %q does not say where it comes from", err)
				}
				return
			}
			var ids []string
			for _, r := range rs {
				ids = append(ids, string(r.ID))
			}
			if !reflect.DeepEqual(ids, tc.ids) {
				t.Errorf("ids = %v, want %v", ids, tc.ids)
			}
		})
	}
	rs, err := ParseResponses([]byte(`{"jsonrpc":"2.0","id":9,"error":{"code":-32005,"message":"rate limited","data":{"retry_after":1}}}`))
	if err != nil || rs[0].Error == nil || rs[0].Error.Code != CodeRateLimited || rs[0].Error.Message != "rate limited" {
		t.Fatalf("error response = %+v, %v", rs, err)
	}
}

// answer builds the responses a server gives for req: an error for a slot
// with Err, an echo of the method for a good slot, nothing for notifications.
func answer(req Request) []Response {
	var out []Response
	for _, s := range req.Slots {
		if s.IsNotification() {
			continue
		}
		if s.Err != nil {
			out = append(out, ErrorResponse(s.ID, s.Err))
			continue
		}
		res, _ := json.Marshal(map[string]any{"method": s.Method})
		out = append(out, Response{JSONRPC: "2.0", ID: s.ID, Result: res})
	}
	return out
}

// TestGoldenWire pins the wire format: each testdata/golden/*.request.json
// is parsed, answered by answer, encoded, and compared with the matching
// *.response.json (rewritten by -update).
func TestGoldenWire(t *testing.T) {
	reqs, err := filepath.Glob(filepath.Join("testdata", "golden", "*.request.json"))
	if err != nil || len(reqs) == 0 {
		t.Fatalf("no golden requests: %v", err)
	}
	for _, path := range reqs {
		name := strings.TrimSuffix(filepath.Base(path), ".request.json")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			req, perr := ParseRequest(in)
			var resps []Response
			isBatch := req.IsBatch
			if perr != nil {
				resps, isBatch = []Response{ErrorResponse(nil, perr)}, false
			} else {
				resps = answer(req)
			}
			out, err := EncodeResponses(isBatch, resps)
			if err != nil {
				t.Fatal(err)
			}
			if out == nil {
				out = []byte{} // the golden file of "no response" is empty
			} else {
				if isBatch != (out[0] == '[') {
					t.Errorf("batch %v but the response starts with %q", isBatch, out[0])
				}
				back, err := ParseResponses(out)
				if err != nil || len(back) != len(resps) {
					t.Fatalf("ParseResponses: %d, %v", len(back), err)
				}
			}
			golden(t, name+".response.json", out)
		})
	}
}

// TestGoldenErrorObject pins the JSON shape of an error object with data.
func TestGoldenErrorObject(t *testing.T) {
	e := &Error{Code: CodeInvalidParams, Message: `invalid params: "query" is required`, Data: map[string]any{"field": "query", "schema_path": "/required"}}
	got, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "error_object.json", append(got, '\n'))
	var back Error
	if err := json.Unmarshal(got, &back); err != nil || back.Code != e.Code || back.Message != e.Message {
		t.Fatalf("decode = %+v, %v", back, err)
	}
	plain, _ := json.Marshal(&Error{Code: CodeInternal, Message: "internal error"})
	if string(plain) != `{"code":-32603,"message":"internal error"}` {
		t.Errorf("error without data = %s; data must be omitted", plain)
	}
}

// BenchmarkParseRequest measures the common path: one slot of about 1 KiB
// and a batch of ten ordinary slots.
func BenchmarkParseRequest(b *testing.B) {
	query := strings.Repeat("lorem ipsum ", 80)
	single := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"query":"` + query + `"}},"context":{"provider":"claude"}}`)
	parts := make([]string, 10)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ping","arguments":{"n":%d}}}`, i, i)
	}
	batch := []byte("[" + strings.Join(parts, ",") + "]")
	for _, bc := range []struct {
		name string
		in   []byte
	}{{"single_1KiB", single}, {"batch_10", batch}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, perr := ParseRequest(bc.in); perr != nil {
					b.Fatal(perr)
				}
			}
		})
	}
}

// TestSkipString checks the quote-to-quote string skipper against escapes
// at every position, and that a string of escapes costs linear time.
func TestSkipString(t *testing.T) {
	cases := map[string]int{
		`""`: 2, `"a"`: 3, `"\""`: 4, `"\\"`: 4, `"\\\""x`: 6, `"a\\\\"b"`: 7, `"\u0022"`: 8,
		`"unterminated`: 13, `"\`: 2, `"ab\"`: 5, `"x\\"y"`: 5,
	}
	for in, want := range cases {
		if got := skipString([]byte(in), 0); got != want {
			t.Errorf("skipString(%s) = %d, want %d", in, got, want)
		}
	}
	// 4 MiB of escaped quotes before the closing one: one pass, not n².
	big := []byte(`"` + strings.Repeat(`\"`, 2<<20) + `"`)
	if got := skipString(big, 0); got != len(big) {
		t.Fatalf("skipString(big) = %d, want %d", got, len(big))
	}
	allocs := testing.AllocsPerRun(3, func() { skipString(big, 0) })
	if allocs != 0 {
		t.Fatalf("skipString allocates %v", allocs)
	}
}

// context.traceparent survives AppendSlot and ParseRequest as it is; one
// longer than MaxTraceparent is dropped (ignored, as an invalid one is),
// never an error; a case variant of the member is refused as every other.
func TestSlotTraceparentRoundTrip(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct{ in, want string }{
		{tp, tp},
		{strings.Repeat("x", MaxTraceparent), strings.Repeat("x", MaxTraceparent)},
		{strings.Repeat("x", MaxTraceparent+1), ""},
	} {
		s := Slot{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: MethodToolsCall, Params: json.RawMessage(`{"name":"ping"}`),
			Context: &SlotContext{Session: "s", Traceparent: tc.in}}
		req, perr := ParseRequest(AppendSlot(nil, &s))
		if perr != nil || req.Slots[0].Err != nil || req.Slots[0].Context == nil {
			t.Fatalf("round trip of a %d-byte traceparent: %v %+v", len(tc.in), perr, req.Slots)
		}
		if got := req.Slots[0].Context; got.Traceparent != tc.want || got.Session != "s" {
			t.Fatalf("a %d-byte traceparent came back as %d bytes (session %q)", len(tc.in), len(got.Traceparent), got.Session)
		}
	}
	req, _ := ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","context":{"TraceParent":"` + tp + `"}}`))
	if req.Slots[0].Err == nil || req.Slots[0].Err.Code != CodeInvalidRequest {
		t.Fatalf("a case variant of traceparent: %+v", req.Slots[0])
	}
}
