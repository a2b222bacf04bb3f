//go:build race

package log

const raceEnabled = true
