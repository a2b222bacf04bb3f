package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/results"
)

// cliEnv makes the test binary act as the isrbench command (see TestMain), so the gate's
// interleaved mode can run "this build" and "another build" as subprocesses without a go build.
const cliEnv = "ISRBENCH_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		main() // exits
	}
	os.Exit(m.Run())
}

func TestGateUsage(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "plain")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"gate", "-w", "gate"}, "nothing to do"},
		{[]string{"gate", "--baseline", dir, "--binary", notExec}, "alternatives"},
		{[]string{"gate", "--baseline", dir, "--set-base", "acks=1"}, "--set-base needs an interleaved mode"},
		{[]string{"gate", "--binary", notExec, "--repeat", "3"}, "can never be significant at alpha=0.05"},
		{[]string{"gate", "--binary", notExec, "--repeat", "0"}, "--repeat 0"},
		{[]string{"gate", "--binary", notExec, "--metric", "p42-ack"}, `unknown metric "p42-ack"`},
		{[]string{"gate", "--binary", notExec, "--threshold", "p99-ack"}, "want metric=percent"},
		{[]string{"gate", "--binary", notExec, "--min-change", "lots"}, "not a percentage"},
		{[]string{"gate", "--binary", notExec, "--alpha", "2"}, "0 < alpha < 1"},
		{[]string{"gate", "--binary", notExec, "--set-new", "acks=7"}, "acks"},
		{[]string{"gate", "--baseline", filepath.Join(dir, "missing")}, "--baseline"},
		{[]string{"gate", "--baseline", dir}, "no result"},
		{[]string{"gate", "--binary", notExec, "--out", dir}, "not an executable file"},
		{[]string{"gate", "--binary", filepath.Join(dir, "missing"), "--out", dir}, "--binary"},
		{[]string{"gate", "--binary", notExec, "extra"}, "unexpected arguments"},
		{[]string{"gate", "--against", "no-such-revision-7f3e", "--out", dir}, "--against"},
		{[]string{"gate", "--against", "HEAD", "--binary", notExec}, "alternatives"},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := exitCode(run(context.Background(), tc.args, &out, &errb), &errb)
			if code != 2 || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d (want 2), stderr %q (want %q)", code, errb.String(), tc.want)
			}
		})
	}
}

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
	if err := writeBaseline(dir, []*results.Result{mk(100), mk(110)}); err != nil {
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

// TestGateEndToEnd runs the gate through the command line twice:
//  1. interleaved (--binary: this test binary acting as isrbench, on both sides) with the new
//     side slowed by isrbench.produce.delay: exit 1, naming p50-ack; --write-baseline records the
//     new side;
//  2. in-process against the first gate's base runs (same build, same settings): exit 0.
func TestGateEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 12 short embedded-cluster workloads")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(cliEnv, "1") // the subprocesses are this binary acting as isrbench
	out := t.TempDir()
	wb := filepath.Join(out, "written-baseline")
	// Short runs at a low rate (the race detector slows the subprocesses); only the stable
	// metrics, with a wide threshold, so same-vs-same cannot flake.
	// 5 runs a side: Mann-Whitney still finds the slowed side significant with one
	// overlapping pair, so one base run stalled by a loaded machine does not flake the test.
	common := []string{"-w", "gate", "--repeat", "5", "--duration", "1s", "--warmup", "300ms",
		"--set", "rate=400", "--set", "partitions=3", "--metric", "records/s,p50-ack",
		"--threshold", "p50-ack=100%", "--out", out}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var so, se bytes.Buffer
	args := append([]string{"gate", "--binary", self, "--set-new", "isrbench.produce.delay=30ms", "--write-baseline", wb}, common...)
	code := exitCode(run(ctx, args, &so, &se), &se)
	if code != 1 || !strings.Contains(se.String(), "gate: regression: p50-ack: +") {
		t.Fatalf("slowed build: exit %d (want 1 naming p50-ack)\nstdout:\n%s\nstderr:\n%s", code, so.String(), se.String())
	}
	t.Logf("slowed build:\n%s", so.String())
	if strings.Contains(se.String(), "regression: records/s") {
		t.Fatalf("records/s flagged although the open-loop rate is met:\n%s", se.String())
	}
	written, err := results.LoadResults(wb)
	if err != nil || len(written) != 5 {
		t.Fatalf("--write-baseline: %d results, %v", len(written), err)
	}
	for _, r := range written {
		if r.Config["isrbench.produce.delay"] != "30ms" || r.AckLatencyUs.Hdr != "" {
			t.Fatalf("written baseline is not the slowed side without hdr: delay %v, hdr %d bytes",
				r.Config["isrbench.produce.delay"], len(r.AckLatencyUs.Hdr))
		}
	}
	bases, _ := filepath.Glob(filepath.Join(out, "*-gate-gate", "base"))
	if len(bases) != 1 {
		t.Fatalf("base run dir: %v", bases)
	}
	gateDir := filepath.Dir(bases[0])
	if b, err := os.ReadFile(filepath.Join(gateDir, "report.html")); err != nil || !bytes.Contains(b, []byte("REGRESSION p50-ack")) {
		t.Fatalf("the gate's report.html does not show the regression: %v", err)
	}
	if _, err := os.Stat(filepath.Join(gateDir, "gate.json")); err != nil {
		t.Fatal(err)
	}

	so.Reset()
	se.Reset()
	args = append([]string{"gate", "--baseline", bases[0]}, common...)
	code = exitCode(run(ctx, args, &so, &se), &se)
	if code != 0 || !strings.Contains(se.String(), "gate: ok (5 base runs, 5 new runs)") {
		t.Fatalf("same vs same: exit %d (want 0)\nstdout:\n%s\nstderr:\n%s", code, so.String(), se.String())
	}
	t.Logf("same vs same:\n%s", so.String())
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
	rep, err := results.Compare(oneConfig(base), oneConfig(nw), results.CompareOptions{Metrics: []string{"p50-ack"}})
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
