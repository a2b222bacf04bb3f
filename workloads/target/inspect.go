package target

import (
	"context"

	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/workloads/spec"
)

// Inspector is the one optional capability of a Target beyond the Target interface: what a
// run can read of the cluster, or do to it, besides driving clients at it. Inspect returns
// the parts the target has; a part it lacks is nil (DataDir ""). The embedded cluster has
// every part, a kafka:// cluster the partition sampling and the exec fault targets. The runner
// calls Inspect once, after OpenTarget, and the parts from its own goroutines (see each).
type Inspector interface {
	Inspect() Inspection
}

// Inspection is the optional parts of a Target (see Inspector).
type Inspection struct {
	// DataDir is the cluster's local data dir, whose filesystem the disk guard watches.
	DataDir string
	// Partitions samples every partition (partitions.csv; settle waits for committed logs).
	Partitions PartitionSampler
	// Replication tells whether every follower of a new topic fetches (setup waits for it).
	Replication ReplicationReadier
	// Retention runs log retention now (before the read-back).
	Retention retentionApplier
	// Healer undoes every fault still active at the end of the measurement.
	Healer healer
	// LogDirs reports a broker whose log directory went offline (the load stops).
	LogDirs OfflineLogDirs
	// Replicas reads the replica logs directly (the replica-log comparison).
	Replicas ReplicaReader
	// Exec resolves an exec fault's target to a broker and its address.
	Exec execResolver
	// Groups reads the group coordinator's rebalance counters.
	Groups GroupStatser
}

// Inspect returns t's optional parts: none when t is not an Inspector.
func Inspect(t Target) Inspection {
	if in, ok := t.(Inspector); ok {
		return in.Inspect()
	}
	return Inspection{}
}

// PartitionSampler reports the replication state of every partition of a topic; the
// partition timeline calls it from its goroutine.
type PartitionSampler interface {
	SamplePartitions(topic string) ([]PartitionSample, error)
}

// ReplicationReadier tells whether every follower of the topic is fetching: "" when ready,
// else what is not.
type ReplicationReadier interface{ ReplicationReady(topic string) string }

// retentionApplier runs log retention on demand.
type retentionApplier interface{ ApplyRetention() }

// healer undoes every fault still active; it returns the brokers it restarted.
type healer interface {
	HealAll() (restarted []int32, err error)
}

// OfflineLogDirs reports the first running broker whose log directory went offline, or ok
// false; the storage watch calls it from its goroutine.
type OfflineLogDirs interface {
	OfflineLogDir() (broker int32, err error, ok bool)
}

// ReplicaReader reads replica logs directly, for the replica-log comparison after the run
// (the bytes of every replica are compared over the wire by internal/replicaverify).
type ReplicaReader interface {
	// PartitionReplicas returns the partition's leader (-1 if none), HW (exclusive) and
	// running replicas.
	PartitionReplicas(topic string, p int32) (leader int32, hw int64, replicas []int32, err error)
	// ReadReplica calls fn for every record in [from, to) (from inclusive, to exclusive) of
	// broker id's replica log, in offset order.
	ReadReplica(topic string, p int32, id int32, from, to int64, fn func(offset int64, value []byte)) error
	// ReplicaLogStart returns broker id's log start offset (inclusive) of the partition.
	ReplicaLogStart(topic string, p int32, id int32) (int64, error)
}

// execResolver resolves an exec fault's target to a broker and its advertised address; the
// fault schedule calls it from the fault's goroutine.
type execResolver interface {
	ResolveBroker(ctx context.Context, topic string, ref spec.TargetRef) (ExecBroker, error)
}

// GroupStatser reads the counters of the group coordinator of groupID now.
type GroupStatser interface {
	GroupStats(groupID string) (group.Stats, bool)
}

// Inspect implements Inspector: the embedded cluster has every part.
func (e *embedded) Inspect() Inspection {
	return Inspection{DataDir: e.dir, Partitions: e, Replication: e, Retention: e, Healer: e,
		LogDirs: e, Replicas: e, Exec: e, Groups: e}
}

// Inspect implements Inspector: a kafka:// cluster's partitions are sampled through
// Metadata and ListOffsets, and exec targets resolved from its metadata; a client reaches
// nothing else. kfake's retention runs in this process, so it is settled before the read-back.
func (k *kafkaTarget) Inspect() Inspection {
	return Inspection{Partitions: k, Exec: k, Retention: k.retention}
}

// PartitionSample is the replication state of one partition at one moment.
type PartitionSample struct {
	Partition   int32
	Leader      int32 // -1 = no leader
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	HW          int64           // the leader's HW (exclusive); -1 when there is no leader
	LEO         map[int32]int64 // each running replica's own LEO (exclusive); a stopped replica is absent
	// LogStart is the leader's log start offset (inclusive); -1 when there is no leader.
	LogStart int64
	// NoLEO is set when the target cannot see any replica's LEO (a kafka:// cluster: Kafka
	// clients see the HW and the log start, never an LEO): partitions.csv says "n/a".
	NoLEO bool
}

// ExecBroker is a resolved exec target.
type ExecBroker struct {
	ID   int32
	Host string
	Port int
}
