package workloads

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/core/txn"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

// checkProducerRestart checks what a restart-producer fault of producer 0 must leave: the
// fault applied without error, the zombie's commit refused, its killed transaction counted
// aborted and none of its records visible to read_committed.
func checkProducerRestart(t *testing.T, res *results.Result) {
	t.Helper()
	if len(res.Faults) != 1 || res.Faults[0].Error != "" || !strings.Contains(res.Faults[0].Detail, "the zombie's commit was refused with") {
		t.Fatalf("faults %+v", res.Faults)
	}
	tx := res.Transactions
	zombie := int64(0)
	for k, v := range tx.Errors {
		if strings.HasPrefix(k, "ZOMBIE_END_TXN:") {
			zombie += v
		}
	}
	if zombie != 1 {
		t.Errorf("transaction errors %v: want one ZOMBIE_END_TXN", tx.Errors)
	}
	if tx.Verify.AbortedSeen != 0 || tx.Verify.Anomalies != 0 {
		t.Errorf("read_committed verdict %+v", tx.Verify)
	}
	t.Logf("fault: %s %s; transactions: committed %d aborted %d unknown %d; errors %v", res.Faults[0].Target, res.Faults[0].Detail, tx.Committed, tx.Aborted, tx.Unknown, tx.Errors)
}

// TestRunTransactionsProducerRestart: producer 0 killed in the middle of a transaction and
// restarted with the same transactional.id on the embedded cluster: the new instance's
// InitProducerId fences the zombie, whose commit is refused and whose open transaction is
// aborted; the read_committed read-back finds 0 anomalies and the producer goes on committing.
func TestRunTransactionsProducerRestart(t *testing.T) {
	skipShort(t)
	s := txnSpec(t, "duration=3s", "warmup=300ms", "producers.rate=400")
	s.Faults = []spec.Fault{{At: time.Second, Kind: "restart-producer", Target: "0"}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := runTxn(t, s, "embedded")
	if err != nil {
		t.Fatal(err)
	}
	checkTxnResult(t, res)
	checkProducerRestart(t, res)
	if res.Durability.Lost != 0 || !res.Durability.ReplicasIdentical {
		t.Errorf("durability %+v", res.Durability)
	}
}

// TestRunTransactionsProducerRestartKfake: the same fault against kfake (the harness's own
// producer restarts, whatever the target).
func TestRunTransactionsProducerRestartKfake(t *testing.T) {
	s := txnSpec(t, "duration=2s", "warmup=300ms", "producers.rate=400")
	s.Faults = []spec.Fault{{At: 500 * time.Millisecond, Kind: "restart-producer", Target: "0"}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := runTxn(t, s, newKfake(t))
	if err != nil {
		t.Fatal(err)
	}
	checkTxnResult(t, res)
	checkProducerRestart(t, res)
}

// TestRunTransactionsCoordinatorMove: producer 0's __transaction_state partition reassigned
// off its leader while the producers commit every 20 records (4 brokers, so a broker outside
// its 3 replicas takes the replica): leadership moves without a crash, the new coordinator
// loads the transactions from the log, and the read_committed read-back finds 0 anomalies.
func TestRunTransactionsCoordinatorMove(t *testing.T) {
	skipShort(t)
	s := txnSpec(t, "brokers=4", "duration=3s", "warmup=300ms", "producers.rate=400")
	coord := fmt.Sprintf("leader-of:%s-%d", spec.TxnStateTopic, txn.PartitionFor(spec.TransactionalID(s.Producers.Txn.ID, 0), int32(spec.TxnStatePartitions)))
	s.Faults = []spec.Fault{{At: 500 * time.Millisecond, Kind: "reassign", Target: coord, To: -1}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := runTxn(t, s, "embedded")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Faults) != 1 || res.Faults[0].Error != "" || !strings.Contains(res.Faults[0].Target, spec.TxnStateTopic) {
		t.Fatalf("faults %+v", res.Faults)
	}
	checkTxnResult(t, res)
	if res.Durability.Lost != 0 || !res.Durability.ReplicasIdentical {
		t.Errorf("durability %+v", res.Durability)
	}
	t.Logf("fault: %s (%s); transactions: committed %d aborted %d unknown %d; errors %v", res.Faults[0].Target, res.Faults[0].Detail, res.Transactions.Committed, res.Transactions.Aborted, res.Transactions.Unknown, res.Transactions.Errors)
}

// TestRunTransactionsKafkaTarget: the transactional workload through --target kafka:// against
// an embedded cluster's listeners (the path a real Kafka cluster takes: topic created by
// CreateTopics, offsets and the LSO listed over the wire), with producer 0 restarted
// mid-transaction: the LSO observer's lag, the read_committed consumers' e2e and the
// read_committed read-back are all there, with 0 anomalies.
func TestRunTransactionsKafkaTarget(t *testing.T) {
	skipShort(t)
	cfg := cluster.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Logf = func(string, ...any) {}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := txnSpec(t, "duration=2s", "warmup=300ms", "producers.rate=400")
	s.Faults = []spec.Fault{{At: 500 * time.Millisecond, Kind: "restart-producer", Target: "1"}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	tgt := "kafka://" + c.Bootstrap()
	res, err := runTxn(t, s, tgt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Target != tgt {
		t.Errorf("result target %q, want %q", res.Target, tgt)
	}
	checkTxnResult(t, res)
	if len(res.Faults) != 1 || res.Faults[0].Error != "" || !strings.Contains(res.Faults[0].Target, "transactional.id="+spec.TransactionalID(s.Producers.Txn.ID, 1)) {
		t.Fatalf("faults %+v", res.Faults)
	}
	if res.Durability.Lost != 0 {
		t.Errorf("durability %+v", res.Durability)
	}
	t.Logf("transactions: committed %d aborted %d; lso lag p99 %v µs; fault %s", res.Transactions.Committed, res.Transactions.Aborted, res.LSOLagUs.P99, res.Faults[0].Detail)
}
