package workloads

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/txn"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

// txnSpec is the transactions spec in a short form.
func txnSpec(t *testing.T, sets ...string) *spec.Spec {
	t.Helper()
	s, err := spec.Load("transactions")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"duration=1500ms", "warmup=300ms", "producers.rate=1000", "partitions=3", "transaction.records=20", "transaction.abort.ratio=0.25"}
	if err := s.ApplySets(append(base, sets...)); err != nil {
		t.Fatal(err)
	}
	return s
}

// runTxn runs s; the table and notes go to the test log on failure.
func runTxn(t *testing.T, s *spec.Spec, target string) (*results.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	var out strings.Builder
	res, err := Run(ctx, s, Options{Target: target, OutDir: t.TempDir(), Stdout: &out, Stderr: &out})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s output:\n%s", s.Name, out.String())
		}
	})
	if res == nil {
		t.Fatalf("%s: no result: %v", s.Name, err)
	}
	return res, err
}

// checkTxnResult checks what every transactional run must report: commits and aborts, the
// three histograms, a read_committed read-back without anomaly, and the files.
func checkTxnResult(t *testing.T, res *results.Result) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("notes: %v", res.Notes)
		}
	})
	tx := res.Transactions
	if tx == nil {
		t.Fatal("no transactions in the result")
	}
	if tx.Committed == 0 || tx.Aborted == 0 || tx.CommittedRecords == 0 {
		t.Errorf("transactions %+v: want commits and aborts (abort ratio 0.25)", tx)
	}
	v := tx.Verify
	if v.Anomalies != 0 || v.Error != "" || v.Whole != tx.Committed || v.Visible != tx.CommittedRecords || v.AbortedSeen != 0 {
		t.Errorf("read_committed verdict %+v of %+v", v, tx)
	}
	for name, s := range map[string]*results.Summary{"commit": res.CommitLatencyUs, "lso lag": res.LSOLagUs, "e2e read_committed": res.E2EReadCommittedUs} {
		if s == nil || s.Count == 0 || s.Hdr == "" {
			t.Errorf("%s histogram %+v", name, s)
		}
	}
	// A read_committed record arrives after its transaction's commit: its e2e is at least
	// the time its transaction took to fill, on average.
	if c, e := res.CommitLatencyUs, res.E2EReadCommittedUs; c != nil && e != nil && e.P50 < 1000 {
		t.Errorf("read_committed e2e p50 %v µs below a transaction's fill time (20 records at ~500/s per producer)", e.P50)
	}
	if res.E2ELatencyUs.Count != 0 {
		t.Errorf("e2e_latency_us has %d values; the consumers read read_committed", res.E2ELatencyUs.Count)
	}
	dir := filepath.Dir(res.Files.Timeline)
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"commit_latency_us", "lso_lag_us", "e2e_read_committed_us", "transactions"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("result.json lacks %s", k)
		}
	}
	bench, err := os.ReadFile(res.Files.Bench)
	if err != nil || !strings.Contains(string(bench), "p99-commit-µs") || !strings.Contains(string(bench), "p99-lsolag-µs") {
		t.Errorf("bench.txt: %v %s", err, bench)
	}
	if page, err := os.ReadFile(filepath.Join(dir, "report.html")); err != nil || !strings.Contains(string(page), "lso lag") || !strings.Contains(string(page), "e2e read_committed") {
		t.Errorf("report.html lacks the transactional histograms (%v)", err)
	}
	for _, f := range []string{"commit_latency.hgrm", "lso_lag.hgrm", "e2e_read_committed.hgrm"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestRunTransactionsKfake: the transactions spec against kfake (franz-go's fake cluster has
// transactions): the same workload code, the same checks.
func TestRunTransactionsKfake(t *testing.T) {
	res, err := runTxn(t, txnSpec(t), newKfake(t))
	if err != nil {
		t.Fatal(err)
	}
	checkTxnResult(t, res)
}

// TestRunTransactionsEmbedded: the transactions spec on the embedded cluster.
func TestRunTransactionsEmbedded(t *testing.T) {
	res, err := runTxn(t, txnSpec(t), "embedded")
	if err != nil {
		t.Fatal(err)
	}
	checkTxnResult(t, res)
	if res.Durability.Lost != 0 || !res.Durability.ReplicasIdentical {
		t.Errorf("durability %+v", res.Durability)
	}
}

// TestRunPipelineKfake: the exactly-once pipeline: one transformed record per input record.
func TestRunPipelineKfake(t *testing.T) {
	s := txnSpec(t, "pipeline.enabled=true", "transaction.abort.ratio=0")
	res, err := runTxn(t, s, newKfake(t))
	if err != nil {
		t.Fatal(err)
	}
	p := res.Transactions.Pipeline
	if p == nil || p.Error != "" || p.Inputs == 0 || p.Outputs != p.Inputs || p.Missing+p.Duplicated+p.Malformed != 0 || p.Committed == 0 {
		t.Fatalf("pipeline %+v", p)
	}
	if p.Inputs != res.Transactions.CommittedRecords {
		t.Errorf("pipeline inputs %d, committed records %d", p.Inputs, res.Transactions.CommittedRecords)
	}
}

// TestRunTransactionsLeaderKill: the leader of a partition killed in the middle of a
// transactional run with the pipeline; the read_committed read-back finds every committed
// transaction whole and no aborted record, and the pipeline's output one record per input.
func TestRunTransactionsLeaderKill(t *testing.T) {
	skipShort(t)
	s := txnSpec(t, "duration=4s", "warmup=500ms", "producers.rate=400", "replica.lag.time.max.ms=3000", "broker.session.timeout.ms=3000", "pipeline.enabled=true")
	s.Faults = []spec.Fault{{At: time.Second, Duration: time.Second, Kind: "kill-broker", Target: "leader-of:isrbench-0"}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := runTxn(t, s, "embedded")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Faults) != 1 || res.Faults[0].Error != "" {
		t.Fatalf("faults %+v", res.Faults)
	}
	checkTxnResult(t, res)
	if res.Durability.Lost != 0 {
		t.Errorf("durability %+v", res.Durability)
	}
	// A transaction whose EndTxn went unanswered in the failover (unknown outcome) may have
	// committed: its records are then inputs too.
	tx := res.Transactions
	maxInputs := tx.CommittedRecords + tx.Unknown*int64(s.Producers.Txn.Records)
	if p := tx.Pipeline; p == nil || p.Error != "" || p.Inputs < tx.CommittedRecords || p.Inputs > maxInputs || p.Outputs != p.Inputs || p.Anomalies() != 0 {
		t.Errorf("pipeline %+v; transactions %+v", p, tx)
	}
}

// TestRunTransactionsCoordinatorKill: the broker of producer 0's transaction coordinator
// (the leader of its __transaction_state partition) killed while the producers commit every
// 20 records: the coordinator moves, reloads the transactions from the log, and the
// read_committed read-back still finds every committed transaction whole, no aborted record.
func TestRunTransactionsCoordinatorKill(t *testing.T) {
	skipShort(t)
	s := txnSpec(t, "duration=4s", "warmup=500ms", "producers.rate=400", "replica.lag.time.max.ms=3000", "broker.session.timeout.ms=3000")
	coord := fmt.Sprintf("leader-of:%s-%d", spec.TxnStateTopic, txn.PartitionFor(spec.TransactionalID(s.Producers.Txn.ID, 0), int32(spec.TxnStatePartitions)))
	s.Faults = []spec.Fault{{At: time.Second, Duration: time.Second, Kind: "kill-broker", Target: coord}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := runTxn(t, s, "embedded")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Faults) != 1 || res.Faults[0].Error != "" {
		t.Fatalf("faults %+v", res.Faults)
	}
	checkTxnResult(t, res)
	t.Logf("transactions %+v (fault at %.1fs: %s)", *res.Transactions, res.Faults[0].AtS, res.Faults[0].Target)
}
