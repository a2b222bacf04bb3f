package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/config"
)

// Transactions in a workload (KIP-98): transactional producers, read_committed consumers and
// an exactly-once consume-transform-produce pipeline. The keys are Kafka's names:
//
//	producers: {transactional.id: isrbench-txn, transaction.records: 100, transaction.abort.ratio: 0.1}
//	consumers: {isolation.level: read_committed}
//	pipeline:  {enabled: true, output.topic: isrbench-out}

// TxnStateTopic is Kafka's internal topic of transaction state: the leader of its partition
// for a transactional id (core/txn's PartitionFor) is the id's coordinator, which a fault can
// target (leader-of:__transaction_state-N). TxnStatePartitions is its partition count, the embedded
// cluster's transaction.state.log.num.partitions (Kafka's default, 50).
const TxnStateTopic = "__transaction_state"

// TxnStatePartitions is the partition count of TxnStateTopic.
var TxnStatePartitions = int(config.DefaultOf("transaction.state.log.num.partitions"))

// Isolation levels of consumers.isolation.level (Kafka's isolation.level values).
const (
	ReadUncommitted = "read_uncommitted"
	ReadCommitted   = "read_committed"
)

// ProducerTxn is the transactional part of a producer group. With ID empty the producers are
// not transactional and the other fields are unused.
type ProducerTxn struct {
	// ID is producers.transactional.id: a prefix; producer n of the spec (counted over every
	// group, from 0) uses transactional.id ID-n, so that no two producers fence each other.
	// Empty (default): not transactional. Kafka requires acks=all and enable.idempotence=true.
	ID string
	// Records is producers.transaction.records: records per transaction (each producer sends
	// this many records, then commits or aborts), default 100.
	Records int
	// AbortRatio is producers.transaction.abort.ratio: the fraction of transactions aborted
	// instead of committed (0..1, default 0). Which ones is deterministic: transaction k of
	// transactional id T is aborted when a hash of (T, k) falls below the ratio, so that every
	// run of a spec aborts the same transactions.
	AbortRatio float64
	// TimeoutMs is producers.transaction.timeout.ms (Kafka's transaction.timeout.ms): the
	// coordinator aborts a transaction open longer than this, default 60000.
	TimeoutMs int
}

// DefaultProducerTxn are the defaults of a producer group's transactional settings.
var DefaultProducerTxn = ProducerTxn{Records: 100, TimeoutMs: 60000}

// PipelineSpec is the exactly-once pipeline: Count members of one consumer group read the
// benchmark topic read_committed, transform every record and write it to OutputTopic, each
// batch in one transaction that also commits the group's offsets (franz-go's
// GroupTransactSession, Kafka Streams' exactly_once_v2).
type PipelineSpec struct {
	Enabled bool // pipeline.enabled, default false
	// OutputTopic is pipeline.output.topic: the topic the transformed records go to (created
	// like the benchmark topic), default "<topic.name>-out".
	OutputTopic string
	// Count is pipeline.count: pipeline members (one transactional id and one group member
	// each), default 1.
	Count int
	// GroupID is pipeline.group.id, default "isrbench-pipeline"; TxnID is
	// pipeline.transactional.id, a prefix as producers.transactional.id, default
	// "isrbench-pipeline".
	GroupID, TxnID string
	// MaxPollRecords is pipeline.max.poll.records (Kafka's max.poll.records): the most input
	// records one transaction carries, default 500.
	MaxPollRecords int
}

// DefaultPipeline are the pipeline's defaults (off).
var DefaultPipeline = PipelineSpec{Count: 1, GroupID: "isrbench-pipeline", TxnID: "isrbench-pipeline", MaxPollRecords: 500}

// OutputTopicName is pipeline.output.topic, or its default "<topic.name>-out".
func (s *Spec) OutputTopicName() string {
	if s.Pipeline.OutputTopic != "" {
		return s.Pipeline.OutputTopic
	}
	return s.Topic.Name + "-out"
}

// Transactional reports whether the workload uses transactions: a transactional producer
// group or the pipeline.
func (s *Spec) Transactional() bool {
	if s.Pipeline.Enabled {
		return true
	}
	for _, g := range s.ProducerGroups() {
		if g.Count > 0 && g.Txn.ID != "" {
			return true
		}
	}
	return false
}

// TransactionalID is the transactional.id of producer n (counted over every group from 0)
// under prefix.
func TransactionalID(prefix string, n int) string { return prefix + "-" + strconv.Itoa(n) }

// validateTxn checks what Kafka's producer checks at construction (a transactional.id needs
// acks=all and idempotence) and the pipeline's topics.
func (s *Spec) validateTxn() error {
	for i, g := range s.ProducerGroups() {
		name := "producers"
		if len(s.MoreProducers) > 0 {
			name = fmt.Sprintf("producers[%d]", i)
		}
		if g.Txn.ID == "" {
			if g.Txn.AbortRatio > 0 {
				return fmt.Errorf("%s.transaction.abort.ratio: %g needs %s.transactional.id (the producers are not transactional)", name, g.Txn.AbortRatio, name)
			}
			continue
		}
		if g.Acks != "all" {
			return fmt.Errorf("%s.transactional.id: %q needs acks=all, as Kafka's producer requires (\"Must set acks to all in order to use the transactional producer\"); got %s.acks=%s", name, g.Txn.ID, name, g.Acks)
		}
		if !g.EnableIdempotence {
			return fmt.Errorf("%s.transactional.id: %q needs enable.idempotence=true, as Kafka's producer requires (\"Cannot set a transactional.id without also enabling idempotence\"); got %s.enable.idempotence=false", name, g.Txn.ID, name)
		}
	}
	if s.Pipeline.Enabled && s.OutputTopicName() == s.Topic.Name {
		return fmt.Errorf("pipeline.output.topic: %q is the benchmark topic; allowed another topic (default %s-out)", s.Pipeline.OutputTopic, s.Topic.Name)
	}
	return nil
}

// txnIDP is a transactional.id or group.id prefix: at most 200 characters without spaces,
// tabs or newlines (the producer number is appended).
func txnIDP(key string, aliases []string, help string, empty bool, f func(*Spec) *string) Param {
	return Param{Key: key, Aliases: aliases, Help: help,
		set: func(s *Spec, v string) error {
			if strings.ContainsAny(v, " \t\n\r") || len(v) > 200 || (v == "" && !empty) {
				allowed := "a non-empty id"
				if empty {
					allowed = "an id (empty = off)"
				}
				return fmt.Errorf("%s: %q; allowed %s of at most 200 characters without spaces, tabs or newlines", key, v, allowed)
			}
			*f(s) = v
			return nil
		},
		get: func(s *Spec) any { return *f(s) }}
}

// txnParams are the flat keys of this file, appended to params (after the other producer and
// consumer keys in KeyHelp).
var txnParams = []Param{
	txnIDP("producers.transactional.id", []string{"transactional.id"}, "transactional.id prefix: producer n uses <prefix>-n and sends its records in transactions (needs acks=all and enable.idempotence=true); empty = not transactional (default)", true,
		func(s *Spec) *string { return &s.Producers.Txn.ID }),
	intP("producers.transaction.records", []string{"transaction.records"}, 1, 1000000, "records per transaction of a transactional producer, default 100", func(s *Spec) *int { return &s.Producers.Txn.Records }),
	{Key: "producers.transaction.abort.ratio", Aliases: []string{"transaction.abort.ratio"}, Help: "fraction of the transactions aborted instead of committed, the same ones in every run, default 0 (0..1)",
		set: func(s *Spec, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsNaN(f) {
				return fmt.Errorf("producers.transaction.abort.ratio: %q is not a number; allowed 0..1", v)
			}
			if f < 0 || f > 1 {
				return fmt.Errorf("producers.transaction.abort.ratio: %g is out of range; allowed 0..1", f)
			}
			s.Producers.Txn.AbortRatio = f
			return nil
		}, get: func(s *Spec) any { return s.Producers.Txn.AbortRatio }},
	intP("producers.transaction.timeout.ms", []string{"transaction.timeout.ms"}, 1, 900000, "transaction.timeout.ms of the transactional producers (at most the brokers' transaction.max.timeout.ms, default 900000), default 60000", func(s *Spec) *int { return &s.Producers.Txn.TimeoutMs }),
	enumP("consumers.isolation.level", []string{"isolation.level"}, []string{ReadUncommitted, ReadCommitted}, "what the consumers read: read_uncommitted (up to the HW) or read_committed (up to the LSO, no aborted records; their latency is e2e_read_committed_us); default read_uncommitted", func(s *Spec) *string { return &s.Consumers.IsolationLevel }),
	boolP("pipeline.enabled", nil, "run the exactly-once pipeline: consume the topic read_committed, transform, produce to pipeline.output.topic and commit the offsets in the same transaction; default false", func(s *Spec) *bool { return &s.Pipeline.Enabled }),
	{Key: "pipeline.output.topic", Help: "the pipeline's output topic, default <topic.name>-out ([a-zA-Z0-9._-], 1..249 chars)",
		set: func(s *Spec, v string) error {
			if v != "" && !validTopic(v) {
				return fmt.Errorf("pipeline.output.topic: %q; allowed 1..249 characters of [a-zA-Z0-9._-], not . or .. (empty: <topic.name>-out)", v)
			}
			s.Pipeline.OutputTopic = v
			return nil
		}, get: func(s *Spec) any { return s.OutputTopicName() }},
	intP("pipeline.count", nil, 1, 64, "pipeline members (group members with a transactional id each), default 1", func(s *Spec) *int { return &s.Pipeline.Count }),
	txnIDP("pipeline.group.id", nil, "the pipeline's consumer group, default isrbench-pipeline", false, func(s *Spec) *string { return &s.Pipeline.GroupID }),
	txnIDP("pipeline.transactional.id", nil, "transactional.id prefix of the pipeline members (<prefix>-n), default isrbench-pipeline", false, func(s *Spec) *string { return &s.Pipeline.TxnID }),
	intP("pipeline.max.poll.records", nil, 1, 100000, "the most input records one pipeline transaction carries (max.poll.records), default 500", func(s *Spec) *int { return &s.Pipeline.MaxPollRecords }),
}

func init() {
	params = append(params, txnParams...)
	sections["pipeline"] = true
}
