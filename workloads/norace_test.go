//go:build !race

package workloads

// raceEnabled: this test binary runs under the race detector.
const raceEnabled = false
