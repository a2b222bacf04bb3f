package gate

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/results"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// fakeRunEnv makes the test binary act as "isrbench run" (see TestMain): it writes a result.json
// into --out whose ack p50 and CPU per record come from --set p50=V and --set cpu=V, appends
// "--set side=X" to the file named by fakeLogEnv, and fails when --set fail=1.
const (
	fakeRunEnv = "ISRBENCH_GATE_FAKE_RUN"
	fakeLogEnv = "ISRBENCH_GATE_FAKE_LOG"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeRunEnv) == "1" {
		if err := fakeRun(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "fake run:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fakeRun(args []string) error {
	if len(args) == 0 || args[0] != "run" {
		return fmt.Errorf("want run, got %q", args)
	}
	var out string
	sets := map[string]string{}
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "--out":
			i++
			out = args[i]
		case "--set":
			i++
			k, v, _ := strings.Cut(args[i], "=")
			sets[k] = v
		}
	}
	if sets["fail"] == "1" {
		return fmt.Errorf("line one\nline two\nthe run failed on purpose")
	}
	if p := os.Getenv(fakeLogEnv); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintln(f, sets["side"])
		f.Close()
	}
	p50, _ := strconv.ParseFloat(sets["p50"], 64)
	cpu, _ := strconv.ParseFloat(sets["cpu"], 64)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	d, err := os.MkdirTemp(out, "run-")
	if err != nil {
		return err
	}
	r := result(p50, cpu)
	r.Config["side"] = sets["side"]
	return results.WriteResult(filepath.Join(d, results.ResultFileName), r)
}

// result is a gate-like run with the given ack p50 (µs) and CPU per record (µs; no cost when 0).
func result(p50, cpu float64) *results.Result {
	r := &results.Result{Schema: results.SchemaVersion, Name: "gate", DurationS: 3,
		Config:       map[string]any{"producers.acks": "all", "partitions": 6},
		Produced:     results.Produced{Records: 9000, Bytes: 9216000, RecordsPerSec: 3000, MBPerSec: 3.072},
		AckLatencyUs: results.Summary{Count: 9000, P50: p50, P99: 4 * p50, P999: 8 * p50}}
	if cpu > 0 {
		r.Cost = &results.Cost{Scope: results.CostScopeProcess, Records: 9000, WindowS: 3, CPUUsPerRecord: cpu,
			AllocsPerRecord: 110, SyscallsPerRecord: map[string]float64{"total": 28}}
	}
	return r
}
