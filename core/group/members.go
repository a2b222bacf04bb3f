package group

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Heartbeat handles a Heartbeat (Kafka's handleHeartbeat): the member's session is renewed;
// REBALANCE_IN_PROGRESS tells it to rejoin.
func (m *Machine) Heartbeat(now int64, groupID, memberID, instanceID string, generation int32) error {
	if err := m.check(groupID); err != nil {
		return err
	}
	g := m.groups[groupID]
	if g == nil {
		return kerr.UnknownMemberID
	}
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if g.state == Empty {
		return kerr.UnknownMemberID
	}
	mb, err := g.validateMember(memberID, instanceID)
	if err != nil {
		return err
	}
	if generation != g.generation {
		return kerr.IllegalGeneration
	}
	mb.lastHeartbeat = now
	if g.state == PreparingRebalance {
		return kerr.RebalanceInProgress
	}
	return nil
}

// Leave handles a LeaveGroup (Kafka's handleLeaveGroup) for each member: top is a
// group-level error (then per is nil); per[i] answers members[i]. A member named only by
// its group.instance.id is found through it.
func (m *Machine) Leave(now int64, groupID string, members []LeaveMember) (top error, per []error) {
	if err := m.check(groupID); err != nil {
		return err, nil
	}
	g := m.groups[groupID]
	per = make([]error, len(members))
	if g == nil {
		for i := range per {
			per[i] = kerr.UnknownMemberID
		}
		return nil, per
	}
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable, nil
	}
	for i, lm := range members {
		id := lm.MemberID
		if id == "" && lm.InstanceID != "" {
			cur, ok := g.static[lm.InstanceID]
			if !ok {
				per[i] = kerr.UnknownMemberID
				continue
			}
			id = cur
		}
		if _, ok := g.pending[id]; ok {
			delete(g.pending, id)
			m.tryCompleteJoin(now, g)
			continue
		}
		mb, err := g.validateMember(id, lm.InstanceID)
		if err != nil {
			per[i] = err
			continue
		}
		m.removeMember(now, g, mb, kerr.UnknownMemberID)
	}
	return nil, per
}

// CheckCommit validates the group side of an OffsetCommit (Kafka's handleCommitOffsets):
// a group unknown here accepts commits of generation -1 only (a client that manages its own
// partitions), and then exists as an Empty group; a member commits in the current generation
// while the group is Stable or PreparingRebalance (so that a rebalance listener may commit).
// On nil the caller writes the offsets and calls CommitStored.
func (m *Machine) CheckCommit(now int64, req CommitRequest) error {
	if err := m.check(req.Group); err != nil {
		return err
	}
	g := m.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 {
			return kerr.IllegalGeneration
		}
		m.groups[req.Group] = newGroup(req.Group, m.Partition(req.Group))
		return nil
	}
	switch {
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable
	case req.Generation < 0 && g.state == Empty:
		return nil
	case g.state == CompletingRebalance:
		return kerr.RebalanceInProgress
	}
	mb, err := g.validateMember(req.MemberID, req.InstanceID)
	if err != nil {
		return err
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration
	}
	mb.lastHeartbeat = now
	return nil
}

// OffsetRecords returns the records of an offset commit.
func OffsetRecords(groupID string, offs map[TP]Committed) []Record {
	tps := slices.SortedFunc(mapsKeys(offs), func(a, b TP) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	out := make([]Record, 0, len(tps))
	for _, tp := range tps {
		out = append(out, Record{Key: OffsetKey(groupID, tp), Value: OffsetValue(offs[tp])})
	}
	return out
}

// CommitPending records that offs were appended for groupID and wait for acks=all (after
// CheckCommit, under the same hold of the driver's lock as the append): until CommitStored,
// those partitions' offsets do not expire and the group is not removed.
func (m *Machine) CommitPending(groupID string, offs map[TP]Committed) {
	g := m.groups[groupID]
	if g == nil {
		return
	}
	for tp := range offs {
		g.pendingCommits[tp]++
	}
}

// CommitStored applies committed offsets after their records were appended at log offsets
// [baseOffset, baseOffset+len) in OffsetRecords order and acknowledged (err nil; otherwise
// it only ends their CommitPending): a later record of the same partition (by log offset) is
// never replaced by an earlier one.
func (m *Machine) CommitStored(groupID string, offs map[TP]Committed, baseOffset int64, err error) {
	g := m.groups[groupID]
	if g == nil {
		return
	}
	for tp := range offs {
		if n := g.pendingCommits[tp]; n > 1 {
			g.pendingCommits[tp] = n - 1
		} else {
			delete(g.pendingCommits, tp)
		}
	}
	if err != nil || g.state == Dead {
		return
	}
	recs := OffsetRecords(groupID, offs) // same order as written
	for i, r := range recs {
		d, err := DecodeRecord(r.Key, r.Value)
		if err != nil {
			continue
		}
		c := offs[d.TP]
		c.logOffset = baseOffset + int64(i)
		if old, ok := g.offsets[d.TP]; ok && old.logOffset > c.logOffset {
			continue
		}
		g.offsets[d.TP] = c
	}
}

// Committed returns the group's committed offsets for tps (all of them when tps is nil).
// A partition without a commit is absent from the map.
func (m *Machine) Committed(groupID string, tps []TP) (map[TP]Committed, error) {
	if err := m.check(groupID); err != nil {
		return nil, err
	}
	out := map[TP]Committed{}
	g := m.groups[groupID]
	if g == nil {
		return out, nil
	}
	if tps == nil {
		for tp, c := range g.offsets {
			out[tp] = c
		}
		return out, nil
	}
	for _, tp := range tps {
		if c, ok := g.offsets[tp]; ok {
			out[tp] = c
		}
	}
	return out, nil
}

// Describe answers DescribeGroups for one group. A group unknown here is reported Dead with
// no error, as Kafka does.
func (m *Machine) Describe(groupID string) (Description, error) {
	if err := m.check(groupID); err != nil {
		return Description{Group: groupID}, err
	}
	g := m.groups[groupID]
	if g == nil {
		return Description{Group: groupID, State: Dead}, nil
	}
	d := Description{Group: g.id, State: g.state, ProtocolType: g.protocolType}
	if g.state == Stable {
		d.Protocol = g.protocol
	}
	for _, id := range g.order {
		mb := g.members[id]
		md := MemberDescription{MemberID: mb.id, InstanceID: mb.instanceID, ClientID: mb.clientID, ClientHost: mb.clientHost}
		if g.state == Stable {
			md.Metadata, md.Assignment = mb.metadataFor(g.protocol), mb.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d, nil
}

// List answers ListGroups: every group held on a loaded partition, sorted by id.
func (m *Machine) List() []Listing {
	var out []Listing
	for _, id := range slices.Sorted(mapsKeys(m.groups)) {
		g := m.groups[id]
		if !m.owned[g.partition] || g.state == Dead {
			continue
		}
		out = append(out, Listing{Group: id, ProtocolType: g.protocolType, State: g.state})
	}
	return out
}

// Delete handles DeleteGroups for one group (Kafka's handleDeleteGroups): only an Empty group
// may be deleted (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND when unknown). The group is
// gone at once; the returned tombstones (its metadata and every committed offset) are for
// the driver to append.
func (m *Machine) Delete(groupID string) (int32, []Record, error) {
	if err := m.check(groupID); err != nil {
		return 0, nil, err
	}
	g := m.groups[groupID]
	switch {
	case g == nil || g.state == Dead:
		return 0, nil, fmt.Errorf("group %q: %w", groupID, kerr.GroupIDNotFound)
	case g.state != Empty:
		return 0, nil, fmt.Errorf("group %q is %v with %d members: %w", groupID, g.state, len(g.members), kerr.NonEmptyGroup)
	}
	recs := []Record{{Key: GroupKey(groupID)}}
	for _, r := range OffsetRecords(groupID, g.offsets) {
		recs = append(recs, Record{Key: r.Key})
	}
	g.state = Dead
	delete(m.groups, groupID)
	return g.partition, recs, nil
}
