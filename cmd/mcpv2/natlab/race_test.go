//go:build race

package natlab

const raceEnabled = true
