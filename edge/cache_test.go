package edge

import (
	"strings"
	"testing"
)

type closer struct {
	key    string
	closed *[]string
}

func (c closer) Close() error { *c.closed = append(*c.closed, c.key); return nil }

// TestCache: values are made once, the least recently used is closed past
// Max, and Close closes the rest.
func TestCache(t *testing.T) {
	var made, closed []string
	c := &Cache[closer]{Max: 2, New: func(k string) closer { made = append(made, k); return closer{k, &closed} }}
	c.Get("a")
	c.Get("b")
	c.Get("a") // a is now the most recent
	c.Get("c") // b goes
	if strings.Join(made, ",") != "a,b,c" || strings.Join(closed, ",") != "b" {
		t.Fatalf("made %v, closed %v", made, closed)
	}
	c.Get("b") // made again; a goes
	c.Close()
	if strings.Join(made, ",") != "a,b,c,b" || !strings.HasPrefix(strings.Join(closed, ","), "b,a,") || len(closed) != 4 {
		t.Fatalf("made %v, closed %v", made, closed)
	}
}
