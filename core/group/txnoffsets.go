package group

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/records"
)

// Transactional offset commits (TxnOffsetCommit, KIP-98 / KIP-447): the offsets are written
// to the group's __consumer_offsets partition as a transactional batch of the producer (so
// the partition's LSO and aborted list cover them) and held per producer id, invisible to
// OffsetFetch, until the transaction's marker is written to that partition: COMMIT applies
// them, ABORT drops them (CompleteTxn). A load replays the same way: records of a producer
// wait for its marker; those of transactions still open stay pending.

// TxnCommitRequest is a TxnOffsetCommit: the group side (CommitRequest: generation -1 and
// member "" when the producer does not send them) and the transactional producer.
type TxnCommitRequest struct {
	CommitRequest
	ProducerID    int64
	ProducerEpoch int16
}

// CheckTxnCommit validates the group side of a TxnOffsetCommit (Kafka's
// doTxnCommitOffsets, KIP-447): an unknown group is created Empty; a Dead one is
// COORDINATOR_NOT_AVAILABLE; a fenced group.instance.id FENCED_INSTANCE_ID; a member id
// other than "" that is not in the group UNKNOWN_MEMBER_ID; a generation >= 0 other than the
// group's ILLEGAL_GENERATION.
func (m *Machine) CheckTxnCommit(req TxnCommitRequest) error {
	if err := m.check(req.Group); err != nil {
		return err
	}
	g := m.groups[req.Group]
	if g == nil {
		m.groups[req.Group] = newGroup(req.Group, m.Partition(req.Group))
		return nil
	}
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if req.InstanceID != "" {
		if cur, ok := g.static[req.InstanceID]; ok && cur != req.MemberID {
			return fmt.Errorf("group.instance.id %q belongs to member %s, not %s: %w", req.InstanceID, cur, req.MemberID, kerr.FencedInstanceID)
		}
	}
	if req.MemberID != "" && g.members[req.MemberID] == nil {
		return fmt.Errorf("member %s is not in group %s: %w", req.MemberID, req.Group, kerr.UnknownMemberID)
	}
	if req.Generation >= 0 && req.Generation != g.generation {
		return fmt.Errorf("generation %d, group %s is at %d: %w", req.Generation, req.Group, g.generation, kerr.IllegalGeneration)
	}
	return nil
}

// TxnCommitStored holds offs, written at [baseOffset, ...) in OffsetRecords order, as the
// pending offsets of producer id's transaction in groupID.
func (m *Machine) TxnCommitStored(groupID string, pid int64, offs map[TP]Committed, baseOffset int64) {
	g := m.groups[groupID]
	if g == nil || g.state == Dead {
		return
	}
	if g.txnOffsets == nil {
		g.txnOffsets = map[int64]map[TP]Committed{}
	}
	pend := g.txnOffsets[pid]
	if pend == nil {
		pend = map[TP]Committed{}
		g.txnOffsets[pid] = pend
	}
	for i, r := range OffsetRecords(groupID, offs) {
		d, err := DecodeRecord(r.Key, r.Value)
		if err != nil {
			continue
		}
		c := offs[d.TP]
		c.logOffset = baseOffset + int64(i)
		pend[d.TP] = c
	}
}

// CompleteTxn applies (commit) or drops the pending offsets of producer id in the groups of
// __consumer_offsets partition p: its marker was written there.
func (m *Machine) CompleteTxn(pid int64, commit bool, p int32) {
	for _, g := range m.groups {
		if g.partition != p || g.txnOffsets == nil {
			continue
		}
		pend, ok := g.txnOffsets[pid]
		if !ok {
			continue
		}
		delete(g.txnOffsets, pid)
		if !commit || g.state == Dead {
			continue
		}
		for tp, c := range pend {
			if old, ok := g.offsets[tp]; ok && old.logOffset > c.logOffset {
				continue
			}
			g.offsets[tp] = c
		}
	}
}

// TxnCommit handles a TxnOffsetCommit: the group checks, then offs written as producer
// req.ProducerID's transactional batch with acks=all, then held until the transaction's
// marker. The check and the append are one hold of the lock, as CommitAsync.
func (c *Coordinator) TxnCommit(ctx context.Context, req TxnCommitRequest, offs map[TP]Committed) error {
	var err error
	var wr *write
	c.call(func(m *Machine, _ int64) {
		if err = m.CheckTxnCommit(req); err != nil || len(offs) == 0 {
			return
		}
		wr, err = c.appendTxnLocked(m.Partition(req.Group), req.ProducerID, req.ProducerEpoch, OffsetRecords(req.Group, offs))
	})
	if wr == nil {
		return commitError(err)
	}
	ch := make(chan error, 1)
	c.await(wr, func(base int64, err error) {
		if err == nil {
			c.call(func(m *Machine, _ int64) { m.TxnCommitStored(req.Group, req.ProducerID, offs, base) })
		}
		ch <- commitError(err)
	})
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CompleteTxn applies or drops producer id's pending transactional offsets in the groups of
// __consumer_offsets partitions ps after its COMMIT / ABORT marker was written to them.
func (c *Coordinator) CompleteTxn(pid int64, commit bool, ps []int32) {
	c.call(func(m *Machine, _ int64) {
		for _, p := range ps {
			m.CompleteTxn(pid, commit, p)
		}
	})
}

// appendTxnLocked is appendLocked for a transactional batch of producer pid / epoch
// (partition.AppendCoordinatorTxn: no sequence).
func (c *Coordinator) appendTxnLocked(p int32, pid int64, epoch int16, recs []Record) (*write, error) {
	if err := c.currentLocked(p); err != nil {
		return nil, fmt.Errorf("appending to %s-%d: broker %d no longer leads it in the leader epoch it loaded (%v): %w",
			OffsetsTopic, p, c.b.ID(), err, kerr.NotLeaderForPartition)
	}
	rs := make([]records.Record, len(recs))
	for i, r := range recs {
		rs[i] = records.Record{Key: r.Key, Value: r.Value}
	}
	now := c.now()
	batch := records.AppendTxnBatch(nil, pid, epoch, now, rs)
	parts := []broker.ProducePartition{{Topic: OffsetsTopic, Partition: p, Records: batch, Coordinator: true, InternalTopicsAllowed: true}}
	return &write{parts: parts, w: c.b.ProduceAppend(-1, parts), deadline: now + c.cfg.OffsetsCommitTimeoutMs}, nil
}

// applyTxn stashes a transactional offset record of producer pid until its marker.
func (l *Loaded) applyTxn(pid int64, off int64, key, value []byte) {
	l.Records++
	d, err := DecodeRecord(key, value)
	if err != nil || !d.IsOffset || d.Tombstone {
		l.Skipped++
		return
	}
	byPID := l.TxnOffsets[d.Group]
	if byPID == nil {
		byPID = map[int64]map[TP]Committed{}
		l.TxnOffsets[d.Group] = byPID
	}
	offs := byPID[pid]
	if offs == nil {
		offs = map[TP]Committed{}
		byPID[pid] = offs
	}
	c := d.Offset
	c.logOffset = off
	offs[d.TP] = c
}

// applyMarker applies (commit) or drops producer pid's stashed offsets.
func (l *Loaded) applyMarker(pid int64, commit bool) {
	for g, byPID := range l.TxnOffsets {
		offs, ok := byPID[pid]
		if !ok {
			continue
		}
		delete(byPID, pid)
		if len(byPID) == 0 {
			delete(l.TxnOffsets, g)
		}
		if !commit {
			continue
		}
		dst := l.Offsets[g]
		if dst == nil {
			dst = map[TP]Committed{}
			l.Offsets[g] = dst
		}
		for tp, c := range offs {
			if old, ok := dst[tp]; ok && old.logOffset > c.logOffset {
				continue
			}
			dst[tp] = c
		}
	}
}

// PendingTxnOffsets returns the partitions of groupID with offsets committed in a transaction
// not decided yet (OffsetFetch require_stable answers them UNSTABLE_OFFSET_COMMIT).
func (c *Coordinator) PendingTxnOffsets(groupID string) map[TP]bool {
	var out map[TP]bool
	c.call(func(m *Machine, _ int64) {
		g := m.groups[groupID]
		if g == nil {
			return
		}
		for _, offs := range g.txnOffsets {
			for tp := range offs {
				if out == nil {
					out = map[TP]bool{}
				}
				out[tp] = true
			}
		}
	})
	return out
}
