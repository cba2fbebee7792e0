package node

import (
	"fmt"
	"testing"
	"time"
)

// TestLimiterKeepsSlowBuckets: a bucket of "2/h" emptied by a caller is not
// swept after the usual 10 idle minutes (that would hand the caller a full
// burst back within the hour), but one of 200/s is.
func TestLimiterKeepsSlowBuckets(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		rps       float64
		burst     int
		wantAgain bool // allowed again 11 minutes later
	}{
		{2.0 / 3600, 2, false},
		{200, 200, true},
	} {
		ls := newLimiters(tc.rps, tc.burst)
		for range tc.burst {
			if ok, _ := ls.allow("caller", 1, now); !ok {
				t.Fatalf("rps %v: refused within the burst", tc.rps)
			}
		}
		if ok, _ := ls.allow("caller", 1, now); ok {
			t.Fatalf("rps %v: allowed past the burst", tc.rps)
		}
		later := now.Add(11 * time.Minute)
		for i := range 2048 { // inserts that trigger the sweep
			ls.allow(fmt.Sprint("other", i), 1, later)
		}
		if ok, _ := ls.allow("caller", 1, later); ok != tc.wantAgain {
			t.Errorf("rps %v: allowed 11 min later = %v, want %v", tc.rps, ok, tc.wantAgain)
		}
	}
}
