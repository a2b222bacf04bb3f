package controller

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ReplicaAssignment is one partition's manual replica list in a CreateTopics request: the
// brokers in preference order (the first alive one leads).
type ReplicaAssignment struct {
	Partition int32
	Replicas  []int32
}

// CreateTopicAssigned creates a topic whose replicas are placed by hand (CreateTopics with
// assignments, kafka-topics.sh --replica-assignment), with KRaft's checks
// (ReplicationControlManager.createTopic): the name as CreateTopic checks it; in request
// order, each partition assigned once ("Found multiple manual partition assignments"), each
// list non-empty, of registered brokers, without repeats, as long as the first list, and
// with at least one unfenced broker; then the partitions numbered 0..n-1 without a gap (all
// INVALID_REPLICA_ASSIGNMENT); then the configs for that replication factor and the replica
// capacity. A partition's ISR is its alive replicas, led by the first. The replication factor
// may exceed the alive brokers (a fenced replica joins the ISR once it is back and caught
// up). validateOnly creates nothing. It returns the partition states.
func (c *Controller) CreateTopicAssigned(name string, assignment []ReplicaAssignment, configs map[string]string, validateOnly bool) (_ []PartitionState, err error) {
	c.lock()
	defer c.unlockErr(&err)
	if err := c.checkNewTopicNameLocked(name); err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("create topic %q: "+format+": %w", append(append([]any{name}, args...), kerr.InvalidReplicaAssignment)...)
	}
	if len(assignment) == 0 {
		return nil, bad("no partition assignment")
	}
	if len(assignment) > MaxPartitions {
		return nil, fmt.Errorf("create topic %q: number of partitions %d must be in [1, %d]: %w", name, len(assignment), MaxPartitions, kerr.InvalidPartitions)
	}
	byPartition := make(map[int32][]int32, len(assignment))
	rf := len(assignment[0].Replicas)
	for _, a := range assignment {
		if _, dup := byPartition[a.Partition]; dup {
			return nil, bad("found multiple manual partition assignments for partition %d", a.Partition)
		}
		if err := c.checkAssignmentLocked(a.Replicas, rf); err != nil {
			return nil, fmt.Errorf("create topic %q: partition %d: %w", name, a.Partition, err)
		}
		alive := false
		for _, b := range a.Replicas {
			alive = alive || c.aliveLocked(b)
		}
		if !alive {
			return nil, bad("all brokers specified in the manual partition assignment for partition %d are fenced", a.Partition)
		}
		byPartition[a.Partition] = a.Replicas
	}
	ordered := make([][]int32, len(assignment))
	for p := range ordered {
		r, ok := byPartition[int32(p)]
		if !ok {
			return nil, bad("partitions should be a consecutive 0-based integer sequence (partition %d is missing)", p)
		}
		ordered[p] = r
	}
	norm, err := normalizeTopicConfigs(name, configs, int16(rf))
	if err != nil {
		return nil, err
	}
	if err := c.checkCapacityLocked(fmt.Sprintf("create topic %q", name), int64(len(ordered))*int64(rf)); err != nil {
		return nil, err
	}
	if validateOnly {
		return nil, nil
	}
	return c.addTopicLocked(name, norm, ordered)
}
