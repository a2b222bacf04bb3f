package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/isrbench/isrbench/results"
)

// Verdict is a gate's comparison as gate.json stores it and the page shows it. A plain value.
type Verdict struct {
	// Base and New are the two sides' run directories: relative to the gate directory when
	// inside it (interleaved runs), else absolute (a --baseline directory).
	Base        string       `json:"base"`
	New         string       `json:"new"`
	Alpha       float64      `json:"alpha"`
	Confidence  float64      `json:"confidence"`
	MinChange   float64      `json:"min_change"` // fraction; per-metric thresholds are in Rows
	Passed      bool         `json:"passed"`
	Rows        []VerdictRow `json:"rows"`
	Regressions []string     `json:"regressions"`
	Notes       []string     `json:"notes"`
}

// VerdictRow is one metric of the gate.
type VerdictRow struct {
	Group        string   `json:"group"`
	Metric       string   `json:"metric"`
	Unit         string   `json:"unit"`
	HigherBetter bool     `json:"higher_better"`
	Base         SideStat `json:"base"`
	New          SideStat `json:"new"`
	// ChangePct is the change of the medians in percent (nil when infinite or undefined);
	// Delta is the gate's change column: "~" unless significant and above the threshold.
	ChangePct *float64 `json:"change_pct"`
	Delta     string   `json:"delta"`
	P         float64  `json:"p"`
	Stat      string   `json:"stat"`      // "p=0.029 n=4+4"
	Threshold float64  `json:"threshold"` // fraction
	Alpha     float64  `json:"alpha"`     // the metric's significance level (Verdict.Alpha unless overridden)
	// Verdict is one of "regression", "improvement", "within threshold", "no significant
	// change", "too few runs", "no samples".
	Verdict string `json:"verdict"`
	Note    string `json:"note,omitempty"`
}

// SideStat is one side of a metric: median and its confidence interval (nil bounds: the
// interval is unbounded with this few runs), and the spread of the runs: (max - min) / median
// in percent, the run-to-run noise of the side (nil with fewer than 2 runs or a zero median).
type SideStat struct {
	N         int       `json:"n"`
	Median    *float64  `json:"median"`
	Lo        *float64  `json:"lo"`
	Hi        *float64  `json:"hi"`
	Values    []float64 `json:"values"`
	SpreadPct *float64  `json:"spread_pct,omitempty"`
}

func finite(v float64) *float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

func sideStat(s results.Side) SideStat {
	out := SideStat{N: s.N, Values: append([]float64{}, s.Values...)}
	if s.N > 0 {
		out.Median, out.Lo, out.Hi = finite(s.Center), finite(s.Lo), finite(s.Hi)
	}
	if s.N >= 2 && s.Center != 0 {
		out.SpreadPct = finite((s.Values[len(s.Values)-1] - s.Values[0]) / math.Abs(s.Center) * 100)
	}
	return out
}

// NewVerdict turns a gate's comparison into a Verdict; base and new are the sides' run
// directories (made relative to gateDir when inside it).
func NewVerdict(rep *results.Report, opts results.CompareOptions, gateDir, base, new string) *Verdict {
	v := &Verdict{Base: dirIn(gateDir, base), New: dirIn(gateDir, new), Alpha: rep.Alpha, Confidence: rep.Confidence,
		MinChange: opts.MinChange, Passed: !rep.Regressed(), Rows: []VerdictRow{},
		Regressions: append([]string{}, rep.Regressions...), Notes: append([]string{}, rep.Notes...)}
	for _, g := range rep.Groups {
		for _, r := range g.Rows {
			row := VerdictRow{Group: g.Label, Metric: r.Metric, Unit: r.Unit, HigherBetter: r.HigherBetter,
				Base: sideStat(r.Base), New: sideStat(r.New), Delta: r.Delta(), P: r.P, Stat: r.Stat(),
				Threshold: r.Threshold, Alpha: r.Alpha, Note: r.Note}
			if r.Base.N > 0 && r.New.N > 0 {
				row.ChangePct = finite(r.ChangePct)
			}
			switch {
			case r.Base.N == 0 || r.New.N == 0:
				row.Verdict = "no samples"
			case r.TooFew:
				row.Verdict = "too few runs"
			case r.Regression:
				row.Verdict = "regression"
			case !r.Significant:
				row.Verdict = "no significant change"
			case math.Abs(r.ChangePct) <= r.Threshold*100:
				row.Verdict = "within threshold"
			case r.Worse:
				row.Verdict = "regression" // unreachable: Regression covers it
			default:
				row.Verdict = "improvement"
			}
			v.Rows = append(v.Rows, row)
		}
	}
	return v
}

// dirIn is p relative to dir when inside it, else p made absolute.
func dirIn(dir, p string) string {
	ad, err1 := filepath.Abs(dir)
	ap, err2 := filepath.Abs(p)
	if err1 != nil || err2 != nil {
		return p
	}
	if rel, err := filepath.Rel(ad, ap); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return filepath.ToSlash(rel)
	}
	return ap
}

// WriteGate writes the gate's verdict as <dir>/gate.json and the comparison page of its two
// sides as <dir>/report.html; it returns the page's path.
func WriteGate(dir string, v *Verdict, o Options) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", fmt.Errorf("report: encode %s: %w", GateFile, err)
	}
	if err := writeAtomic(filepath.Join(dir, GateFile), append(b, '\n')); err != nil {
		return "", err
	}
	d, err := BuildGate(dir, o)
	if err != nil {
		return "", err
	}
	out := o.out(dir)
	return out, Write(out, d)
}

// readVerdict reads <dir>/gate.json; (nil, nil) when there is none.
func readVerdict(dir string) (*Verdict, error) {
	p := filepath.Join(dir, GateFile)
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var v Verdict
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("report: %s: %w", p, err)
	}
	for i := range v.Rows {
		if v.Rows[i].Alpha == 0 { // written before per-metric levels
			v.Rows[i].Alpha = v.Alpha
		}
	}
	return &v, nil
}

// isGateDir: a gate's output directory holds gate.json, or base/ and new/ run directories.
func isGateDir(dir string) bool {
	if fileExists(filepath.Join(dir, GateFile)) {
		return true
	}
	for _, s := range []string{gateBaseDirName, gateNewDirName} {
		if st, err := os.Stat(filepath.Join(dir, s)); err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}

// BuildGate builds the comparison page of a gate directory: the base side (gate.json's base,
// default <dir>/base) against the new side (<dir>/new), with gate.json's verdict.
func BuildGate(dir string, o Options) (*Data, error) {
	v, err := readVerdict(dir)
	if err != nil {
		return nil, err
	}
	side := func(p, def string) string {
		if p == "" {
			p = def
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, filepath.FromSlash(p))
		}
		return p
	}
	baseDir, newDir := filepath.Join(dir, gateBaseDirName), filepath.Join(dir, gateNewDirName)
	if v != nil {
		baseDir, newDir = side(v.Base, gateBaseDirName), side(v.New, gateNewDirName)
	}
	base, err := loadRuns(baseDir)
	if err != nil {
		return nil, fmt.Errorf("report: gate base side: %w", err)
	}
	nw, err := loadRuns(newDir)
	if err != nil {
		return nil, fmt.Errorf("report: gate new side: %w", err)
	}
	pts := []pointRuns{{label: "base", runs: base}, {label: "new", runs: nw}}
	metrics := results.DefaultMetrics
	if v != nil && len(v.Rows) > 0 {
		metrics = nil
		seen := map[string]bool{}
		for _, r := range v.Rows {
			if !seen[r.Metric] {
				seen[r.Metric] = true
				metrics = append(metrics, r.Metric)
			}
		}
	}
	title := o.Title
	if title == "" {
		title = "isrbench gate " + filepath.Base(dir)
		if v != nil {
			if v.Passed {
				title += ": passed"
			} else {
				title += ": FAILED"
			}
		}
	}
	d, err := multiData("comparison", title, pts, []Axis{{Key: "side", Values: []string{"base", "new"}}}, metrics, o, filepath.Dir(o.out(dir)))
	if err != nil {
		return nil, err
	}
	d.Multi.Gate = v
	return d, nil
}
