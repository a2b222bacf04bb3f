package gate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/results/report"
)

// ReadVerdicts reads the gate.json of each gate directory (or gate.json file) given.
func ReadVerdicts(paths []string) ([]*report.Verdict, error) {
	var out []*report.Verdict
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			p = filepath.Join(p, report.GateFile)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, inputErrorf("gate: %v", err)
		}
		var v report.Verdict
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, inputErrorf("gate: %s: %v", p, err)
		}
		out = append(out, &v)
	}
	return out, nil
}

// MetricNoise is one metric over many gates (Noise). A plain value.
type MetricNoise struct {
	Metric     string
	Gates      int       // gates that compared the metric on both sides
	Changes    []float64 // |change of the medians| per gate, percent, ascending
	Spreads    []float64 // each side's spread per gate, percent, ascending
	Flagged    int       // gates with p < the metric's alpha, either direction
	Regressed  int       // gates that called it a regression
	Thresholds []float64 // thresholds used, percent (distinct, ascending)
}

// Noise summarises verdicts per metric, in the order the metrics first appear. Run it over
// same-versus-same gates (both sides the same build and settings): every change is noise, and
// a threshold should stand above the largest.
func Noise(vs []*report.Verdict) []MetricNoise {
	var order []string
	by := map[string]*MetricNoise{}
	for _, v := range vs {
		for _, r := range v.Rows {
			m := by[r.Metric]
			if m == nil {
				m = &MetricNoise{Metric: r.Metric}
				by[r.Metric] = m
				order = append(order, r.Metric)
			}
			if r.ChangePct == nil || r.Base.N == 0 || r.New.N == 0 {
				continue
			}
			m.Gates++
			m.Changes = append(m.Changes, math.Abs(*r.ChangePct))
			for _, s := range []report.SideStat{r.Base, r.New} {
				if s.SpreadPct != nil {
					m.Spreads = append(m.Spreads, *s.SpreadPct)
				}
			}
			alpha := r.Alpha
			if alpha == 0 {
				alpha = v.Alpha
			}
			if r.P < alpha && r.Verdict != "too few runs" {
				m.Flagged++
			}
			if r.Verdict == "regression" {
				m.Regressed++
			}
			if th := r.Threshold * 100; !slices.Contains(m.Thresholds, th) {
				m.Thresholds = append(m.Thresholds, th)
			}
		}
	}
	out := make([]MetricNoise, 0, len(order))
	for _, n := range order {
		m := by[n]
		slices.Sort(m.Changes)
		slices.Sort(m.Spreads)
		slices.Sort(m.Thresholds)
		out = append(out, *m)
	}
	return out
}

// PrintNoise writes Noise as a table: per metric the gates, the median and largest |change| of
// the medians, the median and largest spread of a side, how many gates found the change
// significant and how many called it a regression, and the thresholds in use.
func PrintNoise(w io.Writer, ns []MetricNoise) error {
	if len(ns) == 0 {
		_, err := fmt.Fprintln(w, "no gate verdicts")
		return err
	}
	t := results.NewTable(w, "metric", "gates", "|change| median", "|change| max", "spread median", "spread max", "p < alpha", "regressions", "threshold")
	for _, m := range ns {
		th := "-"
		if len(m.Thresholds) > 0 {
			th = fmtPct(m.Thresholds[0])
			if len(m.Thresholds) > 1 {
				th += ".." + fmtPct(m.Thresholds[len(m.Thresholds)-1])
			}
		}
		t.Append(m.Metric, strconv.Itoa(m.Gates), pctOf(median(m.Changes)), pctOf(last(m.Changes)),
			pctOf(median(m.Spreads)), pctOf(last(m.Spreads)), strconv.Itoa(m.Flagged), strconv.Itoa(m.Regressed), th)
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("gate: noise table: %w", err)
	}
	_, err := fmt.Fprintln(w, "|change|: of the medians, base to new, per gate; spread: (max - min) / median of one side's runs")
	return err
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func last(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return v[len(v)-1]
}

func pctOf(p float64) string {
	if math.IsNaN(p) {
		return "-"
	}
	return fmtPct(p)
}
