package sim

import "slices"

// The excuse rules: which acknowledged (acks=all) or consumed records a run may lose.
//
// Only a crash (a power loss: the page cache is gone) loses data; a kill, a pause, a cut, a
// full disk or a cluster restart (kill -9 of every broker) lose nothing. A record's live
// holders, at a given moment, are the members of the partition's ISR as the controller has it
// (the replicas a clean election may choose) that run, are not paused, reach the controller,
// have their log directory online, and hold the record at its offset in their log.
//
//  1. A crash of broker X excuses exactly the records that have no live holder other than X
//     (they were held only by X and by replicas that already crashed or are out of service),
//     among those acknowledged, consumed, or appended and still waiting for acks=all (a
//     leader may yet count a fetch X sent before its crash and acknowledge them).
//  2. While a crashed broker has not caught up (crashPending: the cluster was not fully in
//     sync since a crash), a further failure of the brokers F (a kill, a pause, a cut from the
//     controller, a full disk, a cluster restart) excuses the records with no live holder
//     outside F: a replica that lost them in the crash may now be elected (it is still in the
//     ISR, or is its last member).
//  3. Nothing else is excused: a record with a live holder at every crash and every such
//     failure must be found at its offset at the end (or be below a log start retention
//     moved). With flush.messages=1 (fsyncAll) every record is fsynced before it is
//     acknowledged or read, so a crash loses nothing and no rule applies.
//  4. A partition where some record was excused, or left with no live holder at all, is
//     lossy: there an idempotent producer may meet OUT_OF_ORDER_SEQUENCE_NUMBER, a record may
//     be written twice, and the operator may elect an offline partition's leader uncleanly.

// failure notes a fault that takes the brokers fail out of service (rule 2).
func (s *Sim) failure(what string, fail ...int32) {
	if !s.crashPending {
		return
	}
	s.excuse(what+" while a crashed broker catches up", fail)
}

// excuse excuses, at a failure of the brokers fail, the tracked records without a live holder
// outside fail (rules 1 and 2), and marks lossy the partitions that had one or had no live
// holder at all. It runs before the failure takes effect.
func (s *Sim) excuse(what string, fail []int32) {
	n := 0
	var parts []int32
	for p := int32(0); p < int32(s.nparts); p++ {
		st, ok := s.ctrl.Partition(topic, p)
		if !ok {
			continue
		}
		var held []map[int64]string
		for _, id := range st.ISR {
			m := s.nodes[id]
			if slices.Contains(fail, id) || !m.up() || m.paused || m.ctrlCut || m.diskFull || m.b.LogDirOffline() != nil {
				continue
			}
			r, ok := m.b.Replica(topic, p)
			if !ok {
				continue
			}
			vals, err := readLog(r, r.LogStart(), r.LEO())
			if err != nil {
				s.fail("p%d: reading broker %d: %v", p, id, err)
				return
			}
			held = append(held, vals)
		}
		k := 0
		unheld := func(at key, e entry) {
			if at.p == p && !s.excusedNums[e.num] && !slices.ContainsFunc(held, func(v map[int64]string) bool { return v[at.off] == e.value }) {
				s.excusedNums[e.num] = true
				k++
			}
		}
		for _, m := range []map[key]entry{s.acked, s.consumed} {
			for at, e := range m {
				unheld(at, e)
			}
		}
		for _, a := range s.acking { // acknowledged, the answer not delivered yet
			unheld(a.at, a.e)
		}
		// Appended and waiting for acks=all: a leader that has not heard of the failure may
		// still count a fetch the failed broker sent before it (a request in flight, or held
		// by a paused leader), and acknowledge what only the failed broker held.
		for _, pp := range s.pending {
			if res := pp.parts[0]; res.Err == nil && res.BaseOffset >= 0 {
				for i, v := range pp.values {
					unheld(key{res.Partition, res.BaseOffset + int64(i)}, entry{v, valueNum(v)})
				}
			}
		}
		// Markers appended and waiting for acks=all, likewise.
		if s.txns != nil {
			for _, mw := range s.txns.markerWaits {
				for i, mp := range mw.mk.Partitions {
					if mp.Err == nil && mp.Topic == topic && mp.Partition == p && mw.nums[i] != 0 {
						unheld(key{p, mp.BaseOffset}, entry{markerValue(mw.mk.ProducerID, mw.mk.ProducerEpoch, mw.mk.Commit), mw.nums[i]})
					}
				}
			}
		}
		if k > 0 || len(held) == 0 {
			s.lossy[p] = true
			parts = append(parts, p)
		}
		n += k
	}
	if len(parts) > 0 {
		s.stats.Correlated++
		s.tracef("%s: %d records held by no live ISR member outside %v may be lost (lossy partitions %v)", what, n, fail, parts)
	}
}

// recordAck records e acknowledged at k (checkDurability then looks for it there) and reports
// whether that is consistent: another record acknowledged at k before fails the seed unless
// a failure excused losing one of them. An answer may arrive long after its leader decided it
// (its HW passed the batch, and a failure since took the batch from every live holder); such
// an excused answer leaves the record acknowledged at k in place.
func (s *Sim) recordAck(k key, e entry) bool {
	old, dup := s.acked[k]
	switch {
	case !dup || old.value == e.value:
	case s.excused(e):
		return true
	case !s.excused(old):
		s.fail("p%d offset %d acknowledged twice: %s and %s", k.p, k.off, old.value, e.value)
		return false
	}
	s.acked[k] = e
	return true
}

// excused reports whether a failure excuses losing e.
func (s *Sim) excused(e entry) bool { return s.excusedNums[e.num] }

// crashAll is a power loss of every broker's machine at once (only with fsyncAll: everything
// acknowledged is fsynced and survives it), during a cluster restart.
func (s *Sim) crashAll() {
	s.stats.PowerLosses++
	for _, n := range s.nodes {
		if n.up() {
			s.goingDown(n, true)
			if err := n.b.Crash(); err != nil {
				s.fail("crash broker %d: %v", n.id, err)
			}
			n.b = nil
		} else if err := n.fs.Crash(); err != nil {
			s.fail("crash the disk of broker %d: %v", n.id, err)
		}
	}
	s.tracef("power loss of every broker (flush.messages=1: nothing acknowledged may be lost)")
}

// describeFsync names the flush policy of a run, for its trace.
func (s *Sim) describeFsync() string {
	if s.fsyncAll {
		return "flush.messages=1: every append fsynced, crashes excuse nothing"
	}
	return "flush.messages unset: appends stay in the page cache, crashes excuse what only the crashed broker held"
}
