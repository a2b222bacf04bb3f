package sim

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/partition"
)

// compared is what an ISR member's byte-for-byte comparison with its leader saw: the two
// replicas, their LEO change counts and log starts, and the HW.
type compared struct {
	leader     *partition.Replica
	lseq       uint64
	lstart     int64
	member     *partition.Replica
	mseq       uint64
	mstart, hw int64
}

// check verifies the invariants after a step.
func (s *Sim) check() {
	if s.err != nil {
		return
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		st, ok := s.ctrl.Partition(topic, p)
		if !ok {
			s.fail("partition %d is gone from the metadata", p)
			return
		}
		if desc := fmt.Sprintf("leader %d epoch %d isr %v", st.Leader, st.LeaderEpoch, st.ISR); desc != s.lastState[p] {
			s.lastState[p] = desc
			s.tracef("controller: p%d %s (partition epoch %d)", p, desc, st.PartitionEpoch)
		}
		for _, n := range s.nodes {
			if !n.up() {
				continue
			}
			if r, ok := n.b.Replica(topic, p); ok && (r.HW() > r.LEO() || r.LogStart() > r.HW()) {
				s.fail("broker %d p%d: log start %d, HW %d, LEO %d: want log start <= HW <= LEO", n.id, p, r.LogStart(), r.HW(), r.LEO())
				return
			}
		}
		if st.Leader == controller.NoLeader {
			continue
		}
		ln := s.nodes[st.Leader]
		if !ln.up() || ln.b.LogDirOffline() != nil {
			continue // (a leader whose log dir failed while the metadata log refused its fencing)
		}
		lr, ok := ln.b.Replica(topic, p)
		if !ok || !lr.IsLeader() || lr.LeaderEpoch() != st.LeaderEpoch {
			continue // the leader has not applied its election yet
		}
		hw := lr.HW()
		tk := termKey{p, ln.id, ln.inc, st.LeaderEpoch}
		if last, seen := s.hwSeen[tk]; seen && hw < last {
			s.fail("p%d: leader %d HW went back from %d to %d in epoch %d", p, ln.id, last, hw, st.LeaderEpoch)
			return
		}
		s.hwSeen[tk] = hw
		var want []byte // the leader's [log start, HW), read when a member needs comparing
		wantRead := false
		for _, m := range s.nodes {
			if m == ln || !m.up() {
				continue
			}
			mr, ok := m.b.Replica(topic, p)
			if !ok {
				continue
			}
			// A follower's HW is the leader's from its last response, raised to its own log
			// start if the leader's lags behind it (Kafka's updateHighWatermark).
			if s.synced[syncKey{m.id, m.inc, p}] == st.LeaderEpoch && mr.LeaderEpoch() == st.LeaderEpoch && mr.HW() > max(hw, mr.LogStart()) {
				s.fail("p%d: follower %d HW %d > leader %d HW %d in epoch %d (follower log start %d)", p, m.id, mr.HW(), ln.id, hw, st.LeaderEpoch, mr.LogStart())
				return
			}
			// Every member of the controller's ISR (elections choose from it), whether or not
			// the leader has heard of the change that added it yet: an expansion in flight
			// is in the leader's maximal ISR, so the HW cannot pass the new member's LEO.
			if !slices.Contains(st.ISR, m.id) {
				continue
			}
			if mr.LEO() < hw {
				s.fail("p%d: ISR member %d has LEO %d < leader %d HW %d (ISR %v)", p, m.id, mr.LEO(), ln.id, hw, st.ISR)
				return
			}
			if m.b.LogDirOffline() != nil {
				continue // (a member whose log dir failed while its fencing is refused: LEO checked above)
			}
			// Compared from the later of the two log starts: retention cuts each replica's
			// segments by its own HW, and a follower's log start follows the leader's.
			// A comparison that passed is not made again while neither log changed: the
			// same replicas, no append or truncation since (LEOSeq counts both), the same
			// log starts and HW.
			ck := compared{lr, lr.LEOSeq(), lr.LogStart(), mr, mr.LEOSeq(), mr.LogStart(), hw}
			ckKey := syncKey{m.id, m.inc, p}
			if s.comparedOK[ckKey] == ck {
				continue
			}
			var err error
			if !wantRead {
				if want, err = rawLog(lr, lr.LogStart(), hw); err != nil {
					s.fail("p%d: reading leader %d [%d, %d): %v", p, ln.id, lr.LogStart(), hw, err)
					return
				}
				wantRead = true
			}
			from, want := lr.LogStart(), want
			if mr.LogStart() > from {
				from = mr.LogStart()
				if want, err = rawLog(lr, from, hw); err != nil {
					s.fail("p%d: reading leader %d [%d, %d): %v", p, ln.id, from, hw, err)
					return
				}
			}
			got, err := rawLog(mr, from, hw)
			if err != nil {
				s.fail("p%d: reading ISR member %d [%d, %d): %v", p, m.id, from, hw, err)
				return
			}
			if !bytes.Equal(got, want) {
				s.fail("p%d: ISR member %d (log start %d) does not hold leader %d's [%d, HW %d) byte for byte (leader log start %d)", p, m.id, mr.LogStart(), ln.id, from, hw, lr.LogStart())
				return
			}
			s.comparedOK[ckKey] = ck
		}
	}
	s.checkLSO()
	if s.err != nil {
		return
	}
	if s.crashPending && s.crashSafe() {
		s.crashPending = false // the crashed broker is back in every ISR
		s.tracef("the crashed broker has caught up")
	}
	if s.stats.Steps%25 == 0 {
		s.checkDurability(false)
	}
}

// checkDurability checks that every acks=all acknowledged record, and every record a
// consumer read, is in the current leader's log at its offset. final: every partition must
// have a running leader.
func (s *Sim) checkDurability(final bool) {
	// The records to check, in (partition, offset) order, sorted once for every partition.
	sortedKeys := map[string][]key{}
	for what, m := range map[string]map[key]entry{"acknowledged (acks=all)": s.acked, "consumed (read by a consumer)": s.consumed} {
		sortedKeys[what] = slices.SortedFunc(maps.Keys(m), func(a, b key) int { return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.off, b.off)) })
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		st, _ := s.ctrl.Partition(topic, p)
		if st.Leader == controller.NoLeader || !s.nodes[st.Leader].up() || s.nodes[st.Leader].b.LogDirOffline() != nil {
			if final {
				s.fail("p%d has no running leader at the end: %v", p, st)
			}
			continue
		}
		lr, ok := s.nodes[st.Leader].b.Replica(topic, p)
		if !ok || !lr.IsLeader() {
			if final {
				s.fail("p%d: broker %d does not act as leader at the end", p, st.Leader)
			}
			continue
		}
		vals, err := readLog(lr, lr.LogStart(), lr.LEO())
		if err != nil {
			s.fail("p%d: reading leader %d: %v", p, st.Leader, err)
			return
		}
		if final && !s.lossy[p] {
			// Nothing is written twice: plain producers never resend, idempotent ones'
			// retries are deduplicated.
			seen := map[string]int64{}
			for _, off := range slices.Sorted(maps.Keys(vals)) {
				v := vals[off]
				if v[0] == 'M' {
					continue // markers: several of a producer epoch may follow one another
				}
				if prev, dup := seen[v]; dup {
					s.fail("p%d: record %s is in the log twice, at offsets %d and %d", p, v, prev, off)
					return
				}
				seen[v] = off
			}
		}
		for _, c := range []struct {
			what string
			m    map[key]entry
		}{{"acknowledged (acks=all)", s.acked}, {"consumed (read by a consumer)", s.consumed}} {
			what, m := c.what, c.m
			for _, k := range sortedKeys[what] {
				e := m[k]
				if k.p != p || s.excused(e) || (s.retentionUsed && k.off < lr.LogStart()) {
					continue // excused by a failure (excuse.go), or expired by retention
				}
				if got, ok := vals[k.off]; !ok || got != e.value {
					v := e.value
					s.fail("p%d: %s record %s at offset %d is lost: leader %d (epoch %d, log [%d, %d), HW %d) has %q there",
						p, what, v, k.off, st.Leader, st.LeaderEpoch, lr.LogStart(), lr.LEO(), lr.HW(), got)
					return
				}
			}
		}
	}
	s.checkGroups(final)
	if final {
		s.checkTxnsFinal()
	}
}
