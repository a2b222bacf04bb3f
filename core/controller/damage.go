package controller

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ReportDamagedReplica is broker id's report (incarnation brokerEpoch; -1 skips the check)
// that its replica of topic-p holds a damaged batch: one that fails its CRC, found by a read
// it was about to serve, by its follower's check of a fetched batch or by the background
// scrub. The replica is recorded as damaged (Damaged) and:
//
//   - if it leads, another alive, undamaged ISR member is elected (a clean election, a new
//     leader epoch; the damaged replica leaves the ISR). With no such member it keeps the
//     leadership: it holds the only in-sync copy, and serves everything but the damaged
//     batch;
//   - else it leaves the ISR, unless it is its last member.
//
// The replica then truncates below the damage, re-replicates from the leader and rejoins
// the ISR by the join rule (AlterPartition), which clears the mark. A report of a stale
// incarnation, or of a replica not assigned to id, changes nothing. The returned state is
// the partition's after the call. Errors: kerr.UnknownTopicOrPartition; ErrMetadataLog
// when the change cannot be persisted (the broker reports again later).
func (c *Controller) ReportDamagedReplica(id int32, brokerEpoch int64, topic string, p int32) (out PartitionState, err error) {
	snap := c.snapshotOffsets(func(st *PartitionState) bool { return st.Topic == topic && st.Partition == p })
	c.lock()
	defer c.unlockPart(topic, p, &out, &err)
	st := c.partLocked(topic, p)
	if st == nil {
		return PartitionState{}, fmt.Errorf("report damaged replica %s-%d: %w", topic, p, kerr.UnknownTopicOrPartition)
	}
	b, ok := c.mu.brokers[id]
	if !ok || (brokerEpoch >= 0 && brokerEpoch != b.epoch) || !slices.Contains(st.Replicas, id) {
		return st.Clone(), nil
	}
	c.markDamagedLocked(TopicPartition{topic, p}, id)
	switch {
	case st.Leader == id:
		if leader, _ := c.chooseLeaderLocked(st, false); leader != NoLeader {
			c.installLeaderLocked(st, leader, false, snap)
		}
	case slices.Contains(st.ISR, id) && len(st.ISR) > 1:
		next := st.Clone()
		next.ISR = slices.DeleteFunc(next.ISR, func(r int32) bool { return r == id })
		next.PartitionEpoch++
		c.mu.isrChanges++
		c.commitLocked(st, next)
	}
	return st.Clone(), nil
}
