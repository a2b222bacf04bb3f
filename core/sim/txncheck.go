package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/core/records"
)

// The read_committed side of the transactions' invariants (txns.go).

// rcRecord is a record a read_committed read delivered.
type rcRecord struct {
	off   int64
	value string
}

// readCommitted fetches partition p from broker n at from as a read_committed consumer
// (isolation_level 1) and applies the response's aborted transactions as Kafka's consumer
// does (an aborted producer's transactional batches are skipped from its transaction's first
// offset to its ABORT marker). It returns the records delivered, the offset to fetch next and
// the LSO the read was bounded by (the response's, and never above the replica's now). A
// record at or past that LSO fails the seed.
func (s *Sim) readCommitted(n *node, p int32, from int64) (got []rcRecord, next, lso int64, err error) {
	req := &broker.FetchRequest{ReplicaID: -1, MaxBytes: 1 << 20, IsolationLevel: 1, Partitions: []broker.FetchPartition{{
		Topic: topic, Partition: p, FetchOffset: from, CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}}}
	n.b.Fetch(context.Background(), req)
	fp := &req.Partitions[0]
	defer fp.Records.Release()
	if fp.Err != nil {
		return nil, from, -1, fp.Err
	}
	lso = fp.LastStableOffset
	if r, ok := n.b.Replica(topic, p); ok {
		lso = min(lso, r.LSO())
	}
	data, err := fp.Records.ReadAll(nil)
	if err != nil {
		return nil, from, lso, fmt.Errorf("read_committed read from broker %d: %w", n.id, err)
	}
	aborted := slices.SortedFunc(slices.Values(fp.AbortedTransactions), func(a, b partition.AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	abortedPIDs := map[int64]bool{}
	next = from
	err = records.Split(data, func(batch []byte, h records.Header) error {
		for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
			abortedPIDs[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if h.BaseOffset >= lso {
			return fmt.Errorf("a read_committed fetch of p%d at %d from broker %d returned a batch at %d, at or past the LSO %d", p, from, n.id, h.BaseOffset, lso)
		}
		next = max(next, h.NextOffset())
		if h.IsControl() {
			if m, err := records.ParseMarker(batch); err == nil && !m.Commit() {
				delete(abortedPIDs, h.ProducerID)
			}
			return nil
		}
		if h.IsTransactional() && abortedPIDs[h.ProducerID] {
			return nil
		}
		return records.ForEachRecord(batch, func(off, _ int64, _, v []byte) error {
			if off >= lso {
				return fmt.Errorf("a read_committed fetch of p%d at %d from broker %d returned record %s at offset %d, at or past the LSO %d", p, from, n.id, v, off, lso)
			}
			if off >= from {
				got = append(got, rcRecord{off, string(v)})
			}
			return nil
		})
	})
	return got, next, lso, err
}

// consumeCommitted reads one partition from its leader as a read_committed consumer and
// checks what it delivers: no record of a transaction its producer did not ask to commit,
// and each transaction's records followed by its producer's COMMIT marker below the HW in
// the leader's log (decided, and committed).
func (s *Sim) consumeCommitted() {
	ts := s.txns
	p := int32(s.rng.IntN(s.nparts))
	st, ok := s.ctrl.Partition(topic, p)
	if !ok || st.Leader == controller.NoLeader {
		return
	}
	n := s.nodes[st.Leader]
	if !n.up() || n.paused {
		return
	}
	from := ts.rcPos[p]
	got, next, lso, err := s.readCommitted(n, p, from)
	switch {
	case errors.Is(err, kerr.OffsetOutOfRange):
		if r, ok := n.b.Replica(topic, p); ok && r.LogStart() > from {
			ts.rcPos[p] = r.LogStart()
		}
		return
	case err != nil && (errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.KafkaStorageError) || errors.Is(err, kerr.UnknownTopicOrPartition)):
		return
	case err != nil:
		s.fail("%v", err)
		return
	}
	ts.rcPos[p] = next
	s.stats.Txns.ReadCommitted++
	first := map[int]int64{} // transaction -> offset of its first record in this read
	for _, rc := range got {
		if rc.value == "" || rc.value[0] != 'x' {
			continue
		}
		s.stats.Txns.RecordsRead++
		t := ts.txns[ts.ofValue[rc.value]]
		if !t.commitReq {
			if s.markerLost(p, t.pid, rc.off) {
				// The marker that ended it here is gone in an excused loss: the producer's
				// next marker on p ends it instead, as in Kafka (a new epoch's batch does
				// not end the transaction a lost marker left open).
				continue
			}
			s.fail("a read_committed read of p%d from broker %d (LSO %d) returned record %s at offset %d of transaction %d (%s, producer %d epoch %d), which its producer never asked to commit",
				p, n.id, lso, rc.value, rc.off, t.num, t.tid, t.pid, t.epoch)
			return
		}
		if _, ok := first[t.num]; !ok {
			first[t.num] = rc.off
		}
	}
	if len(first) == 0 {
		return
	}
	r, ok := n.b.Replica(topic, p)
	if !ok {
		return
	}
	// A record below the LSO is decided: its producer's next marker is below the HW (the
	// LSO may be lower: a later transaction may hold it).
	lo, hw := slices.Min(slices.Collect(maps.Values(first))), r.HW()
	raw, err := rawLog(r, lo, hw)
	if err != nil {
		s.fail("p%d: reading leader %d [%d, %d): %v", p, n.id, lo, hw, err)
		return
	}
	type mark struct {
		off    int64
		pid    int64
		commit bool
	}
	var marks []mark
	_ = records.Split(raw, func(batch []byte, h records.Header) error {
		if h.IsControl() {
			m, err := records.ParseMarker(batch)
			marks = append(marks, mark{h.BaseOffset, h.ProducerID, err == nil && m.Commit()})
		}
		return nil
	})
	for _, num := range slices.Sorted(maps.Keys(first)) {
		t, off := ts.txns[num], first[num]
		i := slices.IndexFunc(marks, func(m mark) bool { return m.pid == t.pid && m.off > off })
		switch {
		case i < 0:
			s.fail("a read_committed read of p%d from broker %d returned transaction %d (%s, producer %d) from offset %d, but no marker of its producer follows below the HW %d (LSO %d): undecided",
				p, n.id, num, t.tid, t.pid, off, hw, lso)
			return
		case !marks[i].commit:
			s.fail("a read_committed read of p%d from broker %d returned transaction %d (%s, producer %d) from offset %d, which the ABORT marker at %d ended",
				p, n.id, num, t.tid, t.pid, off, marks[i].off)
			return
		}
	}
	s.tracef("read_committed consumer read p%d from broker %d up to %d (LSO %d, %d transactions)", p, n.id, next, lso, len(first))
}

// markerLost reports whether a marker of producer pid acknowledged on p past offset off is
// excused: lost in a failure the excuse rules allow (a crash of its last live holder). The
// transaction it ended on p has no outcome there any more: the producer's next marker on p
// decides its records, whatever the coordinator decided (partitions lossy, as p is then,
// are left out of checkTxnsFinal for the same reason).
func (s *Sim) markerLost(p int32, pid int64, off int64) bool {
	prefix := "M" + strconv.FormatInt(pid, 10) + "."
	for k, e := range s.acked {
		if k.p == p && k.off > off && strings.HasPrefix(e.value, prefix) && s.excused(e) {
			return true
		}
	}
	return false
}

// checkTxnsFinal checks, after the faults healed and the cluster converged (every
// transaction decided, LSO = HW), a read_committed read of every partition from its log
// start: each transaction is visible whole or not at all on every partition it wrote to, a
// transaction whose commit was acknowledged is visible, and one its producer did not ask to
// commit is not. Partitions where a failure excused a loss (lossy) are left out.
func (s *Sim) checkTxnsFinal() {
	ts := s.txns
	if ts == nil || s.err != nil {
		return
	}
	visible := map[string]bool{}
	present := map[int]map[int32][]string{} // transaction -> partition -> values in the log
	start := map[int32]int64{}
	for p := int32(0); p < int32(s.nparts); p++ {
		if s.lossy[p] {
			continue
		}
		st, _ := s.ctrl.Partition(topic, p)
		n := s.nodes[st.Leader]
		r, ok := n.b.Replica(topic, p)
		if !ok {
			continue
		}
		start[p] = r.LogStart()
		vals, err := readLog(r, r.LogStart(), r.LEO())
		if err != nil {
			s.fail("p%d: reading leader %d: %v", p, n.id, err)
			return
		}
		for _, off := range slices.Sorted(maps.Keys(vals)) {
			if v := vals[off]; v[0] == 'x' {
				t := ts.ofValue[v]
				if present[t] == nil {
					present[t] = map[int32][]string{}
				}
				present[t][p] = append(present[t][p], v)
			}
		}
		for from := r.LogStart(); from < r.LSO(); {
			got, next, _, err := s.readCommitted(n, p, from)
			if err != nil {
				s.fail("p%d: read_committed read from leader %d at %d: %v", p, n.id, from, err)
				return
			}
			for _, rc := range got {
				visible[rc.value] = true
			}
			if next <= from {
				break
			}
			from = next
		}
	}
	for _, t := range ts.txns {
		seen, hidden := []string{}, []string{}
		for _, p := range slices.Sorted(maps.Keys(present[t.num])) {
			for _, v := range present[t.num][p] {
				if visible[v] {
					seen = append(seen, fmt.Sprintf("%s@p%d", v, p))
				} else {
					hidden = append(hidden, fmt.Sprintf("%s@p%d", v, p))
				}
			}
		}
		switch {
		case len(seen) > 0 && !t.commitReq:
			s.fail("transaction %d (%s, producer %d epoch %d) is visible to read_committed (%v) though its producer never asked to commit it", t.num, t.tid, t.pid, t.epoch, seen)
		case len(seen) > 0 && len(hidden) > 0:
			s.fail("transaction %d (%s, producer %d epoch %d) is partly visible to read_committed: %v visible, %v not", t.num, t.tid, t.pid, t.epoch, seen, hidden)
		case len(seen) > 0 && t.abortAck:
			s.fail("transaction %d (%s) was aborted (EndTxn answered) but is visible to read_committed: %v", t.num, t.tid, seen)
		case t.commitAck:
			for _, p := range slices.Sorted(maps.Keys(t.values)) {
				if _, checked := start[p]; !checked {
					continue
				}
				for _, v := range t.values[p] {
					if !visible[v] && !s.excused(entry{v, valueNum(v)}) && !s.retentionUsed {
						s.fail("transaction %d (%s, producer %d) was committed (EndTxn answered) but its record %s on p%d is not visible to read_committed", t.num, t.tid, t.pid, v, p)
						return
					}
				}
			}
		}
		if s.err != nil {
			return
		}
	}
	s.tracef("transactions: %+v", s.stats.Txns)
}
