package localapi

import (
	"strings"
	"testing"
)

// FuzzDecodeAddKey: the decoder of POST /v1/keys never panics, refuses
// what is over the cap, and accepts only one object with a name.
func FuzzDecodeAddKey(f *testing.F) {
	f.Add([]byte(`{"name":"ci","grants":["echo"],"expires":"30d"}`))
	f.Add([]byte(`{"name":"ci"} {}`))
	f.Add([]byte(`{"nam":"x"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := decodeAddKey(strings.NewReader(string(b)))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "request body: ") {
				t.Fatalf("error %q does not name the body", err)
			}
			return
		}
		if len(b) > maxBody || req.Name == "" {
			t.Fatalf("accepted %q as %+v", b, req)
		}
	})
}
