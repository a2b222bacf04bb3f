package controller

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// tpKey names a partition.
type tpKey struct {
	topic string
	p     int32
}

// replicaOffs is one replica's answer from Offsets.
type replicaOffs struct {
	leo, hw int64
}

// offsetSnapshot holds the answers of Offsets for the replicas of the
// partitions that an operation may elect uncleanly. It is taken before the
// operation locks the controller, so Offsets never runs under the lock and
// the new leader's LEO is read before it learns of its election.
type offsetSnapshot map[tpKey]map[int32]replicaOffs

// offJob names the replicas of one partition to ask Offsets about.
type offJob struct {
	k        tpKey
	replicas []int32
}

// snapshotOffsets asks Offsets (if set) about every replica of the
// partitions of unclean-enabled topics for which want returns true
// (evaluated under the lock); the queries run without the lock.
func (c *Controller) snapshotOffsets(want func(st *PartitionState) bool) offsetSnapshot {
	c.mu.Lock()
	o := c.mu.offsets
	if o == nil {
		c.mu.Unlock()
		return nil
	}
	var jobs []offJob
	for name, t := range c.mu.topics {
		if !c.uncleanLocked(name) {
			continue
		}
		for i := range t.parts {
			if want(&t.parts[i]) {
				jobs = append(jobs, offJob{tpKey{name, int32(i)}, slices.Clone(t.parts[i].Replicas)})
			}
		}
	}
	c.mu.Unlock()
	return queryOffsets(o, jobs)
}

func queryOffsets(o Offsets, jobs []offJob) offsetSnapshot {
	if len(jobs) == 0 {
		return nil
	}
	snap := make(offsetSnapshot, len(jobs))
	for _, j := range jobs {
		m := make(map[int32]replicaOffs, len(j.replicas))
		for _, b := range j.replicas {
			if leo, hw, ok := o.ReplicaOffsets(b, j.k.topic, j.k.p); ok {
				m[b] = replicaOffs{leo, hw}
			}
		}
		snap[j.k] = m
	}
	return snap
}

// lostOffsets is max(0, oldHW - newLeaderLEO) where oldHW is the highest HW
// any replica reported (the old leader's, when it still answers; a follower's
// HW never exceeds it). 0 when the new leader's LEO is unknown.
func (s offsetSnapshot) lostOffsets(k tpKey, newLeader int32) int64 {
	m := s[k]
	nl, ok := m[newLeader]
	if !ok {
		return 0
	}
	var oldHW int64
	for _, r := range m {
		oldHW = max(oldHW, r.hw)
	}
	return max(0, oldHW-nl.leo)
}

// chooseLeaderLocked applies Kafka's election rule to st: the first replica
// in replica order that is in the ISR and alive; failing that, if
// allowUnclean, the first alive replica (necessarily outside the ISR).
// Returns NoLeader if there is none.
func (c *Controller) chooseLeaderLocked(st *PartitionState, allowUnclean bool) (leader int32, unclean bool) {
	for _, r := range st.Replicas {
		if slices.Contains(st.ISR, r) && c.aliveLocked(r) {
			return r, false
		}
	}
	if allowUnclean {
		for _, r := range st.Replicas {
			if c.aliveLocked(r) {
				return r, true
			}
		}
	}
	return NoLeader, false
}

// installLeaderLocked makes leader (chosen by chooseLeaderLocked) the leader
// of st: bumps both epochs, sets the ISR to its alive members (clean) or to
// [leader] (unclean), counts the election and notifies.
func (c *Controller) installLeaderLocked(st *PartitionState, leader int32, unclean bool, snap offsetSnapshot) {
	next := st.Clone()
	next.Leader = leader
	next.LeaderEpoch++
	next.PartitionEpoch++
	if unclean {
		next.ISR = []int32{leader}
		c.mu.unclean++
		c.mu.lost += snap.lostOffsets(tpKey{st.Topic, st.Partition}, leader)
	} else {
		next.ISR = slices.DeleteFunc(next.ISR, func(r int32) bool { return !c.aliveLocked(r) })
	}
	c.mu.elections++
	c.commitLocked(st, next)
}

// commitLocked replaces *st by next and notifies subscribers. A change that
// drops ISR members counts as a controller ISR shrink.
func (c *Controller) commitLocked(st *PartitionState, next PartitionState) {
	if slices.ContainsFunc(st.ISR, func(r int32) bool { return !slices.Contains(next.ISR, r) }) {
		c.mu.isrShrinks++
	}
	*st = next
	c.notifyLocked(st)
}

// BrokerDown fences broker id, as KRaft does when a broker's session ends or
// it is killed:
//
//   - each partition it led gets a new leader: the first replica (in replica
//     order) in the ISR and alive; else, if unclean leader election is
//     enabled for the topic, the first alive replica (an unclean election:
//     ISR = [new leader], lost offsets counted through Offsets); else none:
//     Leader = NoLeader with the ISR kept as its last member(s), so that
//     broker can come back cleanly. Every leader change bumps LeaderEpoch and
//     PartitionEpoch.
//   - it is removed from the ISR of every partition it follows, unless it is
//     the ISR's last member (an ISR is never empty); PartitionEpoch bumps.
//
// A broker fenced by BrokerDown stays fenced until BrokerUp or
// RegisterBroker (heartbeats do not unfence it). Unknown ids are ignored;
// fencing a fenced broker changes nothing.
func (c *Controller) BrokerDown(id int32) { c.brokerDown(id, false) }

func (c *Controller) brokerDown(id int32, bySession bool) {
	snap := c.snapshotOffsets(func(st *PartitionState) bool { return st.Leader == id })
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.mu.brokers[id]
	if !ok {
		return
	}
	if !b.info.Alive {
		if !bySession {
			b.fencedBySession = false // an explicit BrokerDown wins
		}
		return
	}
	if bySession && c.now()-b.lastHeartbeat <= c.timeoutNs {
		return // heartbeated since CheckSessions looked
	}
	b.info.Alive = false
	b.fencedBySession = bySession
	for _, name := range c.sortedTopicsLocked() {
		t := c.mu.topics[name]
		for i := range t.parts {
			st := &t.parts[i]
			if !slices.Contains(st.Replicas, id) {
				continue
			}
			if st.Leader == id {
				leader, unclean := c.chooseLeaderLocked(st, c.uncleanLocked(name))
				if leader != NoLeader {
					c.installLeaderLocked(st, leader, unclean, snap)
					continue
				}
				next := st.Clone()
				next.Leader = NoLeader
				next.LeaderEpoch++
				next.PartitionEpoch++
				if len(next.ISR) > 1 {
					next.ISR = slices.DeleteFunc(next.ISR, func(r int32) bool { return r == id })
				}
				c.commitLocked(st, next)
				continue
			}
			if len(st.ISR) > 1 && slices.Contains(st.ISR, id) {
				next := st.Clone()
				next.ISR = slices.DeleteFunc(next.ISR, func(r int32) bool { return r == id })
				next.PartitionEpoch++
				c.mu.isrChanges++
				c.commitLocked(st, next)
			}
		}
	}
}

// BrokerUp unfences broker id (recording a heartbeat now) and elects leaders
// for the offline partitions it hosts: a partition with Leader == NoLeader
// whose ISR contains id elects it (clean; or another alive ISR member that
// comes first in replica order); one whose ISR does not contain id elects it
// only if unclean leader election is enabled for the topic (unclean:
// ISR = [id], lost offsets counted). Partitions that have a leader are left
// alone: id rejoins their ISR through the leader's AlterPartition once it
// has caught up. Unknown ids are ignored.
func (c *Controller) BrokerUp(id int32) { c.brokerUp(id, false) }

func (c *Controller) brokerUp(id int32, fromHeartbeat bool) {
	snap := c.snapshotOffsets(func(st *PartitionState) bool {
		return st.Leader == NoLeader && slices.Contains(st.Replicas, id)
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.mu.brokers[id]
	if !ok {
		return
	}
	if fromHeartbeat && (b.info.Alive || !b.fencedBySession) {
		return // somebody else changed it meanwhile
	}
	b.lastHeartbeat = c.now()
	if b.info.Alive {
		return
	}
	b.info.Alive = true
	b.fencedBySession = false
	for _, name := range c.sortedTopicsLocked() {
		t := c.mu.topics[name]
		for i := range t.parts {
			st := &t.parts[i]
			if st.Leader != NoLeader || !slices.Contains(st.Replicas, id) {
				continue
			}
			if leader, unclean := c.chooseLeaderLocked(st, c.uncleanLocked(name)); leader != NoLeader {
				c.installLeaderLocked(st, leader, unclean, snap)
			}
		}
	}
}

// ElectLeader runs an election requested by a tool or a fault injector, with
// the semantics of Kafka's ElectLeaders API:
//
//   - unclean == false (PREFERRED): elect the preferred replica (Replicas[0])
//     if it is alive and in the ISR; kerr.ElectionNotNeeded if it already
//     leads, kerr.PreferredLeaderNotAvailable otherwise.
//   - unclean == true (UNCLEAN): only for a partition without a leader
//     (kerr.ElectionNotNeeded otherwise): a clean election if an ISR member
//     is alive, else the first alive replica regardless of the
//     unclean.leader.election.enable configs (an explicit unclean request
//     overrides them, as in Kafka); kerr.EligibleLeadersNotAvailable if no
//     replica is alive.
//
// Unknown partitions give kerr.UnknownTopicOrPartition. The returned state is
// the partition's state after the call (also on the errors above).
func (c *Controller) ElectLeader(topic string, p int32, unclean bool) (PartitionState, error) {
	var snap offsetSnapshot
	if unclean {
		c.mu.Lock()
		o := c.mu.offsets
		st := c.partLocked(topic, p)
		var replicas []int32
		if st != nil && st.Leader == NoLeader {
			replicas = slices.Clone(st.Replicas)
		}
		c.mu.Unlock()
		if o != nil && replicas != nil {
			snap = queryOffsets(o, []offJob{{tpKey{topic, p}, replicas}})
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.partLocked(topic, p)
	if st == nil {
		return PartitionState{}, fmt.Errorf("elect leader %s-%d: %w", topic, p, kerr.UnknownTopicOrPartition)
	}
	if !unclean {
		pref := st.Replicas[0]
		switch {
		case st.Leader == pref:
			return st.Clone(), fmt.Errorf("elect preferred leader %s-%d: broker %d already leads: %w", topic, p, pref, kerr.ElectionNotNeeded)
		case !c.aliveLocked(pref) || !slices.Contains(st.ISR, pref):
			return st.Clone(), fmt.Errorf("elect preferred leader %s-%d: preferred replica %d is fenced or not in ISR %v: %w",
				topic, p, pref, st.ISR, kerr.PreferredLeaderNotAvailable)
		}
		c.installLeaderLocked(st, pref, false, nil)
		return st.Clone(), nil
	}
	if st.Leader != NoLeader {
		return st.Clone(), fmt.Errorf("elect unclean leader %s-%d: broker %d leads: %w", topic, p, st.Leader, kerr.ElectionNotNeeded)
	}
	leader, isUnclean := c.chooseLeaderLocked(st, true)
	if leader == NoLeader {
		return st.Clone(), fmt.Errorf("elect unclean leader %s-%d: no replica of %v is alive: %w",
			topic, p, st.Replicas, kerr.EligibleLeadersNotAvailable)
	}
	c.installLeaderLocked(st, leader, isUnclean, snap)
	return st.Clone(), nil
}

// TransferLeader moves leadership of a partition to broker to, which must be
// an alive ISR member (a clean, forced leader change for fault injection).
// kerr.ElectionNotNeeded if to already leads; kerr.InvalidRequest if to is
// not an alive ISR member; kerr.UnknownTopicOrPartition for unknown
// partitions.
func (c *Controller) TransferLeader(topic string, p int32, to int32) (PartitionState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.partLocked(topic, p)
	if st == nil {
		return PartitionState{}, fmt.Errorf("transfer leader %s-%d: %w", topic, p, kerr.UnknownTopicOrPartition)
	}
	switch {
	case st.Leader == to:
		return st.Clone(), fmt.Errorf("transfer leader %s-%d: broker %d already leads: %w", topic, p, to, kerr.ElectionNotNeeded)
	case !slices.Contains(st.ISR, to) || !c.aliveLocked(to):
		return st.Clone(), fmt.Errorf("transfer leader %s-%d: broker %d is not an alive member of ISR %v: %w",
			topic, p, to, st.ISR, kerr.InvalidRequest)
	}
	c.installLeaderLocked(st, to, false, nil)
	return st.Clone(), nil
}

// AlterPartition is the leader's request to change a partition's ISR
// (Kafka's AlterPartition). leader, leaderEpoch and partitionEpoch must be
// the partition's current ones; isr must contain the leader, name only
// assigned replicas, each once, and no fenced broker. On success the ISR is
// replaced by a copy of isr, PartitionEpoch is bumped, subscribers are
// notified and the new state is returned; an isr equal to the current one
// (same members, same order) changes nothing and returns the current state.
//
// Errors: kerr.UnknownTopicOrPartition; kerr.NotLeaderForPartition if leader
// is not the current leader; kerr.FencedLeaderEpoch if leaderEpoch is not the
// current one; kerr.InvalidUpdateVersion if partitionEpoch is not the current
// one; kerr.InvalidRequest if isr lacks the leader, names a non-replica or a
// broker twice; kerr.InvalidRequest together with kerr.IneligibleReplica
// (errors.Is matches both; the first is the error code) if isr names a fenced
// broker. On error the current state is returned too (zero for unknown
// partitions).
func (c *Controller) AlterPartition(topic string, p int32, leader, leaderEpoch, partitionEpoch int32, isr []int32) (PartitionState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.partLocked(topic, p)
	if st == nil {
		return PartitionState{}, fmt.Errorf("alter partition %s-%d: %w", topic, p, kerr.UnknownTopicOrPartition)
	}
	cur := st.Clone()
	switch {
	case leader != st.Leader:
		return cur, fmt.Errorf("alter partition %s-%d: broker %d is not the leader (leader is %d): %w",
			topic, p, leader, st.Leader, kerr.NotLeaderForPartition)
	case leaderEpoch != st.LeaderEpoch:
		return cur, fmt.Errorf("alter partition %s-%d: leader epoch %d is not the current %d: %w",
			topic, p, leaderEpoch, st.LeaderEpoch, kerr.FencedLeaderEpoch)
	case partitionEpoch != st.PartitionEpoch:
		return cur, fmt.Errorf("alter partition %s-%d: partition epoch %d is not the current %d: %w",
			topic, p, partitionEpoch, st.PartitionEpoch, kerr.InvalidUpdateVersion)
	case !slices.Contains(isr, leader):
		return cur, fmt.Errorf("alter partition %s-%d: proposed ISR %v lacks the leader %d: %w",
			topic, p, isr, leader, kerr.InvalidRequest)
	}
	for i, r := range isr {
		if !slices.Contains(st.Replicas, r) {
			return cur, fmt.Errorf("alter partition %s-%d: proposed ISR %v names broker %d, not a replica of %v: %w",
				topic, p, isr, r, st.Replicas, kerr.InvalidRequest)
		}
		if slices.Contains(isr[:i], r) {
			return cur, fmt.Errorf("alter partition %s-%d: proposed ISR %v names broker %d twice: %w",
				topic, p, isr, r, kerr.InvalidRequest)
		}
		if !c.aliveLocked(r) {
			return cur, fmt.Errorf("alter partition %s-%d: proposed ISR %v names fenced broker %d: %w: %w",
				topic, p, isr, r, kerr.InvalidRequest, kerr.IneligibleReplica)
		}
	}
	if slices.Equal(isr, st.ISR) {
		return cur, nil
	}
	next := cur
	next.ISR = slices.Clone(isr)
	next.PartitionEpoch++
	c.mu.isrChanges++
	*st = next // not commitLocked: a leader's own shrink is its IsrShrinksPerSec
	c.notifyLocked(st)
	return st.Clone(), nil
}

func (c *Controller) sortedTopicsLocked() []string {
	names := make([]string, 0, len(c.mu.topics))
	for n := range c.mu.topics {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
