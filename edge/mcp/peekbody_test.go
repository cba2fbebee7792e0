package mcp

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPeekBody: a body within the cap is seen whole and left whole for
// the go-sdk; one over it (by its Content-Length, or as it is read when
// the length is unknown) is not seen, and the go-sdk's read of it fails
// with the *http.MaxBytesError of the same cap (its 413).
func TestPeekBody(t *testing.T) {
	const max = 64
	for _, tc := range []struct {
		name    string
		body    string
		chunked bool
		over    bool
	}{
		{"known length", `{"method":"tools/call"}`, false, false},
		{"unknown length", `{"method":"tools/call"}`, true, false},
		{"empty", ``, false, false},
		{"over by length", strings.Repeat("a", max+1), false, true},
		{"over as read", strings.Repeat("a", max+1), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tc.body))
			if tc.chunked {
				r.ContentLength = -1
			}
			b := peekBody(r, max)
			rest, err := io.ReadAll(r.Body)
			if !tc.over {
				if string(b) != tc.body || string(rest) != tc.body || err != nil {
					t.Fatalf("peeked %q, the go-sdk reads %q (%v); want %q both", b, rest, err, tc.body)
				}
				return
			}
			var mbe *http.MaxBytesError
			if b != nil || !errors.As(err, &mbe) || mbe.Limit != max {
				t.Fatalf("over the cap: peeked %q, the go-sdk reads %q with %v; want nothing and a MaxBytesError of %d", b, rest, err, max)
			}
		})
	}
}
