package edge

import (
	"errors"
	"net"
	"testing"
)

// Every owner of this package: Close, then a second Close returns
// net.ErrClosed.
func TestCloseTwice(t *testing.T) {
	cases := []struct {
		name string
		open func(t *testing.T) func() error
	}{
		{"Server", func(t *testing.T) func() error {
			s, err := New(&fakeBackend{}, Config{BindHost: "127.0.0.1", Secret: testSecret})
			if err != nil {
				t.Fatal(err)
			}
			return s.Close
		}},
		{"oidcAuth", func(t *testing.T) func() error {
			a, err := newOIDCWith(oidcConfig{issuers: []string{"http://127.0.0.1:1"}})
			if err != nil {
				t.Fatal(err)
			}
			return a.Close
		}},
		{"Cache", func(t *testing.T) func() error {
			c, _ := newTestCache(2, 0, 0)
			if _, err := get(t, c, "a", ""); err != nil {
				t.Fatal(err)
			}
			return c.Close
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			closeFn := c.open(t)
			if err := closeFn(); err != nil {
				t.Fatalf("first Close = %v", err)
			}
			if err := closeFn(); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("second Close = %v, want net.ErrClosed", err)
			}
		})
	}
}
