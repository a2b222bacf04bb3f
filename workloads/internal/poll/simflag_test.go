package poll

// The simulator's -sim.* flags, so that `go test ./... -run TestSimulation -sim.seed=N` runs.
import _ "github.com/isrbench/isrbench/internal/simflag"
