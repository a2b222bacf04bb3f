package results

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\n--- got:\n%s\n--- want:\n%s", path, got, want)
	}
}

// fakeResult builds a deterministic result: rps records/s, ack latencies around ackP99.
func fakeResult(name, id string, cfg map[string]any, rps, ackP50, ackP99 float64) *Result {
	h := NewHistogram()
	h.RecordN(int64(ackP50), 900)
	h.RecordN(int64(ackP99), 100)
	ack := Summarize(h)
	ack.P50, ack.P99, ack.P999, ack.P9999, ack.Max = ackP50, ackP99, ackP99*1.5, ackP99*2, ackP99*2
	hw := NewHistogram()
	hw.RecordN(int64(ackP50/2), 1000)
	return &Result{
		Schema: SchemaVersion, ID: id, Name: name, Target: "embedded",
		StartedAt: time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC), DurationS: 10,
		Env:    Env{Go: "go1.26.8", GOOS: "linux", GOARCH: "amd64", CPUs: 2, Commit: "abc123", CPU: "Test CPU @ 2.0GHz"},
		Config: cfg,
		Produced: Produced{Records: int64(rps * 10), Bytes: int64(rps * 10 * 1024), RecordsPerSec: rps, MBPerSec: rps * 1024 / 1e6,
			Errors: map[string]int64{}},
		AckLatencyUs: ack,
		HWLagUs:      Summarize(hw),
		E2ELatencyUs: Summarize(NewHistogram()),
		SendDelayUs:  Summarize(NewHistogram()),
	}
}

func cfg(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}
