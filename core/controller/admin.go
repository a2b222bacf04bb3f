package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DeleteTopic deletes a topic (Kafka's DeleteTopics, KRaft's RemoveTopicRecord): the
// topic, its partitions, configs and damaged-replica records are gone from the controller
// at once, the deletion is recorded in the metadata log, and the brokers hosting it get a
// TopicUpdate with Deleted set, on which they stop fetching, close and delete their
// replicas. A broker that is down meanwhile finds its directories stray when it starts
// again. The name may be reused at once: the new topic is a new incarnation (a new
// TopicID). Internal topics may be deleted, as in Kafka.
//
// Errors: kerr.UnknownTopicOrPartition when there is no such topic.
func (c *Controller) DeleteTopic(name string) (err error) {
	c.lock()
	defer c.unlockErr(&err)
	t, ok := c.mu.topics[name]
	if !ok {
		return fmt.Errorf("delete topic %q: %w", name, kerr.UnknownTopicOrPartition)
	}
	c.notifyTopicLocked(t, true)
	delete(c.mu.topics, name)
	c.recordDeleteTopicLocked(name)
	return nil
}

// CreatePartitions raises a topic's partition count to count (Kafka's CreatePartitions; the
// count can only grow) and returns the new partitions' states. Without assignment the new
// partitions are placed as CreateTopic places them (round-robin over the alive brokers,
// continuing the topic's pattern: partition p gets brokers[(s + p + i) % n], s the index of
// partition 0's preferred leader among them), leader = first replica, ISR = all replicas.
// With assignment (one replica list per new partition, in order) each list must name
// replication-factor distinct registered brokers; its ISR is its alive brokers (at least
// one), led by the first. validateOnly checks without creating anything.
//
// Errors, as Kafka's: kerr.UnknownTopicOrPartition; kerr.InvalidPartitions when count is not
// above the current count or above MaxPartitions; kerr.InvalidReplicaAssignment for a bad
// assignment; kerr.InvalidReplicationFactor when fewer brokers are alive than the
// replication factor.
func (c *Controller) CreatePartitions(topic string, count int32, assignment [][]int32, validateOnly bool) (_ []PartitionState, err error) {
	c.lock()
	defer c.unlockErr(&err)
	t, ok := c.mu.topics[topic]
	if !ok {
		return nil, fmt.Errorf("create partitions %q: %w", topic, kerr.UnknownTopicOrPartition)
	}
	cur := int32(len(t.parts))
	switch {
	case count == cur:
		return nil, fmt.Errorf("create partitions %q: topic already has %d partition(s): %w", topic, cur, kerr.InvalidPartitions)
	case count < cur:
		return nil, fmt.Errorf("create partitions %q: the topic currently has %d partition(s); %d would not be an increase: %w", topic, cur, count, kerr.InvalidPartitions)
	case count > MaxPartitions:
		return nil, fmt.Errorf("create partitions %q: number of partitions %d must be at most %d: %w", topic, count, MaxPartitions, kerr.InvalidPartitions)
	}
	add := int(count - cur)
	rf := len(t.parts[0].Replicas)
	var replicas [][]int32
	if assignment != nil {
		if len(assignment) != add {
			return nil, fmt.Errorf("create partitions %q: attempted to add %d additional partition(s), but %d assignment(s) were specified: %w",
				topic, add, len(assignment), kerr.InvalidReplicaAssignment)
		}
		for i, a := range assignment {
			if err := c.checkAssignmentLocked(a, rf); err != nil {
				return nil, fmt.Errorf("create partitions %q: partition %d: %w", topic, int(cur)+i, err)
			}
			if !slices.ContainsFunc(a, c.aliveLocked) {
				return nil, fmt.Errorf("create partitions %q: all brokers specified in the manual partition assignment for partition %d are fenced: %w",
					topic, int(cur)+i, kerr.InvalidReplicaAssignment)
			}
			replicas = append(replicas, slices.Clone(a))
		}
	} else {
		alive := c.aliveIDsLocked()
		n := len(alive)
		if rf > n {
			return nil, fmt.Errorf("create partitions %q: unable to replicate the partition %d time(s): only %d broker(s) are alive: %w",
				topic, rf, n, kerr.InvalidReplicationFactor)
		}
		s := max(0, slices.Index(alive, t.parts[0].Replicas[0]))
		for p := int(cur); p < int(count); p++ {
			r := make([]int32, rf)
			for i := range r {
				r[i] = alive[(s+p+i)%n]
			}
			replicas = append(replicas, r)
		}
	}
	if err := c.checkCapacityLocked(fmt.Sprintf("create partitions %q", topic), int64(add)*int64(rf)); err != nil {
		return nil, err
	}
	if validateOnly {
		return nil, nil
	}
	out := make([]PartitionState, 0, add)
	for i, r := range replicas {
		isr := slices.DeleteFunc(slices.Clone(r), func(b int32) bool { return !c.aliveLocked(b) })
		t.parts = append(t.parts, PartitionState{
			Topic: topic, Partition: cur + int32(i), Leader: isr[0], Replicas: r, ISR: isr,
		})
	}
	c.recordTopicLocked(t)
	for p := cur; p < count; p++ {
		c.recordPartitionLocked(&t.parts[p])
		c.notifyLocked(&t.parts[p])
		out = append(out, t.parts[p].Clone())
	}
	return out, nil
}

// checkAssignmentLocked checks one manual replica list against Kafka's rules.
func (c *Controller) checkAssignmentLocked(a []int32, rf int) error {
	if len(a) == 0 {
		return fmt.Errorf("the manual partition assignment includes an empty replica list: %w", kerr.InvalidReplicaAssignment)
	}
	for i, b := range a {
		if _, ok := c.mu.brokers[b]; !ok {
			return fmt.Errorf("the manual partition assignment includes broker %d, but no such broker is registered: %w", b, kerr.InvalidReplicaAssignment)
		}
		if slices.Contains(a[:i], b) {
			return fmt.Errorf("the manual partition assignment includes the broker %d more than once: %w", b, kerr.InvalidReplicaAssignment)
		}
	}
	if len(a) != rf {
		return fmt.Errorf("the manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s): %w",
			len(a), rf, kerr.InvalidReplicaAssignment)
	}
	return nil
}

// BalanceLeaders runs one pass of Kafka's preferred-leader balancing
// (auto.leader.rebalance.enable, the controller's checkAndTriggerAutoLeaderRebalance): for
// each broker, take the partitions whose preferred replica (Replicas[0]) it is; when the
// share of them it does not lead is above percentage/100
// (leader.imbalance.per.broker.percentage), each of those whose preferred replica is alive,
// undamaged and in the ISR elects it (a clean leader change, as ElectLeader PREFERRED).
// Returns the partitions whose leader moved, ordered by topic, then partition.
func (c *Controller) BalanceLeaders(percentage int) (moved []TopicPartition) {
	c.lock()
	defer func() {
		if c.unlock() != nil {
			moved = nil // refused: nothing moved
		}
	}()
	byPreferred := map[int32][]*PartitionState{}
	for _, name := range c.sortedTopicsLocked() {
		t := c.mu.topics[name]
		for i := range t.parts {
			st := &t.parts[i]
			byPreferred[st.Replicas[0]] = append(byPreferred[st.Replicas[0]], st)
		}
	}
	for _, pref := range slicesSortedKeys(byPreferred) {
		parts := byPreferred[pref]
		var off []*PartitionState
		for _, st := range parts {
			if st.Leader != pref {
				off = append(off, st)
			}
		}
		if float64(len(off))/float64(len(parts)) <= float64(percentage)/100 {
			continue
		}
		for _, st := range off {
			if !c.aliveLocked(pref) || !slices.Contains(st.ISR, pref) || slices.Contains(c.damagedLocked(st.Topic, st.Partition), pref) {
				continue
			}
			c.installLeaderLocked(st, pref, false, nil)
			moved = append(moved, TopicPartition{st.Topic, st.Partition})
		}
	}
	slices.SortFunc(moved, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return moved
}

func slicesSortedKeys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// RunLeaderBalancer calls BalanceLeaders(percentage) every `every`
// (leader.imbalance.check.interval.seconds) until ctx is done, then returns ctx.Err(),
// logging the leaders it moved. every must be positive.
func (c *Controller) RunLeaderBalancer(ctx context.Context, every time.Duration, percentage int) error {
	return runEvery(ctx, "RunLeaderBalancer", every, func() {
		if moved := c.BalanceLeaders(percentage); len(moved) > 0 {
			c.logf("controller: auto leader rebalance (leader.imbalance.per.broker.percentage %d): preferred leaders elected for %d partition(s): %v",
				percentage, len(moved), moved)
		}
	})
}
