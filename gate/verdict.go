package gate

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

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
		t := newTable(w, "metric", "base", "new", "change", "p / n", "alpha", "spread b / n", "threshold", "verdict")
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
	for _, n := range v.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(v.Regressions) == 0 {
		fmt.Fprintf(w, "no regression (alpha=%v)\n", v.Alpha)
		return nil
	}
	for _, r := range v.Regressions {
		fmt.Fprintf(w, "REGRESSION %s\n", r)
	}
	return nil
}

// newTable: headers as given, first column left-aligned, the others right-aligned (the look of
// the results tables).
func newTable(w io.Writer, header ...string) *tablewriter.Table {
	align := make([]tw.Align, len(header))
	for i := range align {
		align[i] = tw.AlignRight
	}
	align[0] = tw.AlignLeft
	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{Global: tw.AlignRight, PerColumn: align}),
	)
	hs := make([]any, len(header))
	for i, h := range header {
		hs[i] = h
	}
	t.Header(hs...)
	return t
}

// fmtSide: "412.3 µs ± 3%" (the CI's larger half as a percentage of the median; "± ∞" when the
// interval is unbounded with this few runs).
func fmtSide(s report.SideStat, unit string) string {
	if s.N == 0 || s.Median == nil {
		return "-"
	}
	m := *s.Median
	v := results.FormatValue(m) + " " + unit
	switch {
	case s.Lo == nil || s.Hi == nil:
		return v + " ± ∞"
	case m == 0:
		return v + " ± 0%"
	}
	pct := math.Max(m-*s.Lo, *s.Hi-m) / math.Abs(m) * 100
	return v + " ± " + strconv.FormatFloat(pct, 'f', 0, 64) + "%"
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
