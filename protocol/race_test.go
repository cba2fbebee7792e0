//go:build race

package protocol

// raceEnabled reports a build with the race detector, under which sync.Pool
// drops a quarter of what is put back: see allocLimit.
const raceEnabled = true
