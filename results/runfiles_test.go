package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteRun: the run's files are written and listed in result.json, an empty latency
// series and an empty timeline make no plot, and an unwritable file is an error naming it.
func TestWriteRun(t *testing.T) {
	dir := t.TempDir()
	ack, empty := NewHistogram(), NewHistogram()
	for v := int64(1); v <= 1000; v++ {
		ack.Record(v)
	}
	res := &Result{ID: "r1", Name: "w", DurationS: 1, Produced: Produced{Records: 1000}}
	res.Files.Hgrm = []string{"earlier.hgrm"}
	var plotErrs []error
	err := WriteRun(dir, res, RunFiles{
		Hgrms:      []NamedHistogram{{"ack_latency.hgrm", ack}, {"e2e_latency.hgrm", empty}},
		Latency:    []LatencySeries{{Name: "ack", H: ack}, {Name: "e2e", H: empty}},
		PlotFailed: func(err error) { plotErrs = append(plotErrs, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"earlier.hgrm", filepath.Join(dir, "ack_latency.hgrm"), filepath.Join(dir, "e2e_latency.hgrm")}
	if strings.Join(res.Files.Hgrm, " ") != strings.Join(want, " ") {
		t.Errorf("Files.Hgrm = %v, want %v", res.Files.Hgrm, want)
	}
	if res.Files.Bench != filepath.Join(dir, "bench.txt") {
		t.Errorf("Files.Bench = %q", res.Files.Bench)
	}
	if len(plotErrs) == 0 && (len(res.Files.Plots) != 1 || filepath.Base(res.Files.Plots[0]) != "latency.png") {
		t.Errorf("Files.Plots = %v, want latency.png only", res.Files.Plots)
	}
	for _, p := range append(res.Files.Hgrm[1:], res.Files.Bench, filepath.Join(dir, "result.json")) {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (empty or missing)", p, err)
		}
	}
	back, err := ReadResult(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if back.Files.Bench != res.Files.Bench || len(back.Files.Hgrm) != 3 {
		t.Errorf("result.json files = %+v", back.Files)
	}

	if err := os.WriteFile(filepath.Join(dir, "sub"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = WriteRun(filepath.Join(dir, "sub"), &Result{ID: "r2"}, RunFiles{Hgrms: []NamedHistogram{{"ack_latency.hgrm", ack}}})
	if err == nil || !strings.Contains(err.Error(), "ack_latency.hgrm") {
		t.Errorf("WriteRun into a file: %v, want an error naming ack_latency.hgrm", err)
	}
}
