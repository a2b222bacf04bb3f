package results

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reps builds n repetitions of one configuration; noise[i] multiplies rep i's numbers.
func reps(name string, c map[string]any, n int, rps, p50, p99 float64, noise func(i int) float64) []*Result {
	var out []*Result
	for i := 0; i < n; i++ {
		k := noise(i)
		cc := map[string]any{"run.id": fmt.Sprintf("%s-%d", name, i)}
		for key, v := range c {
			cc[key] = v
		}
		out = append(out, fakeResult(name, fmt.Sprintf("r%d", i), cc, rps/k, p50*k, p99*k))
	}
	return out
}

// slight is a fixed ±2% noise pattern; wide is ±30%.
func slight(i int) float64 { return []float64{1.00, 1.02, 0.99, 0.98, 1.01, 1.015, 0.985}[i%7] }
func wide(i int) float64   { return []float64{1.0, 1.3, 0.75, 1.2, 0.85, 1.1, 0.7}[i%7] }

func scale(rs []*Result, f func(r *Result)) []*Result {
	for _, r := range rs {
		f(r)
	}
	return rs
}

func rowOf(t *testing.T, rep *Report, metric string) Row {
	t.Helper()
	for _, g := range rep.Groups {
		for _, r := range g.Rows {
			if r.Metric == metric {
				return r
			}
		}
	}
	t.Fatalf("no row for %s", metric)
	return Row{}
}

func TestCompareIdentical(t *testing.T) {
	base := reps("default", cfg("acks", "all"), 5, 50000, 40, 200, slight)
	rep, err := Compare(base, reps("default", cfg("acks", "all"), 5, 50000, 40, 200, slight), CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Regressed() {
		t.Errorf("identical runs regressed: %v", rep.Regressions)
	}
	for _, g := range rep.Groups {
		for _, r := range g.Rows {
			if r.Delta() != "~" || r.ChangePct != 0 {
				t.Errorf("%s: delta %s change %v", r.Metric, r.Delta(), r.ChangePct)
			}
		}
	}
	if got := len(rowOf(t, rep, "p99-ack").Base.Values); got != 5 {
		t.Errorf("base samples %d", got)
	}
}

func TestCompareP99Worse(t *testing.T) {
	base := reps("default", cfg("acks", "all"), 5, 50000, 40, 200, slight)
	nw := scale(reps("default", cfg("acks", "all"), 5, 50000, 40, 200, func(i int) float64 { return slight(i + 3) }), func(r *Result) {
		r.AckLatencyUs.P99 *= 1.3
	})
	rep, err := Compare(base, nw, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Regressions) != 1 || !strings.HasPrefix(rep.Regressions[0], "p99-ack: +") || !strings.Contains(rep.Regressions[0], "(p=0.008, n=5+5) exceeds 5%") {
		t.Fatalf("regressions %q, want one p99-ack line", rep.Regressions)
	}
	r := rowOf(t, rep, "p99-ack")
	if !r.Significant || !r.Worse || r.ChangePct < 25 || r.ChangePct > 35 {
		t.Errorf("row %+v", r)
	}
	if d := rowOf(t, rep, "p50-ack").Delta(); d != "~" {
		t.Errorf("p50 delta %s, want ~", d)
	}
	var buf bytes.Buffer
	if err := PrintCompare(&buf, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare-p99-worse.txt", buf.Bytes())

	// A per-metric threshold above the change turns it into a pass.
	rep, err = Compare(base, nw, CompareOptions{Thresholds: map[string]float64{"p99-ack": 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Regressed() {
		t.Errorf("threshold 50%%: regressions %v", rep.Regressions)
	}
	if d := rowOf(t, rep, "p99-ack").Delta(); d != "~" {
		t.Errorf("below-threshold delta %s, want ~", d)
	}
}

func TestCompareImprovementIsNotRegression(t *testing.T) {
	base := reps("default", nil, 5, 50000, 40, 200, slight)
	nw := scale(reps("default", nil, 5, 50000, 40, 200, slight), func(r *Result) {
		r.AckLatencyUs.P99 *= 0.5
		r.Produced.RecordsPerSec *= 2
	})
	rep, _ := Compare(base, nw, CompareOptions{})
	if rep.Regressed() {
		t.Errorf("improvement flagged: %v", rep.Regressions)
	}
	if d := rowOf(t, rep, "records/s").Delta(); !strings.HasPrefix(d, "+") {
		t.Errorf("records/s delta %s", d)
	}
}

func TestCompareNoisyOverlapping(t *testing.T) {
	base := reps("default", nil, 6, 50000, 40, 200, wide)
	nw := reps("default", nil, 6, 50000, 40, 200, func(i int) float64 { return wide(i+1) * 1.05 })
	rep, err := Compare(base, nw, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Regressed() {
		t.Errorf("noisy overlapping runs regressed: %v", rep.Regressions)
	}
	if r := rowOf(t, rep, "p99-ack"); r.Significant {
		t.Errorf("p99 called significant: p=%v", r.P)
	}
}

func TestCompareTooFewSamples(t *testing.T) {
	base := reps("default", nil, 2, 50000, 40, 200, slight)
	nw := scale(reps("default", nil, 2, 50000, 40, 200, slight), func(r *Result) { r.AckLatencyUs.P99 *= 1.4 })
	rep, err := Compare(base, nw, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Regressed() {
		t.Errorf("2+2 runs regressed: %v", rep.Regressions)
	}
	r := rowOf(t, rep, "p99-ack")
	if !r.TooFew || !strings.Contains(r.Note, "need >= 4 runs per side for alpha=0.05") {
		t.Errorf("row %+v", r)
	}
	var buf bytes.Buffer
	PrintCompare(&buf, rep)
	if !strings.Contains(buf.String(), "need >= 4 runs per side for alpha=0.05") {
		t.Errorf("output does not say so:\n%s", buf.String())
	}
	golden(t, "compare-too-few.txt", buf.Bytes())
}

// The external gate check: 4 runs per side, latencies x1.4 and throughput x0.6 in every run.
func TestCompareGateCheckShape(t *testing.T) {
	if p := MinPValue(4, 4); p >= 0.05 || p < 0.028 || p > 0.029 {
		t.Fatalf("MinPValue(4,4) = %v", p)
	}
	if n := RunsNeeded(0.05); n != 4 {
		t.Errorf("RunsNeeded(0.05) = %d", n)
	}
	dir := t.TempDir()
	base := reps("default", cfg("acks", "all", "num.replica.fetchers", 1.0), 4, 50000, 40, 200, func(i int) float64 { return 1 + float64(i%4)*0.04 })
	for i, r := range base {
		d := filepath.Join(dir, "a", fmt.Sprintf("rep-%d", i))
		os.MkdirAll(d, 0o755)
		if err := WriteResult(filepath.Join(d, ResultFileName), r); err != nil {
			t.Fatal(err)
		}
		d = filepath.Join(dir, "b", fmt.Sprintf("rep-%d", i))
		os.MkdirAll(d, 0o755)
		r.AckLatencyUs.P50 *= 1.4
		r.AckLatencyUs.P99 *= 1.4
		r.AckLatencyUs.P999 *= 1.4
		r.Produced.RecordsPerSec *= 0.6
		r.Produced.MBPerSec *= 0.6
		if err := WriteResult(filepath.Join(d, ResultFileName), r); err != nil {
			t.Fatal(err)
		}
	}
	a, err := LoadResults(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadResults(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	same, _ := Compare(a, a, CompareOptions{})
	if same.Regressed() {
		t.Errorf("identical dirs: %v", same.Regressions)
	}
	rep, err := Compare(a, b, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	PrintCompare(&buf, rep)
	want := []string{"records/s: -40.0% (p=0.029, n=4+4) exceeds 5%", "MB/s: -40.0% (p=0.029, n=4+4) exceeds 5%",
		"p50-ack: +40.0% (p=0.029, n=4+4) exceeds 5%", "p99-ack: +40.0% (p=0.029, n=4+4) exceeds 5%", "p999-ack: +40.0% (p=0.029, n=4+4) exceeds 5%"}
	if strings.Join(rep.Regressions, "\n") != strings.Join(want, "\n") {
		t.Errorf("regressions:\n%s\nwant:\n%s\n%s", strings.Join(rep.Regressions, "\n"), strings.Join(want, "\n"), buf.String())
	}
}

func TestCompareSweepGroups(t *testing.T) {
	var base, nw []*Result
	for _, f := range []float64{1, 2} {
		c := cfg("num.replica.fetchers", f)
		base = append(base, reps("default", c, 5, 50000, 40, 200, slight)...)
		n := reps("default", c, 5, 50000, 40, 200, slight)
		if f == 2 {
			scale(n, func(r *Result) { r.AckLatencyUs.P99 *= 1.5 })
		}
		nw = append(nw, n...)
	}
	nw = append(nw, reps("other", nil, 1, 1, 1, 1, slight)...)
	rep, err := Compare(base, nw, CompareOptions{Metrics: []string{"p99-ack", "records/s"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != 3 {
		t.Fatalf("%d groups", len(rep.Groups))
	}
	if len(rep.Regressions) != 1 || !strings.HasPrefix(rep.Regressions[0], "default/num.replica.fetchers=2 p99-ack: +50.0%") {
		t.Errorf("regressions %q", rep.Regressions)
	}
	if rep.Groups[2].Unmatched != "new" || !strings.Contains(strings.Join(rep.Notes, "\n"), "only in new") {
		t.Errorf("unmatched group: %+v notes %v", rep.Groups[2], rep.Notes)
	}
	var buf bytes.Buffer
	PrintCompare(&buf, rep)
	golden(t, "compare-sweep.txt", buf.Bytes())
}

func TestCompareBadInput(t *testing.T) {
	rs := reps("default", nil, 3, 1, 1, 1, slight)
	if _, err := Compare(rs, rs, CompareOptions{Metrics: []string{"p42-ack"}}); err == nil || !strings.Contains(err.Error(), `unknown metric "p42-ack"`) {
		t.Errorf("unknown metric: %v", err)
	}
	if _, err := Compare(nil, rs, CompareOptions{}); err == nil {
		t.Error("empty base accepted")
	}
	if _, err := LoadResults(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no result.json") {
		t.Errorf("empty dir: %v", err)
	}
	for _, s := range []string{"x", "-5%", "abc%"} {
		if _, err := ParsePercent(s); err == nil {
			t.Errorf("ParsePercent(%q) accepted", s)
		}
	}
	if f, err := ParsePercent("20%"); err != nil || f != 0.2 {
		t.Errorf("ParsePercent(20%%) = %v %v", f, err)
	}
	if _, _, err := ParseThreshold("p99-ack"); err == nil {
		t.Error("threshold without = accepted")
	}
	if m, f, err := ParseThreshold("p99-ack=20%"); err != nil || m != "p99-ack" || f != 0.2 {
		t.Errorf("ParseThreshold = %v %v %v", m, f, err)
	}
}

func TestCompareMissingMetricSkipped(t *testing.T) {
	rs := reps("default", nil, 4, 1000, 10, 20, slight) // e2e histograms are empty
	rep, err := Compare(rs, rs, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Groups {
		for _, r := range g.Rows {
			if r.Metric == "p99-e2e" {
				t.Errorf("row for absent metric: %+v", r)
			}
		}
	}
}

func TestGroupResultsIgnoresRunIDs(t *testing.T) {
	var rs []*Result
	for i, f := range []float64{1, 1, 1, 2, 2, 2} {
		rs = append(rs, fakeResult("default", "x", cfg("num.replica.fetchers", f, "acks", "all",
			"label", fmt.Sprintf("20261129T1600%02d-default", i), "repeat", float64(i%3), "compression", "none"), 1, 1, 1))
	}
	gs := GroupResults(rs)
	if len(gs) != 2 || len(gs[0].Results) != 3 || len(gs[1].Results) != 3 {
		t.Fatalf("groups: %d", len(gs))
	}
	if gs[0].Label != "default/num.replica.fetchers=1" || gs[1].Label != "default/num.replica.fetchers=2" {
		t.Errorf("labels %q %q", gs[0].Label, gs[1].Label)
	}
}

func TestGroupResultsKeepsStringSweepKeys(t *testing.T) {
	var rs []*Result
	for _, io := range []string{"pwritev", "uring", "write"} {
		rs = append(rs, fakeResult("default", "x", cfg("isrbench.io", io), 1, 1, 1))
	}
	if gs := GroupResults(rs); len(gs) != 3 || gs[1].Label != "default/isrbench.io=uring" {
		t.Fatalf("groups %d", len(gs))
	}
}

func TestCompareNotesDifferingConfigAndInfiniteCI(t *testing.T) {
	base := reps("gate", map[string]any{"acks": "all", "isrbench.produce.delay": "0s", "old.key": 1, "flush.ms": float64(1 << 62)}, 5, 3000, 100, 200, slight)
	nw := reps("gate", map[string]any{"acks": "all", "isrbench.produce.delay": "2ms", "flush.ms": int64(1 << 62)}, 5, 3000, 100, 200, slight)
	rep, err := Compare(base, nw, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(rep.Notes, "\n")
	for _, want := range []string{
		`differ in configuration (isrbench.produce.delay=0s->2ms, old.key=1->unset); compared anyway`,
		"± ∞: a 95% confidence interval of a median needs >= 6 runs per side",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
	if rep.Regressed() {
		t.Errorf("identical numbers regressed: %v", rep.Regressions)
	}
	// With 6 runs per side the CI is finite: no ± ∞ note.
	rep, err = Compare(reps("gate", nil, 6, 3000, 100, 200, slight), reps("gate", nil, 6, 3000, 100, 200, slight), CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Join(rep.Notes, "\n"); strings.Contains(n, "± ∞") || strings.Contains(n, "differ in configuration") {
		t.Errorf("6+6 runs of one config: notes %q", n)
	}
}
