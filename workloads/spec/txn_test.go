package spec

import (
	"strings"
	"testing"
)

func TestTransactionsSpec(t *testing.T) {
	s, err := Load("transactions")
	if err != nil {
		t.Fatal(err)
	}
	if g := s.Producers.Txn; g.ID != "isrbench-txn" || g.Records != 100 || g.AbortRatio != 0.1 || g.TimeoutMs != 60000 {
		t.Fatalf("producers' transactional settings %+v", g)
	}
	if s.Consumers.IsolationLevel != ReadCommitted || !s.Transactional() {
		t.Fatalf("isolation %q, transactional %v", s.Consumers.IsolationLevel, s.Transactional())
	}
	cfg := s.Config()
	if cfg["producers.transactional.id"] != "isrbench-txn" || cfg["consumers.isolation.level"] != ReadCommitted || cfg["producers.transaction.abort.ratio"] != 0.1 {
		t.Fatalf("config %v", cfg)
	}
	if d := DefaultSpec(); d.Transactional() || d.Consumers.IsolationLevel != ReadUncommitted || d.Producers.Txn.Records != 100 {
		t.Fatalf("default spec: transactional %v, %+v, %q", d.Transactional(), d.Producers.Txn, d.Consumers.IsolationLevel)
	}
	if got := TransactionalID("isrbench-txn", 1); got != "isrbench-txn-1" {
		t.Fatalf("TransactionalID = %q", got)
	}
}

func TestTransactionalSettingsRefused(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"transaction.abort.ratio=1.5"}, "producers.transaction.abort.ratio: 1.5 is out of range; allowed 0..1"},
		{[]string{"transaction.abort.ratio=-0.1"}, "allowed 0..1"},
		{[]string{"transaction.abort.ratio=NaN"}, "is not a number"},
		{[]string{"transactional.id=t", "transaction.records=0"}, "producers.transaction.records: 0 is out of range; allowed 1..1000000"},
		{[]string{"transactional.id=t", "acks=1"}, `producers.transactional.id: "t" needs acks=all`},
		{[]string{"transactional.id=t", "enable.idempotence=false"}, "needs enable.idempotence=true"},
		{[]string{"transaction.abort.ratio=0.5"}, "needs producers.transactional.id"},
		{[]string{"isolation.level=read_dirty"}, `consumers.isolation.level: "read_dirty" is not allowed; allowed read_uncommitted|read_committed`},
		{[]string{"transactional.id=a b"}, "without spaces"},
		{[]string{"pipeline.enabled=true", "pipeline.output.topic=isrbench"}, "is the benchmark topic"},
		{[]string{"pipeline.output.topic=a/b"}, "pipeline.output.topic"},
		{[]string{"transaction.timeout.ms=900001"}, "allowed 1..900000"},
	} {
		s := DefaultSpec()
		err := s.ApplySets(tc.sets)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.sets, err, tc.want)
		}
	}
}

func TestTransactionalYAML(t *testing.T) {
	s, err := Parse([]byte(`name: t
producers: [{count: 1, transactional.id: a, transaction.records: 5}, {count: 1, acks: "1"}]
consumers: {isolation.level: read_committed}
pipeline: {enabled: true, output.topic: out, count: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Producers.Txn.ID != "a" || s.Producers.Txn.Records != 5 || s.MoreProducers[0].Txn.ID != "" {
		t.Fatalf("groups %+v %+v", s.Producers.Txn, s.MoreProducers[0].Txn)
	}
	if !s.Pipeline.Enabled || s.OutputTopicName() != "out" || s.Pipeline.Count != 2 {
		t.Fatalf("pipeline %+v", s.Pipeline)
	}
	_, err = Parse([]byte("name: t\nproducers: [{count: 1}, {count: 1, acks: \"1\", transactional.id: b}]\n"))
	if err == nil || !strings.Contains(err.Error(), "producers[1].transactional.id") {
		t.Fatalf("a transactional acks=1 group: %v", err)
	}
	_, err = Parse([]byte("name: t\npipeline: {enable: true}\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown key "pipeline.enable"`) {
		t.Fatalf("unknown pipeline key: %v", err)
	}
}

// TestTxnStatePartition: a fault may target the coordinator's broker, a partition of
// __transaction_state (core/txn's TestPartitionForMatchesKafka checks which one an id has).
func TestTxnStatePartition(t *testing.T) {
	s := DefaultSpec()
	s.Faults = []Fault{{At: 0, Duration: 0, Kind: "kill-broker", Target: "leader-of:__transaction_state-24"}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	s.Faults[0].Target = "leader-of:__transaction_state-50"
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "has 50 partitions") {
		t.Fatalf("partition 50 of __transaction_state: %v", err)
	}
}
