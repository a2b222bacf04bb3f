package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/results"
)

func init() {
	register("compare", "compare two sets of runs (benchstat statistics); exit 1 on a regression", cmdCompare)
}

// cmdCompare: isrbench compare BASE NEW [--metric m1,m2] [--alpha 0.05] [--min-change 5%] [--threshold metric=pct ...]
// BASE and NEW are result.json files or directories walked for result.json (run, sweep or gate dirs).
func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compare", "compare BASE NEW [--metric m1,m2] [--alpha 0.05] [--min-change 5%] [--threshold metric=pct ...]", stderr)
	metric := fs.String("metric", strings.Join(results.DefaultMetrics, ","), "comma-separated metrics to test (known: "+strings.Join(results.MetricNames(), ", ")+")")
	alpha := alphaFlag{all: 0.05}
	fs.Var(&alpha, "alpha", alphaHelp)
	minChange := fs.String("min-change", "5%", "smallest change that counts as a regression")
	var thresholds multiFlag
	fs.Var(&thresholds, "threshold", "per-metric minimum change, metric=pct (repeatable), e.g. p99-ack=20%")

	// Flags may come before, between or after BASE and NEW.
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return usagef("compare: want BASE and NEW, got %d argument(s)", len(pos))
	}
	opts, err := compareOptions("compare", *metric, alpha, *minChange, thresholds)
	if err != nil {
		return err
	}
	base, err := results.LoadResults(pos[0])
	if err != nil {
		return usagef("compare: BASE: %v", err)
	}
	nw, err := results.LoadResults(pos[1])
	if err != nil {
		return usagef("compare: NEW: %v", err)
	}
	rep, err := results.Compare(base, nw, opts)
	if err != nil {
		return usagef("compare: %v", err)
	}
	if err := results.PrintCompare(stdout, rep); err != nil {
		return err
	}
	if rep.Regressed() {
		for _, r := range rep.Regressions {
			fmt.Fprintln(stderr, r)
		}
		return &exitError{code: 1, err: errors.New(pluralRegressions(len(rep.Regressions)))}
	}
	return nil
}

// alphaHelp is the --alpha flag's help of compare and gate.
const alphaHelp = "significance level of the Mann-Whitney U test: for every metric (0.05), or metric=level for one (repeatable), e.g. cpu/req=0.05"

// alphaFlag is --alpha: a level for every metric ("0.01") or for one ("cpu/req=0.05"), repeatable.
type alphaFlag struct {
	all float64
	per []string // metric=level, checked by compareOptions
	bad string   // a value that is neither (reported by compareOptions as a usage error)
}

func (a *alphaFlag) String() string { return strconv.FormatFloat(a.all, 'g', -1, 64) }

func (a *alphaFlag) Set(s string) error {
	if strings.Contains(s, "=") {
		a.per = append(a.per, s)
		return nil
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		a.bad = s
		return nil
	}
	a.all = v
	return nil
}

// compareOptions builds the options of compare and gate from their --metric,
// --alpha, --min-change and --threshold flags; errors are usage errors
// prefixed with cmd.
func compareOptions(cmd, metric string, alpha alphaFlag, minChange string, thresholds []string) (results.CompareOptions, error) {
	if alpha.bad != "" {
		return results.CompareOptions{}, usagef("%s: --alpha %q: want a level such as 0.05, or metric=level", cmd, alpha.bad)
	}
	if !(alpha.all > 0 && alpha.all < 1) {
		return results.CompareOptions{}, usagef("%s: --alpha %v: want 0 < alpha < 1", cmd, alpha.all)
	}
	opts := results.CompareOptions{Alpha: alpha.all, Thresholds: map[string]float64{}, Alphas: map[string]float64{}}
	for _, kv := range alpha.per {
		k, v, _ := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if _, ok := results.Metrics()[k]; !ok {
			return opts, usagef("%s: --alpha %s: unknown metric %q (known: %s)", cmd, kv, k, strings.Join(results.MetricNames(), ", "))
		}
		a, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(a > 0 && a < 1) {
			return opts, usagef("%s: --alpha %s: want 0 < alpha < 1", cmd, kv)
		}
		opts.Alphas[k] = a
	}
	mc, err := results.ParsePercent(minChange)
	if err != nil {
		return opts, usagef("%s: --min-change: %v", cmd, err)
	}
	opts.MinChange = mc
	if mc == 0 {
		opts.MinChange = 1e-12 // any significant change counts
	}
	known := results.Metrics()
	for _, m := range strings.Split(metric, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		if _, ok := known[m]; !ok {
			return opts, usagef("%s: --metric: unknown metric %q (known: %s)", cmd, m, strings.Join(results.MetricNames(), ", "))
		}
		opts.Metrics = append(opts.Metrics, m)
	}
	for _, t := range thresholds {
		name, frac, err := results.ParseThreshold(t)
		if err != nil {
			return opts, usagef("%s: --threshold: %v", cmd, err)
		}
		opts.Thresholds[name] = frac
	}
	return opts, nil
}

func pluralRegressions(n int) string {
	if n == 1 {
		return "1 metric regressed"
	}
	return fmt.Sprintf("%d metrics regressed", n)
}
