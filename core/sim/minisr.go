package sim

import (
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// heldLog is what one replica holds: its log start (inclusive) and LEO (exclusive), and the
// record values of (part of) [log start, LEO) by offset; nil values when the log could not be
// read (its log directory failed: the page cache still has what it wrote).
type heldLog struct {
	start, leo int64
	vals       map[int64]string
}

// holds reports whether h holds the records values at base..: its LEO is past them and it
// has each at its offset, those below its log start excepted (retention passed them); of an
// unreadable log, only the LEO is known.
func (h heldLog) holds(base int64, values []string) bool {
	last := base + int64(len(values)) - 1
	if h.leo <= last {
		return false
	}
	if h.vals == nil {
		return true
	}
	for off := max(base, h.start); off <= last; off++ {
		if h.vals[off] != values[off-base] {
			return false
		}
	}
	return true
}

// snapshotHeld reads what every replica of broker n holds now (as a kill or a crash takes it
// down).
func (s *Sim) snapshotHeld(n *node) map[int32]heldLog {
	out := map[int32]heldLog{}
	offline := n.b.LogDirOffline() != nil
	for p := int32(0); p < int32(s.nparts); p++ {
		r, ok := n.b.Replica(topic, p)
		if offline {
			// A failed log directory is not read through the broker: what its segment
			// files hold stays on the disk.
			if h, found := diskHeld(n.fs, fmt.Sprintf("/broker-%d/%s-%d", n.id, topic, p)); found {
				out[p] = h
			}
			continue
		}
		if !ok {
			continue
		}
		vals, err := readLog(r, r.LogStart(), r.LEO())
		if err != nil || vals == nil {
			vals = nil // unreadable (a failed log directory)
		}
		out[p] = heldLog{start: r.LogStart(), leo: r.LEO(), vals: vals}
	}
	return out
}

// goingDown records what broker n holds as it goes down (crash: a power loss), for
// checkMinISR: a killed broker keeps it (the page cache survives), a crashed one held it
// until the crash (every crash is kept: values are unique, so a batch found in one was held
// after its append).
func (s *Sim) goingDown(n *node, crash bool) {
	h := s.snapshotHeld(n)
	n.downHeld = h
	if crash {
		n.crashHeld = append(n.crashHeld, h)
	}
}

// checkMinISR checks the min.insync.replicas accounting of the acks=all batch of pp that its
// leader acknowledged just now, at base: at least the effective min.insync.replicas =
// min(min.insync.replicas, replication factor) replicas held it when it was acknowledged. A
// replica holds it if its log has the batch's records at their offsets, or, while it is
// down, had them when it went down (a kill keeps the page cache), or had them at one of its
// crashes: a leader may count a follower's fetch from before a crash it has not heard of
// (even across a restart and a second crash), and the crash is the failure that excuses the
// copy lost. A leader whose term has ended since the append answers from that term's HW (a
// handler that looks at the wait late): it held the batch then, as its HW cannot pass its
// own LEO, and may have truncated it as a follower since; it counts, the followers are
// checked as they are now.
func (s *Sim) checkMinISR(pp *pendingProduce, base int64) {
	leader, p, values := pp.n, pp.parts[0].Partition, pp.values
	st, ok := s.ctrl.Partition(topic, p)
	if !ok || len(values) == 0 {
		return
	}
	want := min(s.o.MinISR, len(st.Replicas))
	last := base + int64(len(values)) - 1
	var holders []int32
	for _, id := range st.Replicas {
		m := s.nodes[id]
		ok := false
		switch {
		case m.up() && m.b.LogDirOffline() != nil:
			// Its log directory failed: the data stays on its disk, unread by the broker.
			h, _ := diskHeld(m.fs, fmt.Sprintf("/broker-%d/%s-%d", id, topic, p))
			ok = h.holds(base, values)
		case m.up():
			if r, found := m.b.Replica(topic, p); found && r.LEO() > last {
				from := max(base, r.LogStart())
				vals, err := readLog(r, from, last+1)
				if err != nil {
					vals = nil // unreadable (a failed log directory)
				}
				ok = heldLog{start: from, leo: r.LEO(), vals: vals}.holds(base, values)
			}
		case m.downHeld != nil:
			ok = m.downHeld[p].holds(base, values)
		}
		for _, c := range m.crashHeld {
			ok = ok || c[p].holds(base, values)
		}
		if m == leader && !ok {
			r, found := m.b.Replica(topic, p)
			ok = !found || !r.IsLeader() || r.LeaderEpoch() != pp.epoch
		}
		if ok {
			holders = append(holders, id)
		}
	}
	if len(holders) < want {
		var isr []int32
		if lr, found := leader.b.Replica(topic, p); found {
			isr = lr.ISR()
		}
		s.fail("p%d: leader %d acknowledged the acks=all batch %d..%d (%s..) held by %d replicas %v, below the effective min.insync.replicas %d (replicas %v, controller ISR %v, leader's ISR %v)",
			p, leader.id, base, last, values[0], len(holders), holders, want, st.Replicas, st.ISR, isr)
	}
}

// diskHeld reads the records of a replica directory's segment files as they are on fs now
// (page cache included), up to the first batch that does not read whole.
func diskHeld(fs *vfs.MemFS, dir string) (heldLog, bool) {
	c := fs.Clone() // no injector: a full disk does not keep it from being read
	ents, err := c.ReadDir(dir)
	if err != nil {
		return heldLog{}, false
	}
	h := heldLog{start: -1, vals: map[int64]string{}}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		f, err := c.OpenFile(path.Join(dir, e.Name()), os.O_RDONLY, 0)
		if err != nil {
			continue
		}
		var raw []byte
		if st, err := f.Stat(); err == nil {
			raw = make([]byte, st.Size())
			n, _ := f.ReadAt(raw, 0)
			raw = raw[:n]
		}
		f.Close()
		_ = records.Split(raw, func(batch []byte, _ records.Header) error {
			return records.ForEachRecord(batch, func(o, _ int64, _, v []byte) error {
				h.vals[o] = string(v)
				if h.start < 0 || o < h.start {
					h.start = o
				}
				h.leo = max(h.leo, o+1)
				return nil
			})
		})
	}
	if h.start < 0 {
		h.start = 0
	}
	return h, true
}
