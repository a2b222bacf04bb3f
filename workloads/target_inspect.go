package workloads

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
	Partitions partitionSampler
	// Replication tells whether every follower of a new topic fetches (setup waits for it).
	Replication replicationReadier
	// Retention runs log retention now (before the read-back).
	Retention retentionApplier
	// Healer undoes every fault still active at the end of the measurement.
	Healer healer
	// LogDirs reports a broker whose log directory went offline (the load stops).
	LogDirs offlineLogDirs
	// Replicas reads the replica logs directly (the replica-log comparison).
	Replicas replicaReader
	// Exec resolves an exec fault's target to a broker and its address.
	Exec execResolver
	// Groups reads the group coordinator's rebalance counters.
	Groups groupStatser
}

// inspect returns t's optional parts: none when t is not an Inspector.
func inspect(t Target) Inspection {
	if in, ok := t.(Inspector); ok {
		return in.Inspect()
	}
	return Inspection{}
}

// partitionSampler reports the replication state of every partition of a topic; the
// partition timeline calls it from its goroutine.
type partitionSampler interface {
	SamplePartitions(topic string) ([]PartitionSample, error)
}

// replicationReadier tells whether every follower of the topic is fetching: "" when ready,
// else what is not.
type replicationReadier interface{ ReplicationReady(topic string) string }

// retentionApplier runs log retention on demand.
type retentionApplier interface{ ApplyRetention() }

// healer undoes every fault still active; it returns the brokers it restarted.
type healer interface {
	HealAll() (restarted []int32, err error)
}

// offlineLogDirs reports the first running broker whose log directory went offline, or ok
// false; the storage watch calls it from its goroutine.
type offlineLogDirs interface {
	OfflineLogDir() (broker int32, err error, ok bool)
}

// replicaReader reads replica logs directly, for the replica-log comparison after the run.
type replicaReader interface {
	// ReplicasIdentical compares, for every partition of topic, the bytes of each ISR
	// member's log with the leader's up to the HW: false and the first difference when they
	// are not byte-identical.
	ReplicasIdentical(topic string) (same bool, why string, err error)
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
	ResolveBroker(ctx context.Context, topic string, ref spec.TargetRef) (execBroker, error)
}

// groupStatser reads the counters of the group coordinator of groupID now.
type groupStatser interface {
	GroupStats(groupID string) (group.Stats, bool)
}

// Inspect implements Inspector: the embedded cluster has every part.
func (e *embedded) Inspect() Inspection {
	return Inspection{DataDir: e.dir, Partitions: e, Replication: e, Retention: e, Healer: e,
		LogDirs: e, Replicas: e, Exec: e, Groups: e}
}

// Inspect implements Inspector: a kafka:// cluster's partitions are sampled through
// Metadata and ListOffsets, and exec targets resolved from its metadata; a client reaches
// nothing else.
func (k *kafkaTarget) Inspect() Inspection {
	return Inspection{Partitions: k, Exec: k}
}
