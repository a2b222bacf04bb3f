package group

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// OffsetDelete (KIP-496): a group's committed offsets of some partitions are removed, with
// tombstones in __consumer_offsets, as Kafka's GroupCoordinator.handleDeleteOffsets does.

// DeleteOffsets removes groupID's committed offsets of tps (Kafka's handleDeleteOffsets).
// Which partitions may go depends on the group's state:
//
//   - Empty: every one;
//   - PreparingRebalance, CompletingRebalance, Stable with protocol type "consumer": those of
//     topics no member subscribes to; the others get GROUP_SUBSCRIBED_TO_TOPIC (per
//     partition). The subscriptions are read from the members' consumer protocol metadata
//     of the group's protocol; while the group has no protocol yet, or a member's
//     metadata does not parse, no topic counts as subscribed (Kafka's subscribedTopics
//     None);
//   - any other non-empty group: none, NON_EMPTY_GROUP for the whole request.
//
// An unknown or Dead group is GROUP_ID_NOT_FOUND; the coordinator checks (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID) come first. The offsets are gone from the
// Machine at once; recs are the tombstones of those that existed for the driver to append
// (an Empty group left without offsets is removed too, with its group tombstone, as Kafka's
// cleanupGroupMetadata does whenever some partition was eligible). per has an entry (nil = deleted) for every partition of tps.
func (m *Machine) DeleteOffsets(groupID string, tps []TP) (p int32, recs []Record, per map[TP]error, err error) {
	if err := m.check(groupID); err != nil {
		return 0, nil, nil, err
	}
	g := m.groups[groupID]
	if g == nil || g.state == Dead {
		return 0, nil, nil, fmt.Errorf("group %q: %w", groupID, kerr.GroupIDNotFound)
	}
	per = make(map[TP]error, len(tps))
	var subscribed map[string]bool
	switch {
	case g.state == Empty:
	case g.protocolType == "consumer" && g.protocol != "":
		// A member's metadata that does not parse: no topic counts as subscribed (Kafka's
		// subscribedTopics None).
		subscribed, _ = g.subscribedTopics()
	case g.protocolType == "consumer":
	default:
		return 0, nil, nil, fmt.Errorf("group %q is %v with %d members: %w", groupID, g.state, len(g.members), kerr.NonEmptyGroup)
	}
	gone := map[TP]Committed{}
	eligible := 0
	for _, tp := range tps {
		if subscribed[tp.Topic] {
			per[tp] = fmt.Errorf("group %q subscribes to topic %s: %w", groupID, tp.Topic, kerr.GroupSubscribedToTopic)
			continue
		}
		per[tp] = nil
		eligible++
		if c, ok := g.offsets[tp]; ok {
			gone[tp] = c
			delete(g.offsets, tp)
		}
	}
	for _, r := range OffsetRecords(groupID, gone) {
		recs = append(recs, Record{Key: r.Key})
	}
	if g.state == Empty && len(g.offsets) == 0 && eligible > 0 {
		recs = append(recs, Record{Key: GroupKey(groupID)})
		g.state = Dead
		delete(m.groups, groupID)
	}
	return g.partition, recs, per, nil
}

// DeleteOffsets handles an OffsetDelete (Machine.DeleteOffsets) and appends the tombstones
// with acks=all; a failed write is the whole request's error (the offsets stay gone from
// memory, and come back if the partition is loaded again before a retry succeeds).
func (c *Coordinator) DeleteOffsets(ctx context.Context, groupID string, tps []TP) (map[TP]error, error) {
	var wr *write
	var per map[TP]error
	var err error
	c.call(func(m *Machine, _ int64) {
		var p int32
		var recs []Record
		if p, recs, per, err = m.DeleteOffsets(groupID, slices.Clone(tps)); err == nil && len(recs) > 0 {
			wr, err = c.appendLocked(p, recs)
		}
	})
	if err != nil {
		return nil, commitError(err)
	}
	if wr == nil {
		return per, nil
	}
	ch := make(chan error, 1)
	c.await(wr, func(_ int64, err error) { ch <- commitError(err) })
	select {
	case err := <-ch:
		if err != nil {
			return nil, err
		}
		return per, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
