package keys

import (
	"testing"
)

// FuzzParse: the keys file decoder never panics, and what it accepts it
// writes back (encode) as a file it reads to the same keys. The seed
// corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"keys":[]}`))
	f.Add([]byte(`{"version":1,"keys":[` + keyJSONText("ci", hex64(1)) + `]}`))
	for _, c := range corruptCases {
		if len(c.data) < 4096 {
			f.Add([]byte(c.data))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := parse("keys.json", data)
		if err != nil {
			return
		}
		out, err := encode(keys)
		if err != nil {
			t.Fatalf("encode of parsed keys: %v", err)
		}
		back, err := parse("keys.json", out)
		if err != nil {
			t.Fatalf("parse of encode: %v\n%s", err, out)
		}
		if !sameKeys(back, keys) {
			t.Fatalf("round trip changed the keys:\n%+v\n%+v", keys, back)
		}
	})
}
