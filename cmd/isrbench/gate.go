package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/results/report"
	"github.com/isrbench/isrbench/workloads"
)

func init() {
	register("gate", "regression gate: run a spec N times and compare with a baseline or another build; exit 1 on a regression", cmdGate)
}

const gateUsage = `gate -w SPEC (--baseline FILE|DIR | --binary OTHER | --against REV | --write-baseline DIR)
              [--repeat N] [--duration D] [--warmup D] [--set k=v ...] [--set-base k=v ...] [--set-new k=v ...]
              [--alpha 0.05] [--min-change 5%] [--threshold metric=pct ...] [--metric m1,m2] [--out DIR]

Two modes:
  --baseline FILE|DIR
      run SPEC --repeat times in this process and compare the results with the recorded
      baseline (result.json files). Fair only on the machine that recorded the baseline.
  --binary OTHER | --against REV
      run OTHER (or REV, built from a temporary git worktree that is removed afterwards) as the
      base "A" and this build as "B", interleaved A B A B ..., each run a subprocess
      "isrbench run ... --out DIR"; then compare A with B. Both builds see the same machine
      noise: this is the mode for CI.
--write-baseline DIR records this build's runs (result.json without histogram encodings) as a new
baseline, alone or together with a comparison.
--set applies to both sides, --set-base only to the base side (interleaved modes), --set-new only to
this build's runs. Exit status: 0 no regression, 1 a regression (one line per metric) or a failed
run, 2 bad usage or bad input.`

// gateOpts is the parsed command line of isrbench gate.
type gateOpts struct {
	sf            specFlags
	setBase       multiFlag
	setNew        multiFlag
	baseline      string
	writeBaseline string
	binary        string
	against       string
	repeat        int
	compare       results.CompareOptions
}

func cmdGate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gate", gateUsage, stderr)
	var o gateOpts
	o.sf.register(fs)
	fs.Var(&o.setBase, "set-base", "override a setting for the base side only, key=value (repeatable; interleaved modes)")
	fs.Var(&o.setNew, "set-new", "override a setting for this build's runs only, key=value (repeatable)")
	fs.StringVar(&o.baseline, "baseline", "", "baseline: a result.json or a directory of them (e.g. results/baselines/gate)")
	fs.StringVar(&o.writeBaseline, "write-baseline", "", "record this build's runs as a new baseline in DIR (its old result.json files are replaced)")
	fs.StringVar(&o.binary, "binary", "", "base build: another isrbench binary, run interleaved with this one")
	fs.StringVar(&o.against, "against", "", "base build: a git revision, built from a temporary worktree and run interleaved with this one")
	fs.IntVar(&o.repeat, "repeat", 5, "runs per side")
	metric := fs.String("metric", strings.Join(results.DefaultMetrics, ","), "comma-separated metrics to test (known: "+strings.Join(results.MetricNames(), ", ")+")")
	alpha := fs.Float64("alpha", 0.05, "significance level of the Mann-Whitney U test")
	minChange := fs.String("min-change", "5%", "smallest change that counts as a regression")
	var thresholds multiFlag
	fs.Var(&thresholds, "threshold", "per-metric minimum change, metric=pct (repeatable), e.g. p99-ack=50%")
	withKeyHelp(fs, gateUsage, stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("gate: unexpected arguments %q", fs.Args())
	}
	modes := 0
	for _, m := range []string{o.baseline, o.binary, o.against} {
		if m != "" {
			modes++
		}
	}
	switch {
	case modes > 1:
		return usagef("gate: --baseline, --binary and --against are alternatives; give one")
	case modes == 0 && o.writeBaseline == "":
		return usagef("gate: nothing to do: give --baseline FILE|DIR, --binary OTHER, --against REV or --write-baseline DIR")
	case len(o.setBase) > 0 && o.binary == "" && o.against == "":
		return usagef("gate: --set-base needs an interleaved mode (--binary or --against)")
	case o.repeat < 1:
		return usagef("gate: --repeat %d; allowed >= 1", o.repeat)
	}
	var err error
	if o.compare, err = compareOptions("gate", *metric, *alpha, *minChange, thresholds); err != nil {
		return err
	}
	// Validate the spec and both sides' settings before running anything.
	newSpec, err := o.spec(o.setNew)
	if err != nil {
		return err
	}
	if _, err := o.spec(o.setBase); err != nil {
		return err
	}

	var base []*results.Result
	if o.baseline != "" {
		if base, err = results.LoadResults(o.baseline); err != nil {
			return usagef("gate: --baseline: %v", err)
		}
	}
	if modes > 0 {
		nBase := o.repeat
		if base != nil {
			nBase = len(base)
		}
		if p := results.MinPValue(nBase, o.repeat); p >= o.compare.Alpha {
			return usagef("gate: %d base and %d new runs can never be significant at alpha=%v (smallest possible p=%.3f): use --repeat %d or more",
				nBase, o.repeat, o.compare.Alpha, p, results.RunsNeeded(o.compare.Alpha))
		}
	}

	dir, err := gateDir(o.sf.out, newSpec.Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "gate: runs in %s\n", dir)
	var nw []*results.Result
	switch {
	case o.binary != "" || o.against != "":
		base, nw, err = o.interleaved(ctx, dir, stderr)
	default:
		nw, err = o.inProcess(ctx, newSpec, dir, stderr)
	}
	if err != nil {
		return err
	}
	if o.writeBaseline != "" {
		if err := writeBaseline(o.writeBaseline, nw); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "gate: wrote %d runs as the baseline in %s\n", len(nw), o.writeBaseline)
	}
	if base == nil {
		return nil // --write-baseline alone
	}
	rep, err := results.Compare(oneConfig(base), oneConfig(nw), o.compare)
	if err != nil {
		return usagef("gate: %v", err)
	}
	if err := results.PrintCompare(stdout, rep); err != nil {
		return err
	}
	baseDir := filepath.Join(dir, "base")
	if o.baseline != "" {
		baseDir = o.baseline
	}
	page, rerr := report.WriteGate(dir, report.NewVerdict(rep, o.compare, dir, baseDir, filepath.Join(dir, "new")),
		report.Options{Defaults: workloads.ReportDefaults()})
	if rerr != nil {
		rerr = fmt.Errorf("gate: writing the report: %w", rerr)
		fmt.Fprintln(stderr, rerr)
	} else {
		fmt.Fprintf(stderr, "gate: report %s\n", page)
	}
	if rep.Regressed() {
		for _, r := range rep.Regressions {
			fmt.Fprintf(stderr, "gate: regression: %s\n", r)
		}
		return &exitError{code: 1, err: fmt.Errorf("gate: FAIL: %s", pluralRegressions(len(rep.Regressions)))}
	}
	if rerr != nil {
		return &exitError{code: 1, err: rerr}
	}
	fmt.Fprintf(stderr, "gate: ok (%d base runs, %d new runs)\n", len(base), len(nw))
	return nil
}

// oneConfig returns copies of rs whose Config keeps only the keys with one value in all of them:
// a gate side is repetitions of one configuration by construction, and keys that differ between
// its runs are outcomes recorded in the config (counters, ids), which must not split the
// repetitions into groups.
func oneConfig(rs []*results.Result) []*results.Result {
	if len(rs) == 0 {
		return rs
	}
	common := map[string]any{}
	for k, v := range rs[0].Config {
		same := true
		for _, r := range rs[1:] {
			if w, ok := r.Config[k]; !ok || fmt.Sprint(w) != fmt.Sprint(v) {
				same = false
				break
			}
		}
		if same {
			common[k] = v
		}
	}
	out := make([]*results.Result, len(rs))
	for i, r := range rs {
		c := *r
		c.Config = common
		out[i] = &c
	}
	return out
}

// spec loads -w with --duration/--warmup, --set and then the side's own settings.
func (o *gateOpts) spec(side []string) (*workloads.Spec, error) {
	sf := o.sf
	sf.sets = append(append(multiFlag(nil), o.sf.sets...), side...)
	return sf.load()
}

// runArgs are the arguments of one subprocess run of a side.
func (o *gateOpts) runArgs(side []string, out string) []string {
	w := o.sf.workload
	if st, err := os.Stat(w); err == nil && !st.IsDir() {
		if abs, err := filepath.Abs(w); err == nil {
			w = abs
		}
	}
	args := []string{"run", "-w", w, "--quiet", "--out", out, "--target", o.sf.target}
	args = append(args, o.sf.durationArgs()...)
	for _, kv := range append(append([]string(nil), o.sf.sets...), side...) {
		args = append(args, "--set", kv)
	}
	return args
}

// gateDir creates <out>/<time>-gate-<name>[-n].
func gateDir(out, name string) (string, error) {
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

// inProcess runs this build's side --repeat times in this process.
func (o *gateOpts) inProcess(ctx context.Context, s *workloads.Spec, dir string, stderr io.Writer) ([]*results.Result, error) {
	var out []*results.Result
	for i := 1; i <= o.repeat; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "gate: run %d/%d\n", i, o.repeat)
		res, err := workloads.Run(ctx, s.Clone(), workloads.Options{Target: o.sf.target, OutDir: filepath.Join(dir, "new"),
			ID: fmt.Sprintf("r%d", i), Quiet: true, Stderr: stderr})
		if err != nil {
			return nil, &exitError{code: 1, err: fmt.Errorf("gate: run %d/%d failed: %w", i, o.repeat, err)}
		}
		out = append(out, res)
	}
	return out, nil
}

// interleaved runs the base build and this build as subprocesses, A B A B ..., and loads both
// sides' results back from their run directories.
func (o *gateOpts) interleaved(ctx context.Context, dir string, stderr io.Writer) (base, nw []*results.Result, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("gate: this binary: %w", err)
	}
	other := o.binary
	if o.against != "" {
		bin, cleanup, err := buildRevision(ctx, o.against, stderr)
		if err != nil {
			return nil, nil, err
		}
		defer cleanup()
		other = bin
	} else {
		st, err := os.Stat(other)
		if err != nil {
			return nil, nil, usagef("gate: --binary: %v", err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, nil, usagef("gate: --binary %s is not an executable file", other)
		}
		if other, err = filepath.Abs(other); err != nil {
			return nil, nil, usagef("gate: --binary: %v", err)
		}
	}
	sides := []struct {
		name, bin string
		set       []string
	}{{"base", other, o.setBase}, {"new", self, o.setNew}}
	for i := 1; i <= o.repeat; i++ {
		for _, sd := range sides {
			fmt.Fprintf(stderr, "gate: run %d/%d %s (%s)\n", i, o.repeat, sd.name, sd.bin)
			if err := runSubprocess(ctx, sd.bin, o.runArgs(sd.set, filepath.Join(dir, sd.name))); err != nil {
				return nil, nil, &exitError{code: 1, err: fmt.Errorf("gate: %s run %d/%d failed: %w", sd.name, i, o.repeat, err)}
			}
		}
	}
	if base, err = results.LoadResults(filepath.Join(dir, "base")); err != nil {
		return nil, nil, fmt.Errorf("gate: base results: %w", err)
	}
	if nw, err = results.LoadResults(filepath.Join(dir, "new")); err != nil {
		return nil, nil, fmt.Errorf("gate: new results: %w", err)
	}
	if len(base) != o.repeat || len(nw) != o.repeat {
		return nil, nil, fmt.Errorf("gate: want %d results per side, found base %d, new %d in %s", o.repeat, len(base), len(nw), dir)
	}
	return base, nw, nil
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
		return fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), strings.Join(args, " "), err, tail(errb.String(), 3))
	}
	return nil
}

// tail returns the last n non-empty lines of s, joined by " | ".
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// buildRevision checks REV out into a temporary git worktree and builds isrbench from it. cleanup
// removes the worktree and the binary.
func buildRevision(ctx context.Context, rev string, stderr io.Writer) (bin string, cleanup func(), err error) {
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
		return "", nil, usagef("gate: --against needs a git checkout: %v", err)
	}
	sha, err := git("-C", top, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", nil, usagef("gate: --against %s: not a commit in %s", rev, top)
	}
	tmp, err := os.MkdirTemp("", "isrbench-gate-")
	if err != nil {
		return "", nil, fmt.Errorf("gate: %w", err)
	}
	src := filepath.Join(tmp, "src")
	cleanup = func() {
		if _, err := git("-C", top, "worktree", "remove", "--force", src); err != nil {
			fmt.Fprintf(stderr, "gate: %v\n", err)
			_, _ = git("-C", top, "worktree", "prune")
		}
		os.RemoveAll(tmp)
	}
	if _, err := git("-C", top, "worktree", "add", "--detach", src, sha); err != nil {
		os.RemoveAll(tmp)
		_, _ = git("-C", top, "worktree", "prune")
		return "", nil, fmt.Errorf("gate: --against %s: %w", rev, err)
	}
	short := sha
	if len(short) > 12 {
		short = short[:12]
	}
	fmt.Fprintf(stderr, "gate: building %s (%s) in %s\n", rev, short, src)
	bin = filepath.Join(tmp, "isrbench-"+short)
	// -trimpath: the worktree's packages hit the build cache of identical sources elsewhere.
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/isrbench")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("gate: --against %s: go build: %v: %s", rev, err, tail(string(out), 5))
	}
	return bin, cleanup, nil
}

// writeBaseline replaces the result.json files under dir with rs, one r<i>/result.json each,
// without the base64 histogram encodings (compare reads only the summary numbers).
func writeBaseline(dir string, rs []*results.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gate: --write-baseline: %w", err)
	}
	var old []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == results.ResultFileName {
			old = append(old, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("gate: --write-baseline: %w", err)
	}
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("gate: --write-baseline: %w", err)
		}
		_ = os.Remove(filepath.Dir(p)) // only if now empty
	}
	for i, r := range rs {
		c := *r
		for _, s := range []*results.Summary{&c.AckLatencyUs, &c.HWLagUs, &c.E2ELatencyUs, &c.SendDelayUs} {
			s.Hdr = ""
		}
		c.Files = results.Files{}
		d := filepath.Join(dir, fmt.Sprintf("r%d", i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("gate: --write-baseline: %w", err)
		}
		p := filepath.Join(d, results.ResultFileName)
		if err := results.WriteResult(p, &c); err != nil {
			return fmt.Errorf("gate: --write-baseline: %w", err)
		}
		if err := os.Chmod(p, 0o644); err != nil { // a committed file, readable by all
			return fmt.Errorf("gate: --write-baseline: %w", err)
		}
	}
	return nil
}
