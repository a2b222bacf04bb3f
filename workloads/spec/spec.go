package spec

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/internal/sched"
)

// Spec is a workload: the cluster, the topic, broker properties under their Kafka names, the
// producers and consumers, the measurement window and a fault schedule.
//
// A Spec is a plain value: build it with Load/Parse (or DefaultSpec), adjust it with Set, check
// it with Validate. It is not safe for concurrent mutation; a validated Spec may be read from
// any goroutine.
type Spec struct {
	Name        string
	Description string
	// Target is where the workload runs (see CheckTarget): "embedded" (the default, the
	// replicating core in this process), "kfake" (franz-go's in-process fake cluster, a
	// reference without replication) or "kafka://host:port[,host:port]". --target sets it; as a
	// key it can be swept: --vary target=embedded,kfake runs the same load on both.
	Target string
	// Client holds the Kafka client properties of the spec's target block (security.protocol,
	// sasl.*, ssl.*: see client.go), by their Kafka names; --command-config adds a file's.
	// Only for a kafka:// target; nil: PLAINTEXT.
	Client map[string]string
	// HWLagClient is hw.lag.client: whether the harness measures the HW lag a client observes
	// (a Fetch parked at the HW on every leader, answered at every HW advance: it costs the
	// cluster a fetch round trip per advance). "auto" (default): on for kafka:// targets, whose
	// HW lag a client is the only one to see; off on the embedded target (the core measures
	// its HW lag itself) and on kfake (which has none), so that neither carries the extra load.
	HWLagClient string
	// SchedPolicy is sched.policy: the kernel scheduling policy the run sets on every thread of
	// its process (package internal/sched) before it starts the target: "batch" (default,
	// SCHED_BATCH: a woken thread does not preempt the running one), "other" (SCHED_OTHER) or
	// "inherit" (as the process was started, e.g. under chrt). It is the process's, so the
	// embedded cluster, kfake and the clients all run under it, and a sweep over targets
	// compares them under the same one.
	SchedPolicy string
	// Brokers is the size of the embedded cluster (ignored for kafka:// targets). Default 3.
	Brokers int
	Topic   TopicSpec
	// Settings are the broker settings of the spec's broker: block (and of --set), by their
	// registry names (core/config), checked by the registry when set: those given, the
	// harness's own defaults (HarnessDefaults), else Kafka's. The embedded target hands them
	// to the cluster unchanged (cluster.Config.UseSettings).
	Settings config.Settings
	// InterBrokerProtocol is security.inter.broker.protocol of the embedded cluster (PLAINTEXT,
	// SSL, SASL_PLAINTEXT, SASL_SSL; default PLAINTEXT): see package target.
	InterBrokerProtocol string
	// MinFreeDisk is isrbench.min.free.disk: the free-space floor of the data dir's
	// filesystem below which a run stops (see DiskFloor), default 2GiB.
	MinFreeDisk DiskFloor
	// Producers is the first producer group (the flat keys producers.* and their aliases set
	// it); MoreProducers are further groups, given in YAML as a list under producers:
	// (producers: [{count: 1, acks: all}, {count: 1, acks: 1}]). See ProducerGroups.
	Producers     ProducerSpec
	MoreProducers []ProducerSpec
	Consumers     ConsumerSpec
	// Pipeline is the exactly-once consume-transform-produce stage (pipeline.*, see txn.go).
	Pipeline PipelineSpec
	// Duration is the measurement window, after Warmup. Default 20s.
	Duration time.Duration
	// Warmup runs the full load before measurement; its samples are discarded. Default 5s.
	Warmup time.Duration
	// ProbeRecords is probe.records: before the load (and its warm-up), with the cluster
	// ready and idle, the harness produces this many records one at a time, each sent when
	// the previous one is acknowledged, with the first producer group's acks and message.size
	// (linger 0), after one untimed record to each partition (the first 100 at most), round
	// robin over those. Their ack p50 is the service time the load's ack p50 and p99
	// are reported against (result.json probe.queueing). 0 turns the probe off. Default 1000.
	// The records lie before the load's start offsets: consumers and the read-back skip them.
	ProbeRecords int
	// Faults is the fault schedule; each fault's At is relative to the start of measurement.
	Faults []Fault
	// ReassignThrottle is reassign.throttle: the replication throttle (bytes/s; 0 = none,
	// the default) of the reassign faults' catch-up, set as kafka-reassign-partitions.sh
	// --throttle sets it and cleared when the reassignment completes.
	ReassignThrottle int64
	// Sweep maps a flat key to the values `isrbench sweep` tries when no --vary is given.
	// SweepKeys keeps the keys in spec order.
	Sweep     map[string][]string
	SweepKeys []string

	// given holds the canonical keys set explicitly (in the YAML, by Set, by a sweep point):
	// on a kafka:// target only those broker settings are applied (see ConfigSession).
	given map[string]bool
}

// TargetName is Target, "embedded" when empty.
func (s *Spec) TargetName() string {
	if s.Target == "" {
		return "embedded"
	}
	return s.Target
}

// TopicSpec is the benchmark topic.
type TopicSpec struct {
	Name              string // topic.name, default "isrbench"
	Partitions        int    // topic.partitions (CreateTopics NumPartitions), default 6
	ReplicationFactor int    // topic.replication.factor, default 3, at most brokers
	MinInsyncReplicas int    // topic.min.insync.replicas (topic config min.insync.replicas), default 2
}

// DefaultGroupInitialRebalanceDelayMs is the harness default of group.initial.rebalance.delay.ms.
const DefaultGroupInitialRebalanceDelayMs = 100

// HarnessDefaults are the broker settings whose harness default is not Kafka's, by registry
// name: log.segment.bytes and log.retention.bytes keep a run's disk bounded (retention never
// deletes the active segment), log.retention.check.interval.ms lets retention keep up with a
// benchmark's write rate, group.initial.rebalance.delay.ms is short as the harness waits for
// its group anyway, and queued.max.request.bytes bounds the brokers' request memory (Kafka's
// -1 is unbounded). Every other setting's default is the registry's (Kafka's).
var HarnessDefaults = map[string]string{
	"log.segment.bytes":                strconv.FormatInt(DefaultLogSegmentBytes, 10),
	"log.retention.bytes":              strconv.FormatInt(DefaultLogRetentionBytes, 10),
	"log.retention.check.interval.ms":  "1000",
	"group.initial.rebalance.delay.ms": strconv.Itoa(DefaultGroupInitialRebalanceDelayMs),
	"queued.max.request.bytes":         "104857600",
}

// defaultSettings is the registry's defaults with HarnessDefaults given.
func defaultSettings() config.Settings {
	var s config.Settings
	for _, name := range slices.Sorted(maps.Keys(HarnessDefaults)) {
		if err := s.Set(name, HarnessDefaults[name]); err != nil {
			panic("BUG: spec: harness default " + err.Error())
		}
	}
	return s
}

// ProducerSpec describes the producers: Count kgo clients, each on its own goroutine.
type ProducerSpec struct {
	Count int // producers.count, default 2
	// Acks is "all", "1" or "0" (producers.acks / acks; "-1" is accepted as "all").
	Acks string
	// MessageSize is the record value size in bytes (>= MinMessageSize), default 1024.
	MessageSize int
	// Rate is the total target rate in records/s over all producers (split evenly);
	// 0 = closed loop, as fast as possible. Default 5000.
	Rate               float64
	LingerMs           int    // linger.ms, default 0
	BatchSize          int    // batch.size in bytes, default 16384
	Keys               string // none (round robin, no key) | uniform (random key) | fixed (one key)
	MaxBufferedRecords int    // producers.max.buffered.records: kgo MaxBufferedRecords, default 10000
	DeliveryTimeoutMs  int64  // delivery.timeout.ms: kgo RecordDeliveryTimeout, default 120000
	// RequestTimeoutMs is request.timeout.ms as a produce request carries it (kgo
	// ProduceRequestTimeout): how long the leader may hold an acks=all batch waiting for the
	// HW before it answers REQUEST_TIMED_OUT. Default 10000 (kgo's; Kafka's producer 30000).
	RequestTimeoutMs int
	// Retries is the producer's retries (kgo RecordRetries), default 2147483647 (retry until
	// delivery.timeout.ms, as Kafka's producer). 0 surfaces a retriable error such as
	// NOT_ENOUGH_REPLICAS at once instead of retrying it.
	Retries int
	// EnableIdempotence is enable.idempotence (default true); it applies to acks=all only
	// (with acks 1 or 0 the producers are never idempotent, as in Kafka).
	EnableIdempotence bool
	// Txn holds the transactional producer settings (producers.transactional.id, ...: see txn.go).
	Txn ProducerTxn
	// Pacer is producers.pacer, how the open-loop pacer waits for a record's slot (an
	// isrbench client setting, no Kafka one): timerfd (default: a periodic timer, one
	// read(2) per slot), timerfd-oneshot (armed again for every slot), spin or sleep; see
	// package load's Pacer.
	Pacer string
	// PacerDither is producers.pacer.dither (default true): every 64 slots, each producer's
	// schedule moves by a new random part of one interval (the rate unchanged), so that it
	// cannot stay in phase with the kernel's tick, at which CPU profiles take their samples
	// (package load's Pacer.Dither). false: slots exactly 1/rate apart.
	PacerDither bool
}

// ConsumerSpec describes the end-to-end consumers: Count kgo clients, each reading every
// partition from the leader (each sees every record), or, with GroupID set, Count members of
// one consumer group sharing the partitions (each record is read by one member).
type ConsumerSpec struct {
	Count int // consumers.count, default 1
	// GroupID is consumers.group.id (Kafka's group.id): "" = no group (default).
	GroupID string
	// GroupBalancer is consumers.group.balancer (partition.assignment.strategy): range,
	// roundrobin, sticky or cooperative-sticky; default range.
	GroupBalancer string
	// AutoCommitIntervalMs is consumers.auto.commit.interval.ms (auto.commit.interval.ms),
	// default 5000.
	AutoCommitIntervalMs int
	// IsolationLevel is consumers.isolation.level (Kafka's isolation.level): read_uncommitted
	// (default) or read_committed.
	IsolationLevel string
}

// Fault is one entry of the fault schedule.
type Fault struct {
	// At is when the fault starts, relative to the start of measurement.
	At time.Duration
	// Duration is how long it lasts before it is healed (resume, restart, link restored).
	// kill-broker and crash-broker with duration 0 stay down until a restart-broker fault
	// or the end of the measurement; restart-broker takes no duration.
	Duration time.Duration
	// Kind is one of FaultKinds (pause-broker, kill-broker, restart-broker, crash-broker,
	// slow-link, partition, exec, reassign, restart-producer); the short names pause, kill,
	// restart, crash are accepted.
	Kind string
	// Target names the broker(s), see ParseFaultTarget: a broker id,
	// leader-of:TOPIC-PARTITION, follower-of:TOPIC-PARTITION, any-follower, leader, follower;
	// for partition also two groups "0|1,2"; for restart-producer a producer number
	// (ParseProducerTarget). Default "leader".
	Target string
	// Partition of the benchmark topic that leader, follower and any-follower refer to; default 0.
	Partition int
	// Fence is how the controller learns of a kill-broker / crash-broker: "now" (default,
	// fenced at once, as after a controlled shutdown notice) or "session" (only when
	// broker.session.timeout.ms passes without a heartbeat, as for a real crash; a broker
	// restarted before that stays registered and in its ISRs).
	Fence string
	// Latency, Jitter and Bandwidth (bytes/s per connection and direction) shape a slow-link
	// fault on every replica link between the target and the other brokers, both directions.
	Latency, Jitter time.Duration
	Bandwidth       int64
	// Command, Undo and Timeout belong to kind exec (see package workloads, faultexec.go): Command runs through
	// sh -c at At, Undo (optional) at At+Duration, each killed after Timeout (default 60s).
	Command, Undo string
	Timeout       time.Duration
	// To and Add belong to kind reassign (faultreassign.go): every partition of the benchmark
	// topic with a replica on Target moves that replica onto broker To, or with Add keeps it
	// and gains a replica on To. To -1 (the YAML default) picks, per partition, the
	// lowest-id broker hosting none of its replicas.
	To  int32
	Add bool
}

// DefaultProbeRecords is the default of probe.records: about 0.1 s of an embedded RF 3
// cluster's time, and p50 and p99 of a thousand samples are steady.
const DefaultProbeRecords = 1000

// DefaultSpec returns a Spec with every field at its default (the values of specs/default.yaml
// before its own settings). A broker setting's default is the config registry's (Kafka's,
// core/config) unless the harness has its own (HarnessDefaults).
func DefaultSpec() *Spec {
	return &Spec{
		Name:                "default",
		HWLagClient:         "auto",
		SchedPolicy:         string(sched.Default),
		Brokers:             3,
		Topic:               TopicSpec{Name: "isrbench", Partitions: 6, ReplicationFactor: 3, MinInsyncReplicas: 2},
		Settings:            defaultSettings(),
		InterBrokerProtocol: "PLAINTEXT",
		MinFreeDisk:         DefaultMinFreeDisk,
		Producers: ProducerSpec{Count: 2, Acks: "all", MessageSize: 1024, Rate: 5000, BatchSize: 16384,
			Keys: "none", MaxBufferedRecords: 10000, DeliveryTimeoutMs: 120000, RequestTimeoutMs: 10000, EnableIdempotence: true, Retries: math.MaxInt32, Txn: DefaultProducerTxn, Pacer: "timerfd", PacerDither: true},
		Consumers: ConsumerSpec{Count: 1, GroupBalancer: "range", AutoCommitIntervalMs: 5000, IsolationLevel: ReadUncommitted},
		Pipeline:  DefaultPipeline,
		Duration:  20 * time.Second,
		Warmup:    5 * time.Second,

		ProbeRecords: DefaultProbeRecords,
	}
}

// Clone returns a deep copy.
func (s *Spec) Clone() *Spec {
	c := *s
	c.Faults = append([]Fault(nil), s.Faults...)
	c.MoreProducers = append([]ProducerSpec(nil), s.MoreProducers...)
	c.SweepKeys = append([]string(nil), s.SweepKeys...)
	c.Client = cloneClient(s.Client)
	if s.given != nil {
		c.given = make(map[string]bool, len(s.given))
		for k := range s.given {
			c.given[k] = true
		}
	}
	if s.Sweep != nil {
		c.Sweep = make(map[string][]string, len(s.Sweep))
		for k, v := range s.Sweep {
			c.Sweep[k] = append([]string(nil), v...)
		}
	}
	return &c
}

// MinMessageSize is the least producers.message.size: every record value starts with the
// 24-byte header the producers write (load.HeaderSize) to check durability and latency.
const MinMessageSize = 24

// PacerModes are the values of producers.pacer (package load's wait modes).
var PacerModes = []string{"timerfd", "timerfd-oneshot", "spin", "sleep"}

// ObservesHWLag reports whether hw.lag.client turns the client HW observer on for target.
func (s *Spec) ObservesHWLag(target string) bool {
	switch s.HWLagClient {
	case "on":
		return true
	case "off":
		return false
	}
	return strings.HasPrefix(target, "kafka://")
}
