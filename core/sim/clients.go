package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/records"
)

type pendingProduce struct {
	n      *node
	inc    int
	w      *broker.ProduceWait
	parts  []broker.ProducePartition
	values []string
	dead   int64
	// checkAt: the request's handler looks at its wait again only from then on (a handler
	// parked behind another partition's wait, or descheduled, while leaderships change).
	checkAt int64
	done    func(broker.ProducePartition) // idempotent producers' own handling (nil: respond)
	// epoch is the leader epoch the batch was appended in (checkMinISR).
	epoch int32
}

// newPending is the acks=all wait of the batch leader n (incarnation inc) has just appended.
func (s *Sim) newPending(n *node, inc int, w *broker.ProduceWait, parts []broker.ProducePartition, values []string, done func(broker.ProducePartition)) *pendingProduce {
	pp := &pendingProduce{n: n, inc: inc, w: w, parts: parts, values: values, dead: s.now + timeoutNs, checkAt: s.parkedUntil(), done: done, epoch: -1}
	if r, ok := n.b.Replica(topic, parts[0].Partition); ok {
		pp.epoch = r.LeaderEpoch()
	}
	return pp
}

// idemProducer is an idempotent producer (acks=all): one batch in flight per partition,
// retried with the same sequence until acknowledged, as Kafka's producer does.
type idemProducer struct {
	pid      int64
	next     map[int32]int32 // next base sequence per partition
	inflight map[int32]*idemBatch
}

type idemBatch struct {
	p       int32
	seq     int32
	values  []string
	blob    []byte // as built: each attempt sends a copy (the leader patches it)
	attempt int
}

// produce sends a batch to the leader the client sees in the metadata: from an idempotent
// producer one time in three, else a plain one with acks 0, 1 or all.
func (s *Sim) produce() {
	if s.rng.IntN(3) == 0 {
		s.produceIdempotent()
		return
	}
	p := int32(s.rng.IntN(s.nparts))
	st, ok := s.ctrl.Partition(topic, p)
	if !ok || st.Leader == controller.NoLeader {
		return
	}
	acks := []int16{-1, -1, -1, 1, 0}[s.rng.IntN(5)]
	nrec := 1 + s.rng.IntN(5)
	values := make([]string, nrec)
	recs := make([]records.Record, nrec)
	for i := range recs {
		s.nextValue++
		values[i] = fmt.Sprintf("v%d", s.nextValue)
		recs[i] = records.Record{Value: []byte(values[i])}
	}
	blob := records.AppendBatch(nil, 0, 0, s.now/int64(time.Millisecond), recs)
	n := s.nodes[st.Leader]
	inc := n.inc
	s.stats.Produced++
	const client = -1
	s.at(s.now+s.delay(client, n.id), func() {
		s.deliver(n, inc, func() {
			parts := []broker.ProducePartition{{Topic: topic, Partition: p, Records: blob}}
			w := n.b.ProduceAppend(acks, parts)
			switch {
			case acks == 0:
			case w == nil:
				s.respond(n, acks, parts, values, nil)
			default:
				s.pending = append(s.pending, s.newPending(n, inc, w, parts, values, nil))
			}
		}, nil)
	})
}

// idemInFlight describes an idempotent batch still in flight, or "".
func (s *Sim) idemInFlight() string {
	for _, ip := range s.idem {
		for p := int32(0); p < int32(s.nparts); p++ {
			if ib := ip.inflight[p]; ib != nil {
				return fmt.Sprintf("producer %d p%d seq %d after %d attempts", ip.pid, p, ib.seq, ib.attempt)
			}
		}
	}
	return ""
}

// produceIdempotent starts a batch of an idempotent producer on a partition it has none in
// flight on.
func (s *Sim) produceIdempotent() {
	ip := s.idem[s.rng.IntN(len(s.idem))]
	p := int32(s.rng.IntN(s.nparts))
	if ip.inflight[p] != nil {
		return
	}
	nrec := 1 + s.rng.IntN(4)
	ib := &idemBatch{p: p, seq: ip.next[p], values: make([]string, nrec)}
	recs := make([]records.Record, nrec)
	for i := range recs {
		s.nextValue++
		ib.values[i] = fmt.Sprintf("i%d", s.nextValue)
		recs[i] = records.Record{Value: []byte(ib.values[i])}
	}
	ib.blob = idempotentBatch(ip.pid, 0, ib.seq, s.now/int64(time.Millisecond), recs)
	ip.inflight[p] = ib
	s.stats.Produced++
	s.sendIdempotent(ip, ib)
}

// sendIdempotent sends one attempt of ib to the leader the client sees; an error or no
// answer within the request timeout makes it send again (same sequence).
func (s *Sim) sendIdempotent(ip *idemProducer, ib *idemBatch) {
	ib.attempt++
	attempt := ib.attempt
	retry := func(why string) {
		if ip.inflight[ib.p] != ib || ib.attempt != attempt {
			return
		}
		s.tracef("idempotent producer %d p%d seq %d: %s, retrying", ip.pid, ib.p, ib.seq, why)
		s.at(s.now+int64(100*time.Millisecond), func() { s.sendIdempotent(ip, ib) })
	}
	s.at(s.now+timeoutNs+int64(time.Second), func() { retry("no answer") })
	st, ok := s.ctrl.Partition(topic, ib.p)
	if !ok || st.Leader == controller.NoLeader {
		return // the timeout retries
	}
	n := s.nodes[st.Leader]
	inc := n.inc
	done := func(res broker.ProducePartition) {
		if ip.inflight[ib.p] != ib || ib.attempt != attempt {
			return // an older attempt's late answer
		}
		switch {
		case res.Err == nil:
			ip.inflight[ib.p] = nil
			ip.next[ib.p] = ib.seq + int32(len(ib.values))
			s.stats.AckedAll++
			for i, v := range ib.values {
				s.recordAck(key{ib.p, res.BaseOffset + int64(i)}, entry{v, valueNum(v)})
			}
			s.tracef("idempotent producer %d p%d seq %d: offsets %d..%d (attempt %d)", ip.pid, ib.p, ib.seq, res.BaseOffset, res.BaseOffset+int64(len(ib.values))-1, attempt)
		case errors.Is(res.Err, kerr.OutOfOrderSequenceNumber) && !s.lossy[ib.p]:
			s.fail("idempotent producer %d p%d seq %d: %v: the broker lost the producer's acknowledged batches", ip.pid, ib.p, ib.seq, res.Err)
		case errors.Is(res.Err, kerr.OutOfOrderSequenceNumber):
			// An excused loss took the producer's acknowledged batches: the error is fatal
			// to it, and the application starts a new producer (a new producer id); the
			// batches it had in flight are abandoned, unacknowledged.
			old := ip.pid
			ip.pid += int64(len(s.idem))
			clear(ip.next)
			clear(ip.inflight)
			s.tracef("idempotent producer %d p%d seq %d: %v after an excused loss: replaced by producer %d", old, ib.p, ib.seq, res.Err, ip.pid)
		default:
			retry(res.Err.Error())
		}
	}
	s.at(s.now+s.delay(-1, n.id), func() {
		s.deliver(n, inc, func() {
			parts := []broker.ProducePartition{{Topic: topic, Partition: ib.p, Records: slices.Clone(ib.blob)}}
			w := n.b.ProduceAppend(-1, parts)
			if w == nil {
				s.respond(n, -1, parts, ib.values, done)
				return
			}
			s.pending = append(s.pending, s.newPending(n, inc, w, parts, ib.values, done))
		}, nil)
	})
}

// idempotentBatch builds one uncompressed batch of an idempotent producer (producer id,
// epoch, base sequence set; CRC over the rest).
func idempotentBatch(pid int64, epoch int16, seq int32, ts int64, recs []records.Record) []byte {
	b := records.AppendBatch(nil, 0, 0, ts, recs)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// parkedUntil is when a new acks=all wait is first looked at: at once, or, one time in four,
// up to 2.5 s later (within the request timeout), as a produce handler that waits on the
// partitions of its request one after the other does for the later ones.
func (s *Sim) parkedUntil() int64 {
	if s.rng.IntN(4) != 0 {
		return s.now
	}
	s.stats.ParkedWaits++
	return s.now + int64(s.rng.IntN(2500))*int64(time.Millisecond)
}

// checkProduces answers the acks=all produces whose wait is over.
func (s *Sim) checkProduces() {
	kept := s.pending[:0]
	for _, pp := range s.pending {
		switch {
		case pp.n.inc != pp.inc || !pp.n.up():
			continue // the broker died: the client times out
		case pp.n.paused, s.now < pp.checkAt:
		case pp.w.Check():
			s.checkAfterAppend(pp)
			if res := pp.parts[0]; res.Err == nil {
				s.checkMinISR(pp, res.BaseOffset)
			}
			s.respond(pp.n, -1, pp.parts, pp.values, pp.done)
			continue
		case s.now > pp.dead:
			pp.w.Expire()
			s.respond(pp.n, -1, pp.parts, pp.values, pp.done)
			continue
		}
		kept = append(kept, pp)
	}
	clear(s.pending[len(kept):])
	s.pending = kept
}

// checkAfterAppend fails the seed when an acks=all wait ended NOT_ENOUGH_REPLICAS_AFTER_APPEND
// before the leader's HW passed its batch: as Kafka's DelayedProduce, a dip of the ISR below
// min.insync.replicas does not end the wait; only the HW passing the batch (then the ISR
// decides success or this error), the request's timeout or the end of the leadership do.
func (s *Sim) checkAfterAppend(pp *pendingProduce) {
	res := pp.parts[0]
	if !errors.Is(res.Err, kerr.NotEnoughReplicasAfterAppend) {
		return
	}
	last := res.BaseOffset + int64(len(pp.values)) - 1
	if r, ok := pp.n.b.Replica(topic, res.Partition); ok && r.HW() <= last {
		s.fail("p%d: acks=all batch at %d..%d on broker %d answered %v while the HW is %d: the wait must go on until the HW passes it",
			res.Partition, res.BaseOffset, last, pp.n.id, res.Err, r.HW())
	}
}

func (s *Sim) respond(n *node, acks int16, parts []broker.ProducePartition, values []string, done func(broker.ProducePartition)) {
	res := parts[0]
	if acks == -1 && res.Err == nil {
		// Acknowledged now, known to the client once the answer arrives: a failure meanwhile
		// excuses these records as it does those the client knows of.
		for i, v := range values {
			s.acking[valueNum(v)] = ackRef{key{res.Partition, res.BaseOffset + int64(i)}, entry{v, valueNum(v)}}
		}
	}
	s.at(s.now+s.delay(n.id, -1), func() {
		if acks == -1 && res.Err == nil {
			for _, v := range values {
				delete(s.acking, valueNum(v))
			}
		}
		if done != nil {
			done(res)
			return
		}
		if res.Err != nil {
			s.tracef("produce to broker %d p%d acks=%d: %v", n.id, res.Partition, acks, res.Err)
			return
		}
		if acks == -1 {
			s.stats.AckedAll++
			for i, v := range values {
				s.recordAck(key{res.Partition, res.BaseOffset + int64(i)}, entry{v, valueNum(v)})
			}
		} else {
			s.stats.AckedOne++
		}
		s.tracef("produce to broker %d p%d acks=%d: offsets %d..%d", n.id, res.Partition, acks, res.BaseOffset, res.BaseOffset+int64(len(values))-1)
	})
}

// consume reads one partition from its leader as a consumer does (replica id -1,
// read_uncommitted). A consumer may see only [log start, HW): a record at or past the
// leader's HW at the time of the read, or past the HW the response reports, fails the seed
// (and checkDurability fails it if a record read is truncated later), as does a
// ListOffsets LATEST that answers it anything but the HW.
func (s *Sim) consume() {
	p := int32(s.rng.IntN(s.nparts))
	st, ok := s.ctrl.Partition(topic, p)
	if !ok || st.Leader == controller.NoLeader {
		return
	}
	n := s.nodes[st.Leader]
	if !n.up() || n.paused {
		return
	}
	req := &broker.FetchRequest{ReplicaID: -1, MaxBytes: 1 << 20, Partitions: []broker.FetchPartition{{
		Topic: topic, Partition: p, FetchOffset: s.consumer[p], CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}}}
	n.b.Fetch(context.Background(), req)
	fp := &req.Partitions[0]
	defer fp.Records.Release()
	if fp.Err != nil {
		if errors.Is(fp.Err, kerr.OffsetOutOfRange) && fp.LogStartOffsetOut > s.consumer[p] {
			// Retention passed the consumer: it starts over at the log start
			// (auto.offset.reset=earliest).
			s.stats.ConsumerResets++
			s.tracef("consumer of p%d at %d is below the log start %d of broker %d: reset to it", p, s.consumer[p], fp.LogStartOffsetOut, n.id)
			s.consumer[p] = fp.LogStartOffsetOut
		}
		return
	}
	// The HW the read was bounded by: the replica's now (one goroutine: nothing moved it
	// since the read), and never above what the response says.
	hw, leo := fp.HighWatermark, int64(-1)
	if r, ok := n.b.Replica(topic, p); ok {
		hw, leo = min(hw, r.HW()), r.LEO()
		// The consumer's end offset (ListOffsets LATEST, replica id -1) is the HW too.
		if latest, _, err := n.b.ListOffsetFor(-1, -1, topic, p, -1, 0); err == nil && latest != r.HW() {
			s.fail("ListOffsets LATEST for a consumer of p%d on leader %d answered %d, the HW is %d (LEO %d)", p, n.id, latest, r.HW(), leo)
			return
		}
	}
	data, err := fp.Records.ReadAll(nil)
	if err != nil {
		s.fail("consumer read from broker %d: %v", n.id, err)
		return
	}
	nread := 0
	err = records.Split(data, func(batch []byte, h records.Header) error {
		if h.IsControl() {
			if h.BaseOffset >= hw {
				return fmt.Errorf("a consumer fetch of p%d at %d from broker %d returned a marker at offset %d, at or past the HW %d", p, fp.FetchOffset, n.id, h.BaseOffset, hw)
			}
			s.consumer[p] = max(s.consumer[p], h.NextOffset()) // (a consumer skips markers)
			return nil
		}
		return records.ForEachRecord(batch, func(off, _ int64, _, v []byte) error {
			if off >= hw {
				return fmt.Errorf("a consumer fetch of p%d at %d from broker %d (leader epoch %d) returned record %s at offset %d, at or past the HW %d (LEO %d): consumers read only below the HW",
					p, fp.FetchOffset, n.id, st.LeaderEpoch, v, off, hw, leo)
			}
			if off >= s.consumer[p] {
				s.consumed[key{p, off}] = entry{string(v), valueNum(string(v))}
				s.consumer[p] = off + 1
				nread++
			}
			return nil
		})
	})
	if err != nil {
		s.fail("%v", err)
		return
	}
	if nread > 0 {
		s.stats.Consumed += nread
		s.tracef("consumer read p%d from broker %d up to %d (HW %d)", p, n.id, s.consumer[p], fp.HighWatermark)
	}
}
