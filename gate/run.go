package gate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/isrbench/isrbench/results"
)

// Command is one side run as a subprocess: Bin with Spec's arguments, once per repetition.
// Interleave resolves an empty Bin: Revision built from git (BuildRevision) when set, else
// this process's own executable. A plain value.
type Command struct {
	Bin      string
	Revision string
	Spec     RunSpec
}

// Interleaved is a gate whose two sides are commands, run in rounds on the same machine. A
// plain value: Interleave does not keep it.
type Interleaved struct {
	Dir       string // gate directory: runs land in Dir/base and Dir/new
	Rounds    int    // runs per side
	Order     Order
	Seed      uint64 // OrderRandom's seed; 0 = a random one (logged)
	Base, New Command
	Log       io.Writer // progress lines ("gate: run 2/6 new (...)"); nil = discard
}

// Interleave resolves the two binaries (CheckBinary, BuildRevision: its worktree is removed
// before Interleave returns), runs the schedule and loads both sides' results back from their
// run directories, each side in round order. A failed run ends the gate with an error naming
// the side, the run, the exit status and the tail of its stderr.
func Interleave(ctx context.Context, p Interleaved) (base, nw []*results.Result, err error) {
	log := p.Log
	if log == nil {
		log = io.Discard
	}
	if p.Order == OrderRandom {
		if p.Seed == 0 {
			p.Seed = rand.Uint64()
		}
		fmt.Fprintf(log, "gate: random order of each round, --seed %d\n", p.Seed)
	}
	cmds := map[string]Command{Base: p.Base, New: p.New}
	for name, c := range cmds {
		switch {
		case c.Bin != "":
			if c.Bin, err = CheckBinary(c.Bin); err != nil {
				return nil, nil, err
			}
		case c.Revision != "":
			bin, cleanup, err := BuildRevision(ctx, c.Revision, log)
			if err != nil {
				return nil, nil, err
			}
			defer cleanup()
			c.Bin = bin
		default:
			if c.Bin, err = os.Executable(); err != nil {
				return nil, nil, fmt.Errorf("gate: this binary: %w", err)
			}
		}
		cmds[name] = c
	}
	for _, st := range Schedule(p.Rounds, p.Order, p.Seed) {
		c := cmds[st.Side]
		fmt.Fprintf(log, "gate: run %d/%d %s (%s)\n", st.Round, p.Rounds, st.Side, c.Bin)
		if err := runSubprocess(ctx, c.Bin, c.Spec.Args(filepath.Join(p.Dir, st.Side))); err != nil {
			return nil, nil, fmt.Errorf("gate: %s run %d/%d failed: %w", st.Side, st.Round, p.Rounds, err)
		}
	}
	if base, err = results.LoadResults(filepath.Join(p.Dir, Base)); err != nil {
		return nil, nil, fmt.Errorf("gate: base results: %w", err)
	}
	if nw, err = results.LoadResults(filepath.Join(p.Dir, New)); err != nil {
		return nil, nil, fmt.Errorf("gate: new results: %w", err)
	}
	if len(base) != p.Rounds || len(nw) != p.Rounds {
		return nil, nil, fmt.Errorf("gate: want %d results per side, found base %d, new %d in %s", p.Rounds, len(base), len(nw), p.Dir)
	}
	// Round order on both sides: base[i] and new[i] are round i+1's runs.
	for _, rs := range [][]*results.Result{base, nw} {
		slices.SortStableFunc(rs, func(a, b *results.Result) int { return a.StartedAt.Compare(b.StartedAt) })
	}
	return base, nw, nil
}

// RunFunc runs the workload once in this process, writing its run directory under outDir with
// the given id, and returns its result. InProcess calls it from its own goroutine, one run at a
// time.
type RunFunc func(ctx context.Context, outDir, id string) (*results.Result, error)

// InProcess runs the new side rounds times in this process (into dir/new, ids r1, r2, ...).
func InProcess(ctx context.Context, dir string, rounds int, run RunFunc, log io.Writer) ([]*results.Result, error) {
	if log == nil {
		log = io.Discard
	}
	var out []*results.Result
	for i := 1; i <= rounds; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "gate: run %d/%d\n", i, rounds)
		res, err := run(ctx, filepath.Join(dir, New), fmt.Sprintf("r%d", i))
		if err != nil {
			return nil, fmt.Errorf("gate: run %d/%d failed: %w", i, rounds, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// runSubprocess runs bin args; a failure reports the exit status and the tail of its stderr.
func runSubprocess(ctx context.Context, bin string, args []string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	var errb bytes.Buffer
	cmd.Stdout = io.Discard
	cmd.Stderr = &errb
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), strings.Join(hideSecrets(args), " "), err, tail(errb.String(), 3))
	}
	return nil
}

// hideSecrets returns args with the value of a --set whose key names a password, secret,
// token or JAAS config as [hidden] (client properties given as settings, target.<key>).
func hideSecrets(args []string) []string {
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		if out[i-1] != "--set" {
			continue
		}
		k, _, ok := strings.Cut(out[i], "=")
		lk := strings.ToLower(k)
		if ok && (strings.Contains(lk, "password") || strings.Contains(lk, "secret") || strings.Contains(lk, "jaas") ||
			strings.Contains(lk, "token") && !strings.Contains(lk, "endpoint") || strings.HasSuffix(lk, ".key")) {
			out[i] = k + "=[hidden]"
		}
	}
	return out
}

// tail returns the last n non-empty lines of s, joined by " | ".
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// CheckRuns is an InputError when nBase and nNew runs can never give p < alpha (fully
// separated samples give at best results.MinPValue).
func CheckRuns(nBase, nNew int, alpha float64) error {
	if p := results.MinPValue(nBase, nNew); p >= alpha {
		return inputErrorf("gate: %d base and %d new runs can never be significant at alpha=%v (smallest possible p=%.3f): use --repeat %d or more",
			nBase, nNew, alpha, p, results.RunsNeeded(alpha))
	}
	return nil
}

// CheckBinary returns bin made absolute after checking that it is an executable file (an
// InputError otherwise).
func CheckBinary(bin string) (string, error) {
	st, err := os.Stat(bin)
	if err != nil {
		return "", inputErrorf("gate: --binary: %v", err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", inputErrorf("gate: --binary %s is not an executable file", bin)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", inputErrorf("gate: --binary: %v", err)
	}
	return abs, nil
}

// BuildRevision checks rev out into a temporary git worktree of the repository holding the
// working directory and builds isrbench from it (go build -trimpath, so that packages with the
// same sources as this tree come from the build cache). cleanup removes the worktree and the
// binary. A revision that is not a commit, or no git checkout, is an InputError.
func BuildRevision(ctx context.Context, rev string, log io.Writer) (bin string, cleanup func(), err error) {
	if log == nil {
		log = io.Discard
	}
	// git runs without ctx: the worktree must be removed also after an interrupt.
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return strings.TrimSpace(string(out)), nil
	}
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return "", nil, inputErrorf("gate: --against needs a git checkout: %v", err)
	}
	sha, err := git("-C", top, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", nil, inputErrorf("gate: --against %s: not a commit in %s", rev, top)
	}
	tmp, err := os.MkdirTemp("", "isrbench-gate-")
	if err != nil {
		return "", nil, fmt.Errorf("gate: %w", err)
	}
	src := filepath.Join(tmp, "src")
	cleanup = func() {
		if _, err := git("-C", top, "worktree", "remove", "--force", src); err != nil {
			fmt.Fprintf(log, "gate: %v\n", err)
			_, _ = git("-C", top, "worktree", "prune")
		}
		os.RemoveAll(tmp)
	}
	if _, err := git("-C", top, "worktree", "add", "--detach", src, sha); err != nil {
		os.RemoveAll(tmp)
		_, _ = git("-C", top, "worktree", "prune")
		return "", nil, fmt.Errorf("gate: --against %s: %w", rev, err)
	}
	short := sha[:min(len(sha), 12)]
	fmt.Fprintf(log, "gate: building %s (%s) in %s\n", rev, short, src)
	bin = filepath.Join(tmp, "isrbench-"+short)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/isrbench")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("gate: --against %s: go build: %v: %s", rev, err, tail(string(out), 5))
	}
	return bin, cleanup, nil
}
