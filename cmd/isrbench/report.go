package main

import (
	"context"
	"fmt"
	"io"

	"github.com/isrbench/isrbench/results/report"
	"github.com/isrbench/isrbench/workloads"
)

func init() {
	register("report", "write a self-contained report.html for a run, sweep or gate directory, or a comparison of several", cmdReport)
}

const reportUsage = `report DIR... [-o FILE] [--title TEXT]

One DIR: a run directory (or its result.json), a sweep directory (sweep.json) or a gate
directory (gate.json, base/, new/); the page goes to DIR/report.html unless -o says otherwise.
Any other directory, or several DIRs, give a comparison of the configurations they hold (each
DIR's runs grouped into repetitions of one configuration); several DIRs need -o.`

func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", reportUsage, stderr)
	out := fs.String("o", "", "output file (default DIR/report.html for one DIR)")
	title := fs.String("title", "", "page title (default from the runs)")
	dirs, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		fs.Usage()
		return usagef("report: want at least one run, sweep or gate directory")
	}
	if len(dirs) > 1 && *out == "" {
		return usagef("report: %d directories: give the output file with -o FILE", len(dirs))
	}
	o := report.Options{Defaults: workloads.ReportDefaults(), Title: *title, Out: *out}
	if o.Out == "" {
		o.Out = report.DefaultOut(dirs[0])
	}
	d, err := report.Build(dirs, o)
	if err != nil {
		return usagef("%v", err)
	}
	if err := report.Write(o.Out, d); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "report: %s\n", o.Out)
	return nil
}
