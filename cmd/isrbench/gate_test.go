package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
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
		{[]string{"gate", "--binary", notExec, "--alpha", "lots"}, `--alpha "lots"`},
		{[]string{"gate", "--binary", notExec, "--alpha", "cpu/rek=0.05"}, `unknown metric "cpu/rek"`},
		{[]string{"gate", "--binary", notExec, "--alpha", "cpu/req=0"}, "want 0 < alpha < 1"},
		{[]string{"gate", "--binary", notExec, "--order", "sideways"}, "allowed alternate"},
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

// TestGateEndToEnd runs the gate through the command line twice, each side this test binary
// acting as isrbench (--binary), interleaved:
//  1. the new side costs 2 ms more CPU per produce request (isrbench.produce.spin): exit 1,
//     naming cpu/req; --write-baseline records the new side;
//  2. identical builds and settings: exit 0.
func TestGateEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 20 short embedded-cluster workloads")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(cliEnv, "1") // the subprocesses are this binary acting as isrbench
	out := t.TempDir()
	wb := filepath.Join(out, "written-baseline")
	// Short runs at a low rate (the race detector slows the subprocesses); only the stable
	// metrics, with wide thresholds, so same-vs-same cannot flake. 5 runs a side: Mann-Whitney
	// still finds the costlier side significant with one overlapping pair, so one run stalled by
	// a loaded machine does not flake the test. The cost metrics are per request: a slower produce
	// path lets the producers batch more records per request, which moves the per-record figures
	// by as much as the spin on a loaded machine, in either direction.
	common := []string{"-w", "gate", "--repeat", "5", "--duration", "1s", "--warmup", "300ms",
		"--set", "rate=200", "--set", "partitions=3", "--set", "consumers.count=0", "--metric", "records/s,cpu/req,allocs/req,syscalls/req",
		"--threshold", "cpu/req=25%", "--threshold", "allocs/req=50%", "--threshold", "syscalls/req=50%", "--out", out}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	gate := func(args ...string) (code int, stdout, stderr string) {
		var so, se bytes.Buffer
		code = exitCode(run(ctx, append(append([]string{"gate"}, args...), common...), &so, &se), &se)
		return code, so.String(), se.String()
	}

	code, so, se := gate("--binary", self, "--set-new", "isrbench.produce.spin=2ms", "--write-baseline", wb)
	if code != 1 || !strings.Contains(se, "gate: regression: cpu/req: +") {
		t.Fatalf("costlier build: exit %d (want 1 naming cpu/req)\nstdout:\n%s\nstderr:\n%s", code, so, se)
	}
	t.Logf("costlier build:\n%s", so)
	if strings.Contains(se, "regression: records/s") || !strings.Contains(so, "spread b / n") {
		t.Fatalf("records/s flagged although the open-loop rate is met, or no spread column:\n%s\n%s", so, se)
	}
	written, err := results.LoadResults(wb)
	if err != nil || len(written) != 5 {
		t.Fatalf("--write-baseline: %d results, %v", len(written), err)
	}
	for _, r := range written {
		if r.Config["isrbench.produce.spin"] != "2ms" || r.AckLatencyUs.Hdr != "" || r.Cost == nil {
			t.Fatalf("written baseline is not the costlier side without hdr: spin %v, hdr %d bytes, cost %v",
				r.Config["isrbench.produce.spin"], len(r.AckLatencyUs.Hdr), r.Cost)
		}
	}
	gates, _ := filepath.Glob(filepath.Join(out, "*-gate-gate"))
	if len(gates) != 1 {
		t.Fatalf("gate dirs: %v", gates)
	}
	if b, err := os.ReadFile(filepath.Join(gates[0], "report.html")); err != nil || !bytes.Contains(b, []byte("REGRESSION cpu/req")) {
		t.Fatalf("the gate's report.html does not show the regression: %v", err)
	}
	if _, err := os.Stat(filepath.Join(gates[0], "gate.json")); err != nil {
		t.Fatal(err)
	}

	// Identical builds at alpha 0.01 (with 5 runs a side only fully separated samples reach it)
	// in a balanced random order: a loaded machine once moved allocs/req by +70% at p=0.032
	// between identical builds (retries and reconnects when a 1 s run stalls).
	code, so, se = gate("--binary", self, "--alpha", "0.01", "--order", "random")
	if code != 0 || !strings.Contains(se, "gate: ok (5 base runs, 5 new runs)") {
		t.Fatalf("identical builds: exit %d (want 0)\nstdout:\n%s\nstderr:\n%s", code, so, se)
	}
	t.Logf("identical builds:\n%s", so)
}

// TestGateCostlierBuild: two builds of isrbench that differ only in their code, the second
// spending 2 ms more CPU per produced record (core/broker.buildSpinFlag set at link time; their
// settings are the same), gated as a pull request would be: the costlier build runs
// "gate --binary BASE" and exits 1 naming a cost metric; the base build gated against itself
// exits 0.
func TestGateCostlierBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds isrbench twice and runs 20 short embedded-cluster workloads")
	}
	base := buildIsrbench(t)
	costly := filepath.Join(t.TempDir(), "isrbench-costly")
	cmd := exec.Command("go", "build", "-o", costly, "-ldflags", "-X github.com/isrbench/isrbench/core/broker.buildSpinFlag=2ms", "github.com/isrbench/isrbench/cmd/isrbench")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := t.TempDir()
	// As TestGateEndToEnd: short low-rate runs, the steady metrics with wide thresholds.
	common := []string{"-w", "gate", "--repeat", "5", "--duration", "1s", "--warmup", "300ms",
		"--set", "rate=200", "--set", "partitions=3", "--set", "consumers.count=0", "--metric", "records/s,local/rec,cpu/req,allocs/req,syscalls/req",
		"--threshold", "local/rec=25%", "--threshold", "cpu/req=25%", "--threshold", "allocs/req=50%", "--threshold", "syscalls/req=50%", "--out", out}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	gate := func(bin string) (code int, stdout, stderr string) {
		var so, se bytes.Buffer
		c := exec.CommandContext(ctx, bin, append([]string{"gate", "--binary", base}, common...)...)
		c.Stdout, c.Stderr = &so, &se
		err := c.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			code = ee.ExitCode()
		default:
			t.Fatalf("%s gate: %v", bin, err)
		}
		return code, so.String(), se.String()
	}
	code, so, se := gate(costly)
	if code != 1 || !strings.Contains(se, "gate: regression: local/rec: +") || strings.Contains(se, "differ in configuration") {
		t.Fatalf("costlier build: exit %d (want 1 naming local/rec, the settings the same)\nstdout:\n%s\nstderr:\n%s", code, so, se)
	}
	t.Logf("costlier build:\n%s", so)
	code, so, se = gate(base)
	if code != 0 {
		t.Fatalf("the base build against itself: exit %d (want 0)\nstdout:\n%s\nstderr:\n%s", code, so, se)
	}
}
