package lazyre

import (
	"sync"
	"testing"
)

// TestNew: the expression compiles once, on first use, to one Regexp
// shared by concurrent callers; a bad one panics then, not before.
func TestNew(t *testing.T) {
	re := New(`^a+b$`)
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Go(func() { got[i] = re() })
	}
	wg.Wait()
	for _, g := range got {
		if g != got[0] {
			t.Fatal("callers got different Regexps")
		}
	}
	if !re().MatchString("aab") || re().MatchString("ba") {
		t.Error("wrong matches")
	}

	bad := New(`(`) // no panic here
	defer func() {
		if recover() == nil {
			t.Error("a bad expression did not panic on first use")
		}
	}()
	bad()
}
