package workloads

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/isrbench/isrbench/workloads/spec"
)

func TestSweepInterleavedAgainstKfake(t *testing.T) {
	target := newKfake(t)
	s := shortSpec(t, "duration=300ms", "warmup=0s", "rate=500")
	axes, err := spec.ParseVary([]string{"num.replica.fetchers=1,2"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := Sweep(ctx, s, axes, 2, Options{Target: target, OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 4 || len(out.Index.Runs) != 4 || out.Failed != 0 {
		t.Fatalf("%d results, %d runs, %d failed; want 4, 4, 0", len(out.Results), len(out.Index.Runs), out.Failed)
	}
	// Interleaved: A B A B.
	var order []any
	for _, r := range out.Results {
		order = append(order, r.Config["num.replica.fetchers"])
	}
	if order[0] != int64(1) || order[1] != int64(2) || order[2] != int64(1) || order[3] != int64(2) {
		t.Fatalf("run order %v, want [1 2 1 2]", order)
	}
	b, err := os.ReadFile(filepath.Join(out.Dir, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx SweepIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	for _, r := range idx.Runs {
		if _, err := os.Stat(r.Result); err != nil || r.Error != "" {
			t.Errorf("run %+v: %v", r, err)
		}
	}
	if idx.Runs[3].Repeat != 2 || idx.Runs[3].Settings["num.replica.fetchers"] != "2" {
		t.Errorf("last run %+v", idx.Runs[3])
	}
}

func TestSweepFailingPointGoesOn(t *testing.T) {
	// A target nobody listens on: every run fails, the sweep records each failure and goes on.
	s := shortSpec(t, "duration=200ms", "warmup=0s")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	out, err := Sweep(ctx, s, []spec.Axis{{Key: "producers.acks", Values: []string{"all", "1"}}}, 1,
		Options{Target: "kafka://127.0.0.1:1", OutDir: dir, Quiet: true})
	if err == nil || out == nil || out.Failed != 2 || len(out.Index.Runs) != 2 {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	for _, r := range out.Index.Runs {
		if r.Error == "" {
			t.Errorf("run %+v has no error", r)
		}
		if r.Dir != "" || r.Result != "" {
			t.Errorf("run %+v names a run dir, but it failed before it measured anything", r)
		}
	}
	// Nor is an empty run dir left behind: only the sweep's dir and its sweep.json.
	left, _ := filepath.Glob(filepath.Join(dir, "*", "p*"))
	if len(left) > 0 {
		t.Errorf("failed runs left %v behind", left)
	}
}

// TestSweepNilStderr: Options.Stderr nil means discard (as for Run), also when not Quiet.
func TestSweepNilStderr(t *testing.T) {
	s := shortSpec(t, "duration=200ms", "warmup=0s")
	out, err := Sweep(context.Background(), s, nil, 1, Options{Target: "bogus", OutDir: t.TempDir()})
	if err == nil || out == nil || out.Failed != 1 {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
}
