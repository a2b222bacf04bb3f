package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/results"
)

// writeReps writes n result.json files under dir/rep-i with throughput rps*k_i and ack p99 p99*k_i.
func writeReps(t *testing.T, dir string, n int, rps, p99 float64) {
	t.Helper()
	for i := 0; i < n; i++ {
		k := 1 + 0.01*float64(i)
		h := results.NewHistogram()
		h.RecordN(int64(p99), 100)
		s := results.Summarize(h)
		s.P50, s.P99, s.P999 = p99/4*k, p99*k, p99*1.5*k
		r := &results.Result{Schema: 1, ID: fmt.Sprintf("r%d", i), Name: "default", Target: "embedded",
			StartedAt: time.Date(2026, 11, 29, 0, 0, i, 0, time.UTC), DurationS: 3,
			Config:       map[string]any{"acks": "all", "run.id": fmt.Sprintf("r%d", i)},
			Produced:     results.Produced{Records: int64(rps * 3), Bytes: int64(rps * 3000), RecordsPerSec: rps / k, MBPerSec: rps / k / 1000},
			AckLatencyUs: s, HWLagUs: s}
		d := filepath.Join(dir, fmt.Sprintf("rep-%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := results.WriteResult(filepath.Join(d, "result.json"), r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCompareCommand(t *testing.T) {
	dir := t.TempDir()
	a, worse, few, empty := filepath.Join(dir, "a"), filepath.Join(dir, "worse"), filepath.Join(dir, "few"), filepath.Join(dir, "empty")
	writeReps(t, a, 4, 50000, 200)
	writeReps(t, worse, 4, 30000, 280)
	writeReps(t, few, 2, 30000, 280)
	os.MkdirAll(empty, 0o755)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema": 7}`), 0o644)

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"identical", []string{a, a}, 0, []string{"no regression"}, nil},
		{"worse", []string{a, worse}, 1, []string{"REGRESSION p99-ack"}, []string{"p99-ack: +40.0% (p=0.029, n=4+4) exceeds 5%", "records/s: -40.0%", "metrics regressed"}},
		{"flags after", []string{a, worse, "--metric", "p99-ack", "--threshold", "p99-ack=50%"}, 0, []string{"no regression"}, nil},
		{"flags before", []string{"--metric=records/s", "--min-change", "45%", a, worse}, 0, []string{"records/s"}, nil},
		{"one metric", []string{"--metric", "p99-ack", a, worse}, 1, nil, []string{"1 metric regressed"}},
		{"too few", []string{a, few}, 0, []string{"need >= 4 runs per side for alpha=0.05"}, nil},
		{"missing", []string{a, filepath.Join(dir, "nope")}, 2, nil, []string{"NEW", "nope"}},
		{"no results", []string{empty, a}, 2, nil, []string{"BASE", "no result.json"}},
		{"bad json", []string{bad, a}, 2, nil, []string{"bad.json", `"schema"`}},
		{"one arg", []string{a}, 2, nil, []string{"want BASE and NEW"}},
		{"bad metric", []string{"--metric", "p42", a, a}, 2, nil, []string{`unknown metric "p42"`}},
		{"bad threshold", []string{"--threshold", "p99-ack", a, a}, 2, nil, []string{"metric=percent"}},
		{"bad min-change", []string{"--min-change", "lots", a, a}, 2, nil, []string{"min-change"}},
		{"bad alpha", []string{"--alpha", "2", a, a}, 2, nil, []string{"alpha"}},
		{"bad flag", []string{"--nope", a, a}, 2, nil, []string{"nope"}},
		{"help", []string{"--help"}, 0, nil, []string{"usage: isrbench compare"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), append([]string{"compare"}, tt.args...), &out, &errb)
			code := exitCode(err, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out.String(), errb.String())
			}
			for _, w := range tt.stdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
		})
	}
}
