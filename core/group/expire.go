package group

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerProtocolType is the protocol type of Kafka consumers, whose member metadata is the
// consumer protocol's subscription (ConsumerProtocolSubscription).
const consumerProtocolType = "consumer"

// expireOffsets is Kafka's cleanupGroupMetadata, run every
// offsets.retention.check.interval.ms over the groups of the loaded partitions: each group's
// expired offsets are removed (expiredOffsets), and a group left Empty without offsets (nor
// commits in flight) is removed too. Their tombstones are one write per group for the driver
// (DrainStores), so that a coordinator that loads the partition later drops them as well;
// the group's own tombstone only if it ever had a generation (a group of generation 0 only
// stored offsets and has no metadata record).
func (m *Machine) expireOffsets(now int64) {
	retention := int64(m.cfg.OffsetsRetentionMinutes) * 60 * 1000
	for _, id := range slices.Sorted(mapsKeys(m.groups)) {
		g := m.groups[id]
		if !m.owned[g.partition] || g.state == Dead {
			continue
		}
		var recs []Record
		expired := g.expiredOffsets(now, retention)
		for _, tp := range expired {
			delete(g.offsets, tp)
			recs = append(recs, Record{Key: OffsetKey(id, tp)})
		}
		if len(expired) > 0 {
			m.logf("group %s: %d committed offsets expired (offsets.retention.minutes %d)", id, len(expired), m.cfg.OffsetsRetentionMinutes)
		}
		if g.state == Empty && len(g.offsets) == 0 && len(g.pendingCommits) == 0 {
			g.transition(Dead, now)
			delete(m.groups, id)
			if g.generation > 0 {
				recs = append(recs, Record{Key: GroupKey(id)})
			}
		}
		if len(recs) > 0 {
			m.stores = append(m.stores, GroupStore{Group: id, Partition: g.partition, Generation: g.generation, tombstones: recs})
		}
	}
}

// expiredOffsets lists (sorted) the committed offsets of g that expired at now, as Kafka's
// GroupMetadata.removeExpiredOffsets, retention being offsets.retention.minutes in ms:
//   - an Empty group with a protocol type: every offset, retention after the group became
//     Empty (KIP-211), or after the commit if that time is unknown (an old record);
//   - a Stable consumer group whose members' subscriptions all decode: the offsets of the
//     topics none subscribes to, retention after their commit (KIP-496);
//   - a group without a protocol type (a standalone consumer, generation -1 commits only):
//     every offset, retention after its commit;
//   - otherwise none.
//
// An offset with a commit in flight never expires; one written with an expire timestamp
// (OffsetCommitValue v1, OffsetCommit v2-v4's retention_time) expires at that time instead.
func (g *group) expiredOffsets(now, retention int64) []TP {
	since := func(c Committed) int64 { return c.CommitTimestamp }
	var subscribed map[string]bool
	switch {
	case g.protocolType != "" && g.state == Empty:
		if g.stateTimestamp >= 0 {
			since = func(Committed) int64 { return g.stateTimestamp }
		}
	case g.protocolType == consumerProtocolType && g.state == Stable:
		var ok bool
		if subscribed, ok = g.subscribedTopics(); !ok {
			return nil
		}
	case g.protocolType == "":
	default:
		return nil
	}
	var out []TP
	for tp, c := range g.offsets {
		if subscribed[tp.Topic] || g.pendingCommits[tp] > 0 {
			continue
		}
		if c.expireTimestamp > 0 && now >= c.expireTimestamp || c.expireTimestamp <= 0 && now-since(c) >= retention {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, func(a, b TP) int { return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition)) })
	return out
}

// subscribedTopics is the union of the topics the members subscribe to, read from their
// metadata of the group's protocol as the consumer protocol's subscription; false when a
// member's does not decode (Kafka's computeSubscribedTopics: then no offset of a Stable
// group expires).
func (g *group) subscribedTopics() (map[string]bool, bool) {
	topics := map[string]bool{}
	for _, id := range g.order {
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(g.members[id].metadataFor(g.protocol)); err != nil {
			return nil, false
		}
		for _, t := range sub.Topics {
			topics[t] = true
		}
	}
	return topics, true
}
