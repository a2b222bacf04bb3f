package gate

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/results/report"
)

// Judge compares base with new, each side as one configuration (OneConfig), and returns the
// comparison and its verdict (what gate.json stores); dir is the gate directory and baseDir,
// newDir the sides' run directories. An unknown metric or an empty side is an error.
func Judge(base, nw []*results.Result, opts results.CompareOptions, dir, baseDir, newDir string) (*results.Report, *report.Verdict, error) {
	rep, err := results.Compare(OneConfig(base), OneConfig(nw), opts)
	if err != nil {
		return nil, nil, fmt.Errorf("gate: %w", err)
	}
	return rep, report.NewVerdict(rep, opts, dir, baseDir, newDir), nil
}

// WriteReport writes the verdict as <dir>/gate.json and the comparison page of the two sides
// as <dir>/report.html, and returns the page's path.
func WriteReport(dir string, v *report.Verdict, o report.Options) (string, error) {
	page, err := report.WriteGate(dir, v, o)
	if err != nil {
		return "", fmt.Errorf("gate: writing the report: %w", err)
	}
	return page, nil
}

// PrintVerdict writes the verdict table: per configuration one row per metric with each side's
// median ± its confidence interval (as a percentage of the median), the change ("~" when not
// significant or within the threshold), p and the run counts, the metric's significance level,
// the spread of each side's runs ((max - min) / median: base / new), its threshold and the
// verdict; then the notes and one line per regression (or "no regression").
func PrintVerdict(w io.Writer, v *report.Verdict) error {
	var groups [][]report.VerdictRow
	for i, r := range v.Rows {
		if i == 0 || r.Group != v.Rows[i-1].Group {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], r)
	}
	for gi, rows := range groups {
		nb, nn := 0, 0
		for _, r := range rows {
			nb, nn = max(nb, r.Base.N), max(nn, r.New.N)
		}
		if gi > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: base %d runs, new %d runs; Mann-Whitney U\n", rows[0].Group, nb, nn)
		t := results.NewTable(w, "metric", "base", "new", "change", "p / n", "alpha", "spread b / n", "threshold", "verdict")
		for _, r := range rows {
			verdict := r.Verdict
			if verdict == "regression" {
				verdict = "REGRESSION"
			}
			stat := r.Stat
			if r.Note != "" && r.Verdict != "too few runs" {
				stat += " (" + r.Note + ")"
			}
			alpha := r.Alpha
			if alpha == 0 {
				alpha = v.Alpha // gate.json written before per-metric levels
			}
			t.Append(r.Metric, fmtSide(r.Base, r.Unit), fmtSide(r.New, r.Unit), r.Delta, stat, strconv.FormatFloat(alpha, 'g', -1, 64),
				fmtSpread(r.Base)+" / "+fmtSpread(r.New), fmtPct(r.Threshold*100), verdict)
		}
		if err := t.Render(); err != nil {
			return fmt.Errorf("gate: verdict table: %w", err)
		}
	}
	results.PrintFindings(w, v.Notes, v.Regressions, v.Alpha)
	return nil
}

// fmtSide: "412.3 µs ± 3%" (the CI's larger half as a percentage of the median; "± ∞" when the
// interval is unbounded with this few runs).
func fmtSide(s report.SideStat, unit string) string {
	if s.N == 0 || s.Median == nil {
		return "-"
	}
	lo, hi := math.Inf(-1), math.Inf(1) // unbounded with this few runs
	if s.Lo != nil && s.Hi != nil {
		lo, hi = *s.Lo, *s.Hi
	}
	return results.FormatInterval(*s.Median, lo, hi, unit)
}

func fmtSpread(s report.SideStat) string {
	if s.SpreadPct == nil {
		return "-"
	}
	return fmtPct(*s.SpreadPct)
}

// fmtPct: "5%", "12.5%", "0.8%".
func fmtPct(p float64) string {
	if math.Abs(p) >= 10 {
		return strconv.FormatFloat(p, 'f', 0, 64) + "%"
	}
	s := strconv.FormatFloat(p, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + "%"
}
