package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Partition reassignment (KIP-455), as the KRaft controller does it
// (ReplicationControlManager.alterPartitionReassignments, PartitionReassignmentReplicas,
// PartitionReassignmentRevert, PartitionChangeBuilder):
//
//  1. AlterPartitionReassignments records the partition with Replicas = target followed by
//     the replicas it removes, AddingReplicas = target - current and RemovingReplicas =
//     current - target (current being Replicas, which is already a union while an earlier
//     reassignment is in progress; an empty difference keeps the earlier one's value, as
//     Kafka's builder does). The adding brokers learn that they host the partition
//     and start as followers outside the ISR; they join it by the usual rule (the leader's
//     AlterPartition once they caught up).
//  2. When a change leaves every target replica in the ISR (ISR - removing non-empty and
//     holding the whole target), the same change completes the reassignment: Replicas =
//     target, ISR = ISR - removing, no adding or removing replicas. If that leaves the leader
//     out, a leader is elected from the target (replica order, ISR members that are alive
//     and undamaged). A reassignment whose target the ISR already holds (a reorder, a
//     removal) completes at once.
//  3. The removed brokers hear of the change (notifications go to the old and the new
//     replicas) and delete their replica.
//
// Cancelling (a nil target) reverts to the original replicas: Replicas and ISR lose the
// adding replicas; if that empties the ISR, its first remaining replica becomes the ISR only
// when unclean leader election is enabled for the topic (else INVALID_REPLICA_ASSIGNMENT).
//
// Epochs: every change bumps PartitionEpoch; LeaderEpoch is bumped when the leader changes
// or when the new Replicas lack a broker of the old ones (completion and cancellation that
// remove replicas), so the leader fences the removed followers' fetches and every replica
// sees a new leader epoch. The whole state is the partition record of the metadata log, so
// a reassignment in progress survives a controller restart and goes on.

// Reassignment is one partition's entry of an AlterPartitionReassignments request.
type Reassignment struct {
	Topic     string
	Partition int32
	// Replicas is the target replica list in preference order (Replicas[0] the preferred
	// leader); nil cancels the partition's reassignment in progress.
	Replicas []int32
}

// OngoingReassignment is a partition whose reassignment is in progress, as
// ListPartitionReassignments reports it.
type OngoingReassignment struct {
	Topic     string
	Partition int32
	// Replicas is the current replica set (target followed by the removing replicas).
	Replicas         []int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Reassigning reports whether a reassignment of the partition is in progress.
func (s *PartitionState) Reassigning() bool {
	return len(s.AddingReplicas) > 0 || len(s.RemovingReplicas) > 0
}

// TargetReplicas is the replica set the partition will have once its reassignment
// completes (Replicas when none is in progress). A new slice.
func (s *PartitionState) TargetReplicas() []int32 {
	return without(s.Replicas, s.RemovingReplicas)
}

// AlterPartitionReassignments starts, changes or cancels the reassignment of each partition
// of reqs, in order, as one change of the metadata log (Kafka's atomic batch): errs[i] is
// the result of reqs[i]. allowRFChange false (AlterPartitionReassignments v1's
// AllowReplicationFactorChange, KIP-860) refuses a target whose size differs from the
// partition's replication factor.
//
// Per-partition errors: kerr.UnknownTopicOrPartition; kerr.InvalidReplicaAssignment for an
// empty target, a broker named twice or one never registered, or a cancellation that would
// need an unclean election the topic does not allow; kerr.NoReassignmentInProgress to cancel
// none; kerr.InvalidReplicationFactor (allowRFChange false); kerr.PolicyViolation beyond
// Config.ReplicaCapacity. When the metadata log cannot be written, every entry that had
// succeeded gets that error (ErrMetadataLog) instead: nothing was changed.
func (c *Controller) AlterPartitionReassignments(reqs []Reassignment, allowRFChange bool) []error {
	errs := make([]error, len(reqs))
	c.lock()
	for i, r := range reqs {
		errs[i] = c.reassignLocked(r, allowRFChange)
	}
	if err := c.flushLocked(); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	c.mu.Unlock()
	return errs
}

// reassignLocked applies one entry of AlterPartitionReassignments (mu held).
func (c *Controller) reassignLocked(r Reassignment, allowRFChange bool) error {
	st := c.partLocked(r.Topic, r.Partition)
	if st == nil {
		return fmt.Errorf("reassign %s-%d: %w", r.Topic, r.Partition, kerr.UnknownTopicOrPartition)
	}
	if r.Replicas == nil {
		return c.cancelReassignmentLocked(st)
	}
	target := r.Replicas
	if len(target) == 0 {
		return fmt.Errorf("reassign %s-%d: the target replica list is empty: %w", r.Topic, r.Partition, kerr.InvalidReplicaAssignment)
	}
	for i, id := range target {
		if slices.Contains(target[:i], id) {
			return fmt.Errorf("reassign %s-%d: target %v names broker %d more than once: %w", r.Topic, r.Partition, target, id, kerr.InvalidReplicaAssignment)
		}
		if _, ok := c.mu.brokers[id]; !ok {
			return fmt.Errorf("reassign %s-%d: target %v names broker %d, which is not registered: %w", r.Topic, r.Partition, target, id, kerr.InvalidReplicaAssignment)
		}
	}
	if rf := len(st.Replicas) - len(st.RemovingReplicas); !allowRFChange && len(target) != rf {
		return fmt.Errorf("reassign %s-%d: target %v has %d replicas, the replication factor is %d and the request does not allow changing it: %w",
			r.Topic, r.Partition, target, len(target), rf, kerr.InvalidReplicationFactor)
	}
	removing := sortedDiff(st.Replicas, target)
	next := st.Clone()
	next.Replicas = append(slices.Clone(target), removing...)
	// As Kafka's changePartitionReassignment: an empty difference keeps the value of the
	// reassignment in progress (the same target again changes nothing).
	if adding := sortedDiff(target, st.Replicas); len(adding) > 0 {
		next.AddingReplicas = adding
	}
	if len(removing) > 0 {
		next.RemovingReplicas = removing
	}
	if grow := int64(len(next.Replicas) - len(st.Replicas)); grow > 0 {
		if err := c.checkCapacityLocked(fmt.Sprintf("reassign %s-%d", r.Topic, r.Partition), grow); err != nil {
			return err
		}
	}
	c.settleLocked(st, &next)
	c.storeChangeLocked(st, next)
	return nil
}

// cancelReassignmentLocked reverts a reassignment in progress to the original replicas
// (Kafka's PartitionReassignmentRevert; mu held).
func (c *Controller) cancelReassignmentLocked(st *PartitionState) error {
	if !st.Reassigning() {
		return fmt.Errorf("cancel reassignment of %s-%d: %w", st.Topic, st.Partition, kerr.NoReassignmentInProgress)
	}
	next := st.Clone()
	next.Replicas = without(st.Replicas, st.AddingReplicas)
	next.ISR = without(st.ISR, st.AddingReplicas)
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	if len(next.ISR) == 0 {
		// Only adding replicas are in sync: the original replicas are all behind.
		if !c.uncleanLocked(st.Topic) {
			return fmt.Errorf("cancel reassignment of %s-%d: only the adding replicas %v are in sync (ISR %v), reverting to %v would need an unclean leader election, which the topic does not allow: %w",
				st.Topic, st.Partition, st.AddingReplicas, st.ISR, next.Replicas, kerr.InvalidReplicaAssignment)
		}
		next.ISR = []int32{next.Replicas[0]}
		c.clearDamagedLocked(TopicPartition{st.Topic, st.Partition}, next.Replicas[0])
		c.mu.unclean++
	}
	c.settleLocked(st, &next)
	c.storeChangeLocked(st, next)
	return nil
}

// ListPartitionReassignments returns the partitions whose reassignment is in progress,
// ordered by topic and partition: of every topic when tps is nil, else of the partitions
// named (unknown ones and those without a reassignment are left out, as Kafka does).
func (c *Controller) ListPartitionReassignments(tps []TopicPartition) []OngoingReassignment {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []OngoingReassignment
	add := func(st *PartitionState) {
		if st != nil && st.Reassigning() {
			out = append(out, OngoingReassignment{Topic: st.Topic, Partition: st.Partition, Replicas: slices.Clone(st.Replicas),
				AddingReplicas: slices.Clone(st.AddingReplicas), RemovingReplicas: slices.Clone(st.RemovingReplicas)})
		}
	}
	if tps == nil {
		for _, name := range c.sortedTopicsLocked() {
			t := c.mu.topics[name]
			for i := range t.parts {
				add(&t.parts[i])
			}
		}
		return out
	}
	for _, tp := range tps {
		add(c.partLocked(tp.Topic, tp.Partition))
	}
	slices.SortFunc(out, func(a, b OngoingReassignment) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return slices.CompactFunc(out, func(a, b OngoingReassignment) bool { return a.Topic == b.Topic && a.Partition == b.Partition })
}

// settleLocked completes what every change of *st to *next implies besides itself, as
// Kafka's PartitionChangeBuilder.build does (mu held; next is a private copy):
//
//   - a reassignment in progress whose target the new ISR holds completes;
//   - a leader the change leaves out of the ISR (a completed reassignment removed it, a
//     cancellation removed an adding replica that led) is replaced by an election among
//     the new replicas (clean; unclean only when the topic allows it), or none;
//   - LeaderEpoch is bumped when the leader changes or a replica is removed.
//
// The caller bumps PartitionEpoch (storeChangeLocked, or AlterPartition itself).
func (c *Controller) settleLocked(st, next *PartitionState) {
	if next.Reassigning() {
		isr := without(next.ISR, next.RemovingReplicas)
		target := without(next.Replicas, next.RemovingReplicas)
		if len(isr) > 0 && len(target) > 0 && containsAll(isr, target) {
			next.ISR, next.Replicas = isr, target
			next.AddingReplicas, next.RemovingReplicas = nil, nil
		}
	}
	if next.Leader != NoLeader && !slices.Contains(next.ISR, next.Leader) {
		leader, unclean := c.chooseLeaderLocked(next, c.uncleanLocked(next.Topic))
		next.Leader = leader
		switch {
		case leader == NoLeader:
			// No replica to lead: offline, the ISR kept as the last members in sync.
		case unclean:
			next.ISR = []int32{leader}
			c.mu.unclean++
			c.clearDamagedLocked(TopicPartition{next.Topic, next.Partition}, leader)
		default:
			damaged := c.damagedLocked(next.Topic, next.Partition)
			next.ISR = slices.DeleteFunc(next.ISR, func(r int32) bool { return r != leader && (!c.aliveLocked(r) || slices.Contains(damaged, r)) })
		}
		if leader != NoLeader {
			c.mu.elections++
		}
	}
	if next.Leader != st.Leader || !containsAll(next.Replicas, st.Replicas) {
		next.LeaderEpoch = st.LeaderEpoch + 1
	}
}

// storeChangeLocked stores next as the partition's state if it differs from *st, bumping
// PartitionEpoch (mu held).
func (c *Controller) storeChangeLocked(st *PartitionState, next PartitionState) {
	if sameState(st, &next) {
		return
	}
	next.PartitionEpoch = st.PartitionEpoch + 1
	c.storeLocked(st, next)
}

func sameState(a, b *PartitionState) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && slices.Equal(a.Replicas, b.Replicas) &&
		slices.Equal(a.ISR, b.ISR) && slices.Equal(a.AddingReplicas, b.AddingReplicas) && slices.Equal(a.RemovingReplicas, b.RemovingReplicas)
}

// without returns a new slice of the members of s not in drop, in s's order.
func without(s, drop []int32) []int32 {
	out := make([]int32, 0, len(s))
	for _, r := range s {
		if !slices.Contains(drop, r) {
			out = append(out, r)
		}
	}
	return out
}

// sortedDiff returns the members of a not in b, ascending (Kafka computes them as a
// TreeSet); nil when there are none.
func sortedDiff(a, b []int32) []int32 {
	var out []int32
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// containsAll reports whether every member of sub is in s.
func containsAll(s, sub []int32) bool {
	for _, r := range sub {
		if !slices.Contains(s, r) {
			return false
		}
	}
	return true
}

// throttledReplicas validates a leader/follower.replication.throttled.replicas value as
// Kafka's ThrottledReplicaListValidator: "*", or a comma-separated list of
// partition:broker (empty entries allowed); returned without spaces.
func throttledReplicas(v string, _ int16) (string, error) {
	if strings.TrimSpace(v) == "*" {
		return "*", nil
	}
	var out []string
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		p, b, ok := strings.Cut(e, ":")
		if !ok || !digits(p) || !digits(b) {
			return "", fmt.Errorf("must be the list [partitionId]:[brokerId],[partitionId]:[brokerId],... or the wildcard '*' (%q is not partition:broker)", e)
		}
		out = append(out, e)
	}
	return strings.Join(out, ","), nil
}

func digits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
