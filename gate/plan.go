package gate

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// InputError is bad input to the gate (a revision that is not a commit, a binary that is not
// executable): the command line's fault, not a failed run. cmd maps it to exit status 2.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// Side names, also the run directories under a gate directory.
const (
	Base = "base"
	New  = "new"
)

// Order is the order of the two sides' runs within each round.
type Order string

const (
	// OrderAlternate runs base then new in every round: A B A B ...
	OrderAlternate Order = "alternate"
	// OrderRandom runs the two in a random order in every round (RMIT), from a seed.
	OrderRandom Order = "random"
)

// ParseOrder parses --order: "alternate" (also "abab") or "random" (also "rmit").
func ParseOrder(s string) (Order, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "alternate", "abab":
		return OrderAlternate, nil
	case "random", "rmit":
		return OrderRandom, nil
	}
	return "", inputErrorf("gate: --order %q: allowed alternate (A B A B) or random (RMIT)", s)
}

// Step is one run of a schedule: the round (1-based) and the side. A plain value.
type Step struct {
	Round int
	Side  string // Base or New
}

// Schedule returns the runs of rounds rounds in order: every round runs both sides once, base
// first (OrderAlternate) or in an order drawn from seed (OrderRandom). The random order is
// balanced: base runs first in exactly half of the rounds (with an odd count, the odd round's
// order is drawn too), which rounds is random. A run's position in its round matters on a
// shared machine (the previous run's files are still being written back, caches are warm or
// cold), and a fair coin per round can put one side second in 6 of 7 rounds (1 gate in 8).
func Schedule(rounds int, order Order, seed uint64) []Step {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	newFirst := make([]bool, max(rounds, 0))
	if order == OrderRandom && rounds > 0 {
		for i := range rounds / 2 {
			newFirst[i] = true
		}
		if rounds%2 == 1 {
			newFirst[rounds/2] = rng.IntN(2) == 1
		}
		rng.Shuffle(rounds, func(i, j int) { newFirst[i], newFirst[j] = newFirst[j], newFirst[i] })
	}
	out := make([]Step, 0, 2*len(newFirst))
	for i, nf := range newFirst {
		first, second := Base, New
		if nf {
			first, second = New, Base
		}
		out = append(out, Step{i + 1, first}, Step{i + 1, second})
	}
	return out
}

// RunSpec is what every run of a side runs: the arguments of "isrbench run" besides --out.
// A plain value; Args may be called from any goroutine.
type RunSpec struct {
	Workload string // -w: an embedded spec name or a YAML file (made absolute)
	Target   string // --target
	// CommandConfig is --command-config (made absolute): client properties of a kafka:// target.
	CommandConfig string
	Duration      time.Duration // --duration; 0 = the spec's
	Warmup        time.Duration // --warmup; < 0 = the spec's
	Sets          []string      // --set key=value, in order
}

// Args returns the "isrbench run" arguments of one run writing into out (quiet: no table).
func (s RunSpec) Args(out string) []string {
	w := s.Workload
	if st, err := os.Stat(w); err == nil && !st.IsDir() {
		if abs, err := filepath.Abs(w); err == nil {
			w = abs
		}
	}
	args := []string{"run", "-w", w, "--quiet", "--out", out}
	if s.Target != "" {
		args = append(args, "--target", s.Target)
	}
	if s.CommandConfig != "" {
		cc := s.CommandConfig
		if abs, err := filepath.Abs(cc); err == nil {
			cc = abs
		}
		args = append(args, "--command-config", cc)
	}
	if s.Duration != 0 {
		args = append(args, "--duration", s.Duration.String())
	}
	if s.Warmup >= 0 {
		args = append(args, "--warmup", s.Warmup.String())
	}
	for _, kv := range s.Sets {
		args = append(args, "--set", kv)
	}
	return args
}

// MakeDir creates <out>/<UTC time>-gate-<name>[-n] (out default results/runs) and returns it.
func MakeDir(out, name string) (string, error) {
	if out == "" {
		out = filepath.Join("results", "runs")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("gate: output dir: %w", err)
	}
	id := time.Now().UTC().Format("20060102-150405") + "-gate-" + name
	for i := 1; i <= 100; i++ {
		d := filepath.Join(out, id)
		if i > 1 {
			d = fmt.Sprintf("%s-%d", d, i)
		}
		err := os.Mkdir(d, 0o755)
		if err == nil {
			return d, nil
		}
		if !os.IsExist(err) {
			return "", fmt.Errorf("gate: output dir: %w", err)
		}
	}
	return "", fmt.Errorf("gate: output dir: %s-* all exist", filepath.Join(out, id))
}

// Plan is what a gate does, as its command line says: where the base side comes from (one of
// Baseline, a results directory; Binary, another build; Revision, a git revision to build),
// whether this build's runs are recorded as a baseline (WriteBaseline), and the runs per side.
// A plain value.
type Plan struct {
	Baseline, Binary, Revision, WriteBaseline string
	SetBase                                   bool // settings for the base side only were given
	Rounds                                    int
}

// Interleaved reports whether the base side is a build run as subprocesses (Binary, Revision).
func (p Plan) Interleaved() bool { return p.Binary != "" || p.Revision != "" }

// Compares reports whether the gate compares two sides (else it only records a baseline).
func (p Plan) Compares() bool { return p.Baseline != "" || p.Interleaved() }

// Check returns an InputError naming what is wrong with the plan: two sources for the base
// side, nothing to do, base-side settings without a base build, fewer than 1 run.
func (p Plan) Check() error {
	n := 0
	for _, m := range []string{p.Baseline, p.Binary, p.Revision} {
		if m != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return inputErrorf("gate: --baseline, --binary and --against are alternatives; give one")
	case n == 0 && p.WriteBaseline == "":
		return inputErrorf("gate: nothing to do: give --baseline FILE|DIR, --binary OTHER, --against REV or --write-baseline DIR")
	case p.SetBase && !p.Interleaved():
		return inputErrorf("gate: --set-base needs an interleaved mode (--binary or --against)")
	case p.Rounds < 1:
		return inputErrorf("gate: --repeat %d; allowed >= 1", p.Rounds)
	}
	return nil
}
