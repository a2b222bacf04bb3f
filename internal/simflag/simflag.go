// Package simflag registers the deterministic simulator's test flags (-sim.seed, -sim.seeds,
// -sim.steps) in every test binary that imports it, so that
// `go test ./... -run TestSimulation -sim.seed=N` works across the module: Go passes
// unknown flags to every package's test binary, and one that does not define them fails.
// Every package with tests imports it (layout_test.go checks).
package simflag

import "flag"

var (
	// Seed replays one simulation seed (0: none) and prints its trace.
	Seed = flag.Uint64("sim.seed", 0, "replay this deterministic-simulation seed and print its trace")
	// Seeds is the number of seeds TestSimulation runs (0: its default).
	// First is the first seed of a -sim.seeds run.
	First = flag.Uint64("sim.first", 1, "first simulation seed of a -sim.seeds run (to resume a soak)")
	Seeds = flag.Int("sim.seeds", 0, "number of simulation seeds to run (0: the default for this build)")
	// Steps is the number of random steps per seed (0: the simulator's default).
	Steps = flag.Int("sim.steps", 0, "random steps per simulation seed (0: the default)")
)

// Rewrite makes the scripted tests with recorded output (internal/scripttest) write what
// they printed into their testdata/*.txt scripts instead of comparing it.
var Rewrite = flag.Bool("rewrite", false, "rewrite the recorded output of testdata/*.txt scripts instead of checking it")
