package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/isrbench/isrbench/core/controller"
)

// OfflineReplica is one replica of an offline partition, as its broker knows it.
type OfflineReplica struct {
	Broker  int32
	Running bool  // its broker runs (else nothing more is known)
	Damaged bool  // the controller has it as damaged: it lost acknowledged records
	LEO     int64 // its log end offset (exclusive)
	// Lost is how many records below the HW it had acknowledged (checkpointed) its log lacks:
	// the acknowledged records an unclean election of it loses, as far as it knows (the
	// other replicas may have acknowledged more). 0 when not known to have lost any.
	Lost int64
}

// OfflinePartition is a partition without a leader, and the way out.
type OfflinePartition struct {
	State    controller.PartitionState
	Replicas []OfflineReplica
}

// OfflinePartitions returns the partitions without a leader, each with what its replicas'
// brokers know of what they hold and lost. Safe for concurrent use.
func (c *Cluster) OfflinePartitions() []OfflinePartition {
	var out []OfflinePartition
	for _, topic := range c.ctrl.Topics() {
		sts, _ := c.ctrl.Partitions(topic)
		for _, st := range sts {
			if st.Leader != controller.NoLeader {
				continue
			}
			damaged := c.ctrl.Damaged(topic, st.Partition)
			op := OfflinePartition{State: st}
			for _, id := range st.Replicas {
				r := OfflineReplica{Broker: id, Damaged: slices.Contains(damaged, id)}
				if b := c.Broker(id); b != nil && c.nodes[id].state.Load() != nodeStopped {
					for _, ld := range b.LogDirReplicas() {
						if ld.Topic == topic && ld.Partition == st.Partition {
							r.Running, r.Lost = true, ld.OffsetLag
						}
					}
					if leo, _, ok := b.ReplicaOffsets(id, topic, st.Partition); ok {
						r.LEO = leo
					}
				}
				op.Replicas = append(op.Replicas, r)
			}
			out = append(out, op)
		}
	}
	return out
}

// String describes the partition, what each replica lost and the way out: an unclean
// election, with the command that runs it and what it loses.
func (op OfflinePartition) String() string {
	st := op.State
	var b strings.Builder
	fmt.Fprintf(&b, "partition %s-%d is offline: no replica can be elected cleanly (ISR %v)", st.Topic, st.Partition, st.ISR)
	best := int32(-1)
	var bestLEO int64 = -1
	for _, r := range op.Replicas {
		switch {
		case !r.Running:
			fmt.Fprintf(&b, "; broker %d is down", r.Broker)
		case r.Damaged || r.Lost > 0:
			fmt.Fprintf(&b, "; broker %d holds offsets up to %d and lost %d acknowledged records below the HW it had acknowledged", r.Broker, r.LEO, r.Lost)
		default:
			fmt.Fprintf(&b, "; broker %d holds offsets up to %d (out of sync)", r.Broker, r.LEO)
		}
		if r.Running && r.LEO > bestLEO {
			best, bestLEO = r.Broker, r.LEO
		}
	}
	if best < 0 {
		b.WriteString(". It comes back when an ISR member's broker restarts")
		return b.String()
	}
	fmt.Fprintf(&b, ". The way out is an unclean election: `isrbench elect --election-type unclean --topic %s --partition %d` "+
		"(Kafka: kafka-leader-election.sh --bootstrap-server ADDR --election-type unclean --topic %s --partition %d); "+
		"it elects the first running replica (broker %d holds the most, up to offset %d) and loses every record acknowledged above the new leader's log end, "+
		"the other replicas truncate to it", st.Topic, st.Partition, st.Topic, st.Partition, best, bestLEO)
	return b.String()
}
