package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

func init() {
	register("sweep", "run a workload over the cartesian product of --vary values (or the spec's sweep)", cmdSweep)
}

func cmdSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "sweep -w SPEC [--vary key=v1,v2 ...] [--set key=value ...] [--repeat N] [--target T] [--command-config FILE] [--assume key=value ...] [--duration D] [--warmup D] [--out DIR] [--profile kinds]"
	fs := newFlags("sweep", usage, stderr)
	var sf specFlags
	sf.register(fs)
	var vary multiFlag
	fs.Var(&vary, "vary", "sweep a setting over values, key=v1,v2,... (repeatable: cartesian product)")
	repeat := fs.Int("repeat", 1, "runs per point, interleaved (A B C A B C)")
	profile := fs.String("profile", "", "pprof kinds captured during each run's measurement: cpu,heap,allocs,mutex,block,goroutine; trace writes Go's execution trace")
	withKeyHelp(fs, usage, stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("sweep: unexpected arguments %q", fs.Args())
	}
	if *repeat < 1 {
		return usagef("sweep: --repeat %d; allowed >= 1", *repeat)
	}
	s, err := sf.load()
	if err != nil {
		return err
	}
	kinds, err := profileKinds(*profile)
	if err != nil {
		return err
	}
	axes, err := spec.ParseVary(vary)
	if err != nil {
		return usagef("%v", err)
	}
	if err := target.CheckSweepOnTarget(sf.target, axesOrSpec(axes, s), sf.assumed); err != nil {
		return usagef("sweep: %v", err)
	}
	out, err := workloads.Sweep(ctx, s, axes, *repeat, workloads.Options{Target: sf.target, OutDir: sf.out,
		Profile: kinds, Stdout: stdout, Stderr: stderr, Assume: sf.assumed})
	if out != nil && len(out.Results) > 0 {
		if perr := results.PrintSweep(stdout, out.Results); perr != nil {
			fmt.Fprintf(stderr, "sweep table: %v\n", perr)
		}
	}
	if out != nil {
		fmt.Fprintf(stdout, "sweep: %s\n", filepath.Join(out.Dir, "sweep.json"))
		if len(out.Results) > 0 {
			fmt.Fprintf(stdout, "report: %s\n", filepath.Join(out.Dir, "report.html"))
		}
	}
	if err != nil {
		if out != nil && out.Failed > 0 {
			return &exitError{code: 1, err: err}
		}
		return runError(err)
	}
	return nil
}

// axesOrSpec is what the sweep runs over: --vary, else the spec's sweep section.
func axesOrSpec(axes []spec.Axis, s *spec.Spec) []spec.Axis {
	if len(axes) > 0 {
		return axes
	}
	return s.SweepAxes()
}
