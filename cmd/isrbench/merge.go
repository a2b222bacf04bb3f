package main

import (
	"context"
	"fmt"
	"io"

	"github.com/isrbench/isrbench/results"
)

func init() {
	register("merge", "merge the run directories of the workers of one multi-worker run (run --worker K/N)", cmdMerge)
}

func cmdMerge(_ context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "merge --out DIR RUNDIR... (the run directories of workers 1..N of one run --worker K/N --start-at T)"
	fs := newFlags("merge", usage, stderr)
	out := fs.String("out", "", "directory for the merged result (result.json, .hgrm, timeline.csv, bench.txt)")
	dirs, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *out == "" {
		return usagef("merge: --out DIR is required")
	}
	if len(dirs) == 0 {
		return usagef("merge: no run directories; usage: isrbench %s", usage)
	}
	m, err := results.MergeRuns(dirs, *out)
	if err != nil {
		return usagef("%v", err)
	}
	if err := results.PrintSummary(stdout, m); err != nil {
		return err
	}
	for _, w := range m.Merged.Workers {
		clock := "clock offset not measured (no consumer read the other worker's records)"
		if w.ClockOffsetUs != nil {
			clock = fmt.Sprintf("clock %+.1f µs ± %.1f µs from worker 1", *w.ClockOffsetUs, *w.ClockBoundUs)
		}
		fmt.Fprintf(stdout, "worker %d: %d records, acked %d, lost %d; %s (%s)\n", w.Index, w.Records, w.Durability.Acked, w.Durability.Lost, clock, w.Dir)
	}
	fmt.Fprintf(stdout, "merged: %s\n", *out)
	return nil
}
