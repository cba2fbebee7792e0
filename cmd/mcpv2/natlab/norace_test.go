//go:build !race

package natlab

const raceEnabled = false
