package gate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/results/report"
)

// sides are six runs a side of a gate whose new build costs 10% more CPU per record with the
// same latency, and whose base side lacks cost in one run (an older build).
func sides() (base, nw []*results.Result) {
	for i, v := range []struct{ p50, cpu float64 }{{410, 300}, {395, 306}, {430, 297}, {402, 303}, {388, 301}, {420, 0}} {
		base = append(base, result(v.p50, v.cpu))
		nw = append(nw, result(400+float64(i*7), v.cpu*1.1+float64(i)))
	}
	nw[5].Cost = result(0, 335).Cost
	for i, r := range nw {
		r.Cost.AllocsPerRecord = 110 + float64(i%2)
	}
	return base, nw
}

func TestVerdictGolden(t *testing.T) {
	base, nw := sides()
	opts := results.CompareOptions{Alpha: 0.01, MinChange: 0.05, Thresholds: map[string]float64{"p50-ack": 0.3}, Alphas: map[string]float64{"allocs/rec": 0.05},
		Metrics: []string{"records/s", "p50-ack", "p99-ack", "cpu/rec", "allocs/rec", "syscalls/rec", "p99-e2e"}}
	rep, v, err := Judge(base, nw, opts, "gate-dir", "gate-dir/base", "gate-dir/new")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Regressed() || len(rep.Regressions) != 1 || !strings.HasPrefix(rep.Regressions[0], "cpu/rec: +11.3%") {
		t.Fatalf("regressions %q, want cpu/rec only", rep.Regressions)
	}
	var out bytes.Buffer
	if err := PrintVerdict(&out, v); err != nil {
		t.Fatal(err)
	}
	golden(t, "verdict.golden", out.Bytes())
	if v.Base != "base" || v.New != "new" || v.Passed {
		t.Fatalf("verdict sides %q %q passed %v", v.Base, v.New, v.Passed)
	}
	for _, r := range v.Rows {
		if r.Metric == "cpu/rec" && (r.Base.N != 5 || r.Base.SpreadPct == nil || *r.Base.SpreadPct < 2.9 || *r.Base.SpreadPct > 3.1) {
			t.Fatalf("cpu/rec base side %+v: want 5 runs, spread (306-297)/301", r.Base)
		}
	}

	// Same versus same: no regression, the table says so.
	rep, v, err = Judge(base, base, opts, "d", "d/base", "d/new")
	if err != nil || rep.Regressed() {
		t.Fatalf("same vs same: %v, %v", rep.Regressions, err)
	}
	out.Reset()
	if err := PrintVerdict(&out, v); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "no regression (alpha=0.01)\n") {
		t.Fatalf("same vs same table:\n%s", out.String())
	}
	if _, _, err := Judge(base, nil, opts, "d", "d/base", "d/new"); err == nil {
		t.Fatal("an empty side: no error")
	}
}

func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	base, nw := sides()
	for _, side := range []struct {
		name string
		rs   []*results.Result
	}{{Base, base}, {New, nw}} {
		for i, r := range side.rs {
			d := filepath.Join(dir, side.name, "r"+string(rune('1'+i)))
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := results.WriteResult(filepath.Join(d, results.ResultFileName), r); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, v, err := Judge(base, nw, results.CompareOptions{Alpha: 0.01, Metrics: []string{"cpu/rec", "p50-ack"}}, dir, filepath.Join(dir, Base), filepath.Join(dir, New))
	if err != nil {
		t.Fatal(err)
	}
	page, err := WriteReport(dir, v, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(page)
	if err != nil || !bytes.Contains(b, []byte("REGRESSION cpu/rec")) {
		t.Fatalf("report.html lacks the regression: %v", err)
	}
	vs, err := ReadVerdicts([]string{dir})
	if err != nil || len(vs) != 1 || vs[0].Passed || len(vs[0].Rows) != 2 {
		t.Fatalf("gate.json read back: %v, %v", vs, err)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("output differs from %s (go test -update to accept):\n%s", p, got)
	}
}
