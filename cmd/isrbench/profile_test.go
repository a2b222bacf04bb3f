package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/results"
)

// TestWarnCoverage: profile top and folded warn when the run that wrote cpu.pprof found the
// profile holding less than half of its CPU time, and say nothing otherwise.
func TestWarnCoverage(t *testing.T) {
	run := t.TempDir()
	prof := filepath.Join(run, "profiles", "cpu.pprof")
	if err := os.MkdirAll(filepath.Dir(prof), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prof, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(coverage float64) {
		t.Helper()
		r := &results.Result{Schema: results.SchemaVersion, ID: "r1", Name: "default", Target: "embedded",
			Cost: &results.Cost{Scope: results.CostScopeProcess, Records: 10, CPUSplitSource: "profiles/cpu.pprof", CPUProfileCoverage: coverage}}
		if err := results.WriteResult(filepath.Join(run, results.ResultFileName), r); err != nil {
			t.Fatal(err)
		}
	}
	var errb bytes.Buffer
	warnCoverage(&errb, "profile top", prof) // no result.json yet
	write(0.9)
	warnCoverage(&errb, "profile top", prof)
	if errb.Len() != 0 {
		t.Fatalf("warned without reason: %q", errb.String())
	}
	write(0.04)
	warnCoverage(&errb, "profile folded", prof)
	if got := errb.String(); !strings.Contains(got, "profile folded: warning:") || !strings.Contains(got, "holds 4% of the CPU time") {
		t.Fatalf("warning %q", got)
	}
}
