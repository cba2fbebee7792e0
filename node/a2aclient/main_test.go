package a2aclient

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: kept-alive
// connections included (each test closes its client's).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
