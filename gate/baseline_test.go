package gate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/isrbench/isrbench/results"
)

func TestWriteBaselineReplacesAndSlims(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "r9", results.ResultFileName)
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(dir, "README")
	if err := os.WriteFile(keep, []byte("baseline of make gate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mk := func(p50 float64) *results.Result {
		return &results.Result{Schema: results.SchemaVersion, ID: "x", Name: "gate", DurationS: 1,
			Config:       map[string]any{"acks": "all"},
			Produced:     results.Produced{Records: 100, RecordsPerSec: 100},
			AckLatencyUs: results.Summary{Count: 100, P50: p50, P99: 2 * p50, Hdr: "HISTFAAAA"},
			Files:        results.Files{Profiles: []string{"profiles/cpu.pprof"}}}
	}
	if err := WriteBaseline(dir, []*results.Result{mk(100), mk(110)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale baseline result still there: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("non-result file removed: %v", err)
	}
	rs, err := results.LoadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].AckLatencyUs.P50 != 100 || rs[1].AckLatencyUs.P50 != 110 {
		t.Fatalf("baseline read back wrong: %d results", len(rs))
	}
	for _, r := range rs {
		if r.AckLatencyUs.Hdr != "" || len(r.Files.Profiles) != 0 {
			t.Fatalf("baseline keeps hdr %q / files %v", r.AckLatencyUs.Hdr, r.Files.Profiles)
		}
	}
}

// A side's runs differ in outcome keys recorded in the config (ISR shrinks, ...): the gate still
// compares them as one configuration instead of splitting them into unmatched groups.
func TestOneConfigKeepsRepetitionsTogether(t *testing.T) {
	mk := func(shrinks int, p50 float64) *results.Result {
		return &results.Result{Schema: results.SchemaVersion, Name: "gate", DurationS: 1,
			Config:       map[string]any{"producers.acks": "all", "isr.shrink_events": shrinks},
			Produced:     results.Produced{Records: 100, RecordsPerSec: 100},
			AckLatencyUs: results.Summary{Count: 100, P50: p50, P99: p50}}
	}
	base := []*results.Result{mk(0, 100), mk(1, 101), mk(0, 99), mk(2, 100), mk(0, 102)}
	nw := []*results.Result{mk(0, 300), mk(3, 301), mk(0, 299), mk(0, 300), mk(1, 302)}
	rep, err := results.Compare(OneConfig(base), OneConfig(nw), results.CompareOptions{Metrics: []string{"p50-ack"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != 1 || !rep.Regressed() {
		t.Fatalf("groups %d, regressions %v; want 1 group with a p50-ack regression", len(rep.Groups), rep.Regressions)
	}
	if base[1].Config["isr.shrink_events"] != 1 {
		t.Fatal("oneConfig modified its input")
	}
}
