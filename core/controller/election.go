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
// in replica order that is in the ISR, alive and not damaged; failing that, if
// allowUnclean, the first alive replica (necessarily outside the ISR, or damaged),
// undamaged ones first. Returns NoLeader if there is none.
func (c *Controller) chooseLeaderLocked(st *PartitionState, allowUnclean bool) (leader int32, unclean bool) {
	damaged := c.damagedLocked(st.Topic, st.Partition)
	for _, r := range st.Replicas {
		if slices.Contains(st.ISR, r) && c.aliveLocked(r) && !slices.Contains(damaged, r) {
			return r, false
		}
	}
	if allowUnclean {
		for _, pass := range []bool{false, true} {
			for _, r := range st.Replicas {
				if c.aliveLocked(r) && slices.Contains(damaged, r) == pass {
					return r, true
				}
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
		c.clearDamagedLocked(TopicPartition{st.Topic, st.Partition}, leader) // its log is the truth now
	} else {
		damaged := c.damagedLocked(st.Topic, st.Partition)
		next.ISR = slices.DeleteFunc(next.ISR, func(r int32) bool { return !c.aliveLocked(r) || slices.Contains(damaged, r) })
	}
	c.mu.elections++
	c.commitLocked(st, next)
}

// commitLocked replaces *st by next, records it in the metadata log and notifies
// subscribers. A change that drops ISR members counts as a controller ISR shrink.
func (c *Controller) commitLocked(st *PartitionState, next PartitionState) {
	if slices.ContainsFunc(st.ISR, func(r int32) bool { return !slices.Contains(next.ISR, r) }) {
		c.mu.isrShrinks++
	}
	c.storeLocked(st, next)
}

// storeLocked replaces *st by next, records it and notifies subscribers (mu held): the
// brokers of next's replicas and those a reassignment removed, so they delete their replica.
func (c *Controller) storeLocked(st *PartitionState, next PartitionState) {
	removed := without(st.Replicas, next.Replicas)
	*st = next
	c.recordPartitionLocked(st)
	c.notifyLocked(st, removed...)
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
	c.lock()
	defer c.unlock()
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
	c.fenceLocked(id, bySession, snap)
}

// fenceLocked marks alive broker id fenced and moves its leaderships and ISR memberships
// as BrokerDown describes (mu held).
func (c *Controller) fenceLocked(id int32, bySession bool, snap offsetSnapshot) {
	b := c.mu.brokers[id]
	b.info.Alive = false
	b.fencedBySession = bySession
	c.publishEpochsLocked()
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

// dropFromISRsLocked takes a newly registered incarnation of broker id out of every ISR of
// a partition that has a leader: it must catch up from that leader and rejoin by the join
// rule (mu held; id is fenced, so it leads nothing). In an offline partition it stays,
// unless its replica is damaged and the ISR has other members: it may be the last replica
// known to be in sync.
func (c *Controller) dropFromISRsLocked(id int32) {
	for _, name := range c.sortedTopicsLocked() {
		t := c.mu.topics[name]
		for i := range t.parts {
			st := &t.parts[i]
			if st.Leader == id || !slices.Contains(st.ISR, id) {
				continue
			}
			if st.Leader == NoLeader && (len(st.ISR) == 1 || !slices.Contains(t.damaged[int32(i)], id)) {
				continue
			}
			next := st.Clone()
			next.ISR = slices.DeleteFunc(next.ISR, func(r int32) bool { return r == id })
			next.PartitionEpoch++
			c.mu.isrChanges++
			c.commitLocked(st, next)
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
	c.lock()
	defer c.unlock()
	b, ok := c.mu.brokers[id]
	if !ok {
		return
	}
	if fromHeartbeat && (b.info.Alive || !b.fencedBySession || b.offlineDir) {
		return // somebody else changed it meanwhile
	}
	if b.info.Alive {
		b.lastHeartbeat = c.now()
		return
	}
	c.unfenceLocked(id, snap)
}

// unfenceLocked marks broker id alive (heartbeat now) and elects it, or an earlier ISR
// member, for the offline partitions it hosts (mu held).
func (c *Controller) unfenceLocked(id int32, snap offsetSnapshot) {
	b := c.mu.brokers[id]
	b.lastHeartbeat = c.now()
	b.info.Alive = true
	b.fencedBySession = false
	c.publishEpochsLocked()
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

// ReportOfflineLogDir is a broker's report that its log directory failed (a write, fsync or
// truncation error: KAFKA_STORAGE_ERROR; Kafka's offline log dir). The broker (incarnation
// brokerEpoch; -1 skips the check) is fenced as BrokerDown does, so its leaderships move and
// it leaves the ISRs, and it stays fenced until it registers again (a restart with the disk
// repaired). An error (ErrMetadataLog) means the report was refused: the broker reports
// again later.
func (c *Controller) ReportOfflineLogDir(id int32, brokerEpoch int64) (err error) {
	snap := c.snapshotOffsets(func(st *PartitionState) bool { return st.Leader == id })
	c.lock()
	defer c.unlockErr(&err)
	b, ok := c.mu.brokers[id]
	if !ok || (brokerEpoch >= 0 && brokerEpoch != b.epoch) {
		return nil
	}
	b.offlineDir = true
	if b.info.Alive {
		c.fenceLocked(id, false, snap)
	}
	b.fencedBySession = false
	return nil
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
func (c *Controller) ElectLeader(topic string, p int32, unclean bool) (out PartitionState, err error) {
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
	c.lock()
	defer c.unlockPart(topic, p, &out, &err)
	st := c.partLocked(topic, p)
	if st == nil {
		return PartitionState{}, fmt.Errorf("elect leader %s-%d: %w", topic, p, kerr.UnknownTopicOrPartition)
	}
	if !unclean {
		pref := st.Replicas[0]
		switch {
		case st.Leader == pref:
			return st.Clone(), fmt.Errorf("elect preferred leader %s-%d: broker %d already leads: %w", topic, p, pref, kerr.ElectionNotNeeded)
		case !c.aliveLocked(pref) || !slices.Contains(st.ISR, pref) || slices.Contains(c.damagedLocked(topic, p), pref):
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
func (c *Controller) TransferLeader(topic string, p int32, to int32) (out PartitionState, err error) {
	c.lock()
	defer c.unlockPart(topic, p, &out, &err)
	st := c.partLocked(topic, p)
	if st == nil {
		return PartitionState{}, fmt.Errorf("transfer leader %s-%d: %w", topic, p, kerr.UnknownTopicOrPartition)
	}
	switch {
	case st.Leader == to:
		return st.Clone(), fmt.Errorf("transfer leader %s-%d: broker %d already leads: %w", topic, p, to, kerr.ElectionNotNeeded)
	case !slices.Contains(st.ISR, to) || !c.aliveLocked(to) || slices.Contains(c.damagedLocked(topic, p), to):
		return st.Clone(), fmt.Errorf("transfer leader %s-%d: broker %d is not an alive, undamaged member of ISR %v: %w",
			topic, p, to, st.ISR, kerr.InvalidRequest)
	}
	c.installLeaderLocked(st, to, false, nil)
	return st.Clone(), nil
}

// AlterPartitionRequest is a leader's request to change a partition's ISR (Kafka's
// AlterPartition, with the broker epochs of KIP-903).
type AlterPartitionRequest struct {
	Topic     string
	Partition int32
	Leader    int32
	// LeaderBrokerEpoch is the leader's broker epoch (-1 skips the check).
	LeaderBrokerEpoch int64
	LeaderEpoch       int32
	PartitionEpoch    int32
	ISR               []int32
	// BrokerEpochs, parallel to ISR, is the broker epoch of each member's fetches as the
	// leader saw them (-1 unknown). A member the change adds must have its current one.
	BrokerEpochs []int64
}

// AlterPartition is the leader's request to change a partition's ISR. The leader, its
// broker epoch, the leader epoch and the partition epoch must be the current ones; the ISR
// must contain the leader, name only assigned replicas, each once, and no fenced broker; a
// member the change adds must be fetching from its current incarnation (its broker epoch).
// On success the ISR is replaced by a copy, PartitionEpoch is bumped, the change is
// recorded and subscribers are notified, and the new state is returned; an ISR equal to
// the current one (same members, same order) changes nothing and returns the current
// state. A damaged replica added back to the ISR is no longer damaged (it caught up from
// the leader).
// An ISR change that brings the whole target of a reassignment in progress in sync
// completes it in the same change (reassign.go, as Kafka's PartitionChangeBuilder): the
// returned state then has the target replicas, and another leader (a new leader epoch) if
// the requesting leader was removed.
//
// Errors: kerr.UnknownTopicOrPartition; kerr.NotLeaderForPartition if Leader is not the
// current leader; kerr.StaleBrokerEpoch if the leader's broker epoch is not its current
// registration's; kerr.FencedLeaderEpoch if LeaderEpoch is not the current one;
// kerr.InvalidUpdateVersion if PartitionEpoch is not the current one; kerr.InvalidRequest if
// the ISR lacks the leader, names a non-replica or a broker twice; kerr.InvalidRequest
// together with kerr.IneligibleReplica (errors.Is matches both; the first is the error
// code) if it names a fenced broker or adds one with a stale or unknown broker epoch. On
// error the current state is returned too (zero for unknown partitions).
func (c *Controller) AlterPartition(req AlterPartitionRequest) (out PartitionState, err error) {
	c.lock()
	defer c.unlockPart(req.Topic, req.Partition, &out, &err)
	topic, p, leader, isr := req.Topic, req.Partition, req.Leader, req.ISR
	st := c.partLocked(topic, p)
	if st == nil {
		return PartitionState{}, fmt.Errorf("alter partition %s-%d: %w", topic, p, kerr.UnknownTopicOrPartition)
	}
	cur := st.Clone()
	switch {
	case leader != st.Leader:
		return cur, fmt.Errorf("alter partition %s-%d: broker %d is not the leader (leader is %d): %w",
			topic, p, leader, st.Leader, kerr.NotLeaderForPartition)
	case req.LeaderBrokerEpoch >= 0 && req.LeaderBrokerEpoch != c.mu.brokers[leader].epoch:
		return cur, fmt.Errorf("alter partition %s-%d: leader %d broker epoch %d is not its current registration's %d: %w",
			topic, p, leader, req.LeaderBrokerEpoch, c.mu.brokers[leader].epoch, kerr.StaleBrokerEpoch)
	case req.LeaderEpoch != st.LeaderEpoch:
		return cur, fmt.Errorf("alter partition %s-%d: leader epoch %d is not the current %d: %w",
			topic, p, req.LeaderEpoch, st.LeaderEpoch, kerr.FencedLeaderEpoch)
	case req.PartitionEpoch != st.PartitionEpoch:
		return cur, fmt.Errorf("alter partition %s-%d: partition epoch %d is not the current %d: %w",
			topic, p, req.PartitionEpoch, st.PartitionEpoch, kerr.InvalidUpdateVersion)
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
		if !slices.Contains(st.ISR, r) {
			var e int64 = -1
			if i < len(req.BrokerEpochs) {
				e = req.BrokerEpochs[i]
			}
			if cur := c.mu.brokers[r].epoch; e != cur {
				return st.Clone(), fmt.Errorf("alter partition %s-%d: proposed ISR %v adds broker %d with broker epoch %d, its current registration is %d: %w: %w",
					topic, p, isr, r, e, cur, kerr.InvalidRequest, kerr.IneligibleReplica)
			}
		}
	}
	if slices.Equal(isr, st.ISR) {
		return cur, nil
	}
	next := cur
	next.ISR = slices.Clone(isr)
	next.PartitionEpoch++
	c.mu.isrChanges++
	for _, r := range isr {
		if !slices.Contains(st.ISR, r) {
			c.clearDamagedLocked(TopicPartition{topic, p}, r)
		}
	}
	c.settleLocked(st, &next) // completes a reassignment whose target is now in sync
	c.storeLocked(st, next)   // not commitLocked: a leader's own shrink is its IsrShrinksPerSec
	return st.Clone(), nil
}

// unlockPart is unlock for an operation on one partition that returns its state: when the
// change could not be persisted the error says so and the state returned is the current
// one (as the operation's own errors return it).
func (c *Controller) unlockPart(topic string, p int32, out *PartitionState, err *error) {
	if ferr := c.flushLocked(); ferr != nil {
		*err = ferr
		if st := c.partLocked(topic, p); st != nil {
			*out = st.Clone()
		}
	}
	c.mu.Unlock()
}

// damagedLocked returns the brokers whose replica of topic-p is damaged (shared: do not
// modify).
func (c *Controller) damagedLocked(topic string, p int32) []int32 {
	if t, ok := c.mu.topics[topic]; ok {
		return t.damaged[p]
	}
	return nil
}

func (c *Controller) markDamagedLocked(tp TopicPartition, id int32) {
	t, ok := c.mu.topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.parts) || slices.Contains(t.damaged[tp.Partition], id) {
		return
	}
	if t.damaged == nil {
		t.damaged = map[int32][]int32{}
	}
	t.damaged[tp.Partition] = append(slices.Clone(t.damaged[tp.Partition]), id)
	c.recordDamagedLocked(t, tp.Partition)
}

func (c *Controller) clearDamagedLocked(tp TopicPartition, id int32) {
	t, ok := c.mu.topics[tp.Topic]
	if !ok || !slices.Contains(t.damaged[tp.Partition], id) {
		return
	}
	d := slices.DeleteFunc(slices.Clone(t.damaged[tp.Partition]), func(b int32) bool { return b == id })
	if len(d) == 0 {
		delete(t.damaged, tp.Partition)
	} else {
		t.damaged[tp.Partition] = d
	}
	c.recordDamagedLocked(t, tp.Partition)
}

// Damaged returns the brokers whose replica of topic-p is recorded as damaged.
func (c *Controller) Damaged(topic string, p int32) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.damagedLocked(topic, p))
}

func (c *Controller) sortedTopicsLocked() []string {
	names := make([]string, 0, len(c.mu.topics))
	for n := range c.mu.topics {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
