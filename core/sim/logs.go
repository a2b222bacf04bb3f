package sim

import (
	"fmt"
	"strings"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

func (s *Sim) describe() string {
	var b strings.Builder
	for _, bi := range s.ctrl.Brokers() {
		fmt.Fprintf(&b, "broker %d alive=%v epoch=%d; ", bi.ID, bi.Alive, s.ctrl.BrokerEpoch(bi.ID))
	}
	for _, n := range s.nodes {
		if n.up() {
			fmt.Fprintf(&b, "b%d runs epoch %d paused=%v", n.id, n.b.Epoch(), n.paused)
			for _, f := range n.b.Fetchers() {
				fmt.Fprintf(&b, " fetcher(from %d, in flight %v):", f.Source(), n.inflight[f] != 0)
				for _, fp := range f.Partitions() {
					fmt.Fprintf(&b, " p%d %s epoch %d until %d", fp.Partition, fp.State.Phase, fp.State.LeaderEpoch, fp.State.DelayedUntil-s.now)
				}
			}
			b.WriteString("; ")
		}
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		st, _ := s.ctrl.Partition(topic, p)
		fmt.Fprintf(&b, "[%v damaged %v;", st, s.ctrl.Damaged(topic, p))
		for _, n := range s.nodes {
			if !n.up() {
				fmt.Fprintf(&b, " b%d down", n.id)
				continue
			}
			if r, ok := n.b.Replica(topic, p); ok {
				fmt.Fprintf(&b, " b%d leo=%d hw=%d epoch=%d leader=%v isr=%v", n.id, r.LEO(), r.HW(), r.LeaderEpoch(), r.IsLeader(), r.ISR())
			}
		}
		b.WriteString("] ")
	}
	return b.String()
}

type reader interface {
	Read(offset, maxOffset int64, maxBytes int, minOneBatch bool) (log.Slice, error)
}

// rawLog returns the bytes of the whole batches of r in [from, to).
func rawLog(r reader, from, to int64) ([]byte, error) {
	var raw []byte
	for off := from; off < to; {
		sl, err := r.Read(off, to, 1<<20, true)
		if err != nil {
			return nil, err
		}
		if sl.Size == 0 {
			sl.Release()
			break
		}
		raw, err = sl.ReadAll(raw)
		next := sl.NextOffset
		sl.Release()
		if err != nil {
			return nil, err
		}
		off = next
	}
	return raw, nil
}

// readLog returns the record values of r in [from, to) by offset; a control batch's value
// is its marker's (markerValue).
func readLog(r reader, from, to int64) (map[int64]string, error) {
	raw, err := rawLog(r, from, to)
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	err = records.Split(raw, func(batch []byte, h records.Header) error {
		if h.IsControl() {
			out[h.BaseOffset] = markerEntry(batch, h)
			return nil
		}
		return records.ForEachRecord(batch, func(o, _ int64, _, v []byte) error {
			out[o] = string(v)
			return nil
		})
	})
	return out, err
}
