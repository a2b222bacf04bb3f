package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/isrbench/isrbench/gate"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/results/report"
	"github.com/isrbench/isrbench/workloads"
	"github.com/isrbench/isrbench/workloads/spec"
)

func init() {
	register("gate", "regression gate: run a spec N times and compare with a baseline or another build; exit 1 on a regression", cmdGate)
}

const gateUsage = `gate -w SPEC (--baseline FILE|DIR | --binary OTHER | --against REV | --write-baseline DIR)
              [--repeat N] [--order alternate|random] [--seed N] [--duration D] [--warmup D]
              [--set k=v ...] [--set-base k=v ...] [--set-new k=v ...] [--target T] [--command-config FILE]
              [--alpha 0.05] [--alpha metric=level ...] [--min-change 5%] [--threshold metric=pct ...]
              [--metric m1,m2] [--out DIR]

Two modes:
  --baseline FILE|DIR
      run SPEC --repeat times in this process and compare the results with the recorded
      baseline (result.json files). Fair only on the machine that recorded the baseline.
  --binary OTHER | --against REV
      run OTHER (or REV, built from a temporary git worktree that is removed afterwards) as the
      base "A" and this build as "B", in rounds of one run each, A B A B ... (--order alternate)
      or in a random order per round (--order random, RMIT), each run a subprocess
      "isrbench run ... --out DIR"; then compare A with B. Both builds see the same machine
      noise: this is the mode for CI.
--write-baseline DIR records this build's runs (result.json without histogram encodings) as a new
baseline, alone or together with a comparison.
--set applies to both sides, --set-base only to the base side (interleaved modes), --set-new only to
this build's runs. The verdict table shows each metric's spread (max - min of a side's runs over
its median); isrbench noise GATE_DIR... summarises many same-vs-same gates to set thresholds from.
Exit status: 0 no regression, 1 a regression (one line per metric) or a failed run, 2 bad usage
or bad input.`

func cmdGate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gate", gateUsage, stderr)
	var sf specFlags
	var setBase, setNew, thresholds multiFlag
	sf.register(fs)
	fs.Var(&setBase, "set-base", "override a setting for the base side only, key=value (repeatable; interleaved modes)")
	fs.Var(&setNew, "set-new", "override a setting for this build's runs only, key=value (repeatable)")
	baseline := fs.String("baseline", "", "baseline: a result.json or a directory of them (e.g. results/baselines/gate)")
	writeBaseline := fs.String("write-baseline", "", "record this build's runs as a new baseline in DIR (its old result.json files are replaced)")
	binary := fs.String("binary", "", "base build: another isrbench binary, run interleaved with this one")
	against := fs.String("against", "", "base build: a git revision, built from a temporary worktree and run interleaved with this one")
	repeat := fs.Int("repeat", 5, "runs per side")
	order := fs.String("order", "alternate", "order of the two sides in each round: alternate (A B A B) or random (RMIT)")
	seed := fs.Uint64("seed", 0, "seed of --order random (0 = a random one, printed)")
	metric := fs.String("metric", strings.Join(results.DefaultMetrics, ","), "comma-separated metrics to test (known: "+strings.Join(results.MetricNames(), ", ")+")")
	alpha := alphaFlag{all: 0.05}
	fs.Var(&alpha, "alpha", alphaHelp)
	minChange := fs.String("min-change", "5%", "smallest change that counts as a regression")
	fs.Var(&thresholds, "threshold", "per-metric minimum change, metric=pct (repeatable), e.g. p99-ack=50%")
	withKeyHelp(fs, gateUsage, stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	plan := gate.Plan{Baseline: *baseline, Binary: *binary, Revision: *against, WriteBaseline: *writeBaseline,
		SetBase: len(setBase) > 0, Rounds: *repeat}
	if fs.NArg() > 0 {
		return usagef("gate: unexpected arguments %q", fs.Args())
	}
	if err := plan.Check(); err != nil {
		return usagef("%v", err)
	}
	ord, err := gate.ParseOrder(*order)
	if err != nil {
		return usagef("%v", err)
	}
	opts, err := compareOptions("gate", *metric, alpha, *minChange, thresholds)
	if err != nil {
		return err
	}
	// Validate the spec and both sides' settings before running anything.
	side := func(set []string) (*spec.Spec, gate.RunSpec, error) {
		s := sf
		s.sets = append(append(multiFlag(nil), sf.sets...), set...)
		spec, err := s.load()
		return spec, gate.RunSpec{Workload: sf.workload, Target: sf.target, CommandConfig: sf.commandConfig, Duration: sf.duration.or(0), Warmup: sf.warmup.or(-1), Sets: s.sets}, err
	}
	newSpec, newRun, err := side(setNew)
	if err != nil {
		return err
	}
	_, baseRun, err := side(setBase)
	if err != nil {
		return err
	}
	var base []*results.Result
	nBase := *repeat
	if *baseline != "" {
		if base, err = results.LoadResults(*baseline); err != nil {
			return usagef("gate: --baseline: %v", err)
		}
		nBase = len(base)
	}
	if err := gate.CheckRuns(nBase, *repeat, opts.Alpha); err != nil && plan.Compares() {
		return usagef("%v", err)
	}
	dir, err := gate.MakeDir(sf.out, newSpec.Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "gate: runs in %s\n", dir)
	var nw []*results.Result
	if plan.Interleaved() {
		base, nw, err = gate.Interleave(ctx, gate.Interleaved{Dir: dir, Rounds: *repeat, Order: ord, Seed: *seed,
			Base: gate.Command{Bin: *binary, Revision: *against, Spec: baseRun}, New: gate.Command{Spec: newRun}, Log: stderr})
	} else {
		nw, err = gate.InProcess(ctx, dir, *repeat, func(ctx context.Context, out, id string) (*results.Result, error) {
			return workloads.Run(ctx, newSpec.Clone(), workloads.Options{Target: sf.target, OutDir: out, ID: id, Quiet: true, Stderr: stderr})
		}, stderr)
	}
	if err != nil {
		return gateError(err)
	}
	if *writeBaseline != "" {
		if err := gate.WriteBaseline(*writeBaseline, nw); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "gate: wrote %d runs as the baseline in %s\n", len(nw), *writeBaseline)
	}
	if base == nil {
		return nil // --write-baseline alone
	}
	baseDir := filepath.Join(dir, gate.Base)
	if *baseline != "" {
		baseDir = *baseline
	}
	rep, v, err := gate.Judge(base, nw, opts, dir, baseDir, filepath.Join(dir, gate.New))
	if err != nil {
		return usagef("%v", err)
	}
	if err := gate.PrintVerdict(stdout, v); err != nil {
		return err
	}
	page, rerr := gate.WriteReport(dir, v, report.Options{Defaults: workloads.ReportDefaults()})
	if rerr != nil {
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

// gateError maps the gate's bad input to a usage error (exit 2); a failed run exits 1.
func gateError(err error) error {
	var ie *gate.InputError
	if errors.As(err, &ie) {
		return usagef("%v", err)
	}
	return &exitError{code: 1, err: err}
}
