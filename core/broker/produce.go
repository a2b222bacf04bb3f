package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/core/records"
)

// Produce appends each partition's records as leader and fills its outputs
// (Err, BaseOffset, LogAppendTimeMs = -1, LogStartOffset). acks 0 and 1
// return after the appends; acks -1 (all) then waits, up to timeout, until
// the HW of the leadership term each batch was appended in passes it, as
// Kafka's DelayedProduce: a dip of the ISR below min.insync.replicas does not
// end the wait (NOT_ENOUGH_REPLICAS before the append if the ISR is already
// below it); once the HW passes the batch the answer is success if the ISR
// has min.insync.replicas members then, else NOT_ENOUGH_REPLICAS_AFTER_APPEND;
// REQUEST_TIMED_OUT on timeout; NOT_LEADER_OR_FOLLOWER if the term ended
// first. Records are patched in place (base offset, leader epoch). An internal topic
// (IsInternalTopic) is refused with INVALID_TOPIC_EXCEPTION unless the partition is marked
// InternalTopicsAllowed (a coordinator's own write), in Produce and ProduceAppend alike.
// Runs on the caller's goroutine; safe for concurrent use. If
// Config.ProduceDelay > 0 it first sleeps that long, and with Config.ProduceSpin > 0 (or a
// build linked with buildSpinFlag) computes that long per record (the regression gate's
// slowdowns) — the wire server must not add its own.
//
// It returns how long it waited rather than worked: the ProduceDelay sleep and the acks=all wait
// for the HW (Kafka's RemoteTimeMs). The wire server subtracts it from the request's time to get
// the handler's local time (LocalTimeMs), the cost the regression gate compares.
func (b *Broker) Produce(ctx context.Context, acks int16, timeout time.Duration, parts []ProducePartition) (waited time.Duration) {
	waited = b.produceDelay(ctx, parts)
	var buf [8]produceWait
	waits := b.produceAppend(acks, parts, buf[:0], nil)
	if len(waits) == 0 {
		return waited
	}
	t0 := time.Now()
	w := ProduceWait{parts: parts, waits: waits}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w.Wait(wctx)
	return waited + time.Since(t0)
}

// produceDelay applies Config.ProduceDelay (a sleep, returned as waited) and ProduceSpin.
func (b *Broker) produceDelay(ctx context.Context, parts []ProducePartition) (waited time.Duration) {
	if b.cfg.ProduceDelay > 0 {
		t0 := time.Now()
		t := time.NewTimer(b.cfg.ProduceDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		waited = time.Since(t0)
	}
	if d := b.cfg.ProduceSpin + buildSpin.d; d > 0 {
		spin(d * time.Duration(recordsIn(parts)))
	}
	return waited
}

// ProduceWait is the acks=all part of a produce: the partitions whose append succeeded and
// that wait for the HW. It belongs to one goroutine.
type ProduceWait struct {
	parts []ProducePartition
	waits []produceWait
}

// produceWait is one acks=all partition of a Produce call waiting for the HW.
type produceWait struct {
	i     int // index into parts
	r     *partition.Replica
	last  int64 // last appended offset (inclusive)
	epoch int32 // leader epoch of the append
	done  bool
}

// ProduceAppend is the first half of Produce without the delay and the wait: it appends
// and fills the outputs; for acks=all it returns the wait for the HW (nil when nothing
// waits). The simulator calls it, then Check after every step.
func (b *Broker) ProduceAppend(acks int16, parts []ProducePartition) *ProduceWait {
	waits := b.produceAppend(acks, parts, nil, nil)
	if len(waits) == 0 {
		return nil
	}
	return &ProduceWait{parts: parts, waits: waits}
}

// produceAppend appends every partition and returns waits extended by the acks=all waits
// (append style, so the caller's buffer can stay on its stack). With later not nil the
// appends do not wake the followers' parked fetches: the replicas that owe that wake-up are
// added to later (ProduceWakeLater).
func (b *Broker) produceAppend(acks int16, parts []ProducePartition, waits []produceWait, later *FollowerWakes) []produceWait {
	if acks != 0 && acks != 1 && acks != -1 {
		for i := range parts {
			failProduce(&parts[i], fmt.Errorf("%w: acks must be -1, 0 or 1, got %d", kerr.InvalidRequiredAcks, acks))
		}
		return waits
	}
	if err := b.usable(); err != nil {
		for i := range parts {
			failProduce(&parts[i], err)
		}
		return waits
	}
	for i := range parts {
		p := &parts[i]
		if IsInternalTopic(p.Topic) && !p.InternalTopicsAllowed {
			// Kafka's ReplicaManager.appendToLocalLog, before it looks the partition up.
			failProduce(p, fmt.Errorf("cannot append to internal topic %s: %w", p.Topic, kerr.InvalidTopicException))
			continue
		}
		h := b.lookup(p.Topic, p.Partition)
		if h == nil {
			failProduce(p, fmt.Errorf("%w: %s-%d is not hosted on broker %d", kerr.UnknownTopicOrPartition, p.Topic, p.Partition, b.cfg.ID))
			continue
		}
		if err := checkProduceSizes(p.Records, h.maxMessage.Load(), h.l.SegmentBytes()); err != nil {
			failProduce(p, fmt.Errorf("%s-%d: %w", p.Topic, p.Partition, err))
			continue
		}
		var info log.AppendInfo
		var err error
		switch {
		case p.Coordinator:
			info, err = h.r.AppendCoordinatorTxn(p.Records, acks)
		case later != nil:
			var owed bool
			if info, owed, err = h.r.AppendAsLeaderWakeLater(p.Records, acks); owed {
				later.rs = append(later.rs, h.r)
			}
		default:
			info, err = h.r.AppendAsLeader(p.Records, acks)
		}
		if err != nil {
			failProduce(p, kerrOf(b.storageFailed(err)))
			continue
		}
		p.Err = nil
		p.BaseOffset = info.FirstOffset
		p.LogAppendTimeMs = -1
		p.LogStartOffset = h.r.LogStart()
		if acks == -1 {
			waits = append(waits, produceWait{i: i, r: h.r, last: info.LastOffset, epoch: info.LeaderEpoch})
		}
	}
	return waits
}

// checkProduceSizes applies the size rules to one partition's produced records before the
// append: a record set larger than max.message.bytes (the topic's, else the broker's) must
// fit in one segment (RECORD_LIST_TOO_LARGE, as Kafka's UnifiedLog.append) and none of its
// batches may be larger than max.message.bytes (MESSAGE_TOO_LARGE, as Kafka's
// LogValidator). The log itself refuses a batch larger than a segment.
func checkProduceSizes(recs []byte, maxMessage, segment int64) error {
	if int64(len(recs)) <= maxMessage {
		return nil // no batch can be larger
	}
	if int64(len(recs)) > segment {
		return fmt.Errorf("%d bytes of records exceed the segment size %d: %w", len(recs), segment, kerr.RecordListTooLarge)
	}
	return records.CheckBatchSizes(recs, maxMessage)
}

// Check fills the outputs of the partitions whose wait is over and reports whether all are.
// Lock-free; it does not block.
func (w *ProduceWait) Check() bool {
	all := true
	for k := range w.waits {
		pw := &w.waits[k]
		if pw.done {
			continue
		}
		done, err := pw.r.CheckHW(pw.last, pw.epoch)
		if !done {
			all = false
			continue
		}
		pw.done = true
		if err != nil {
			w.parts[pw.i].Err = kerrOf(err)
		}
	}
	return all
}

// Wait blocks until every partition's wait is over or ctx ends; the partitions still
// waiting then get REQUEST_TIMED_OUT.
func (w *ProduceWait) Wait(ctx context.Context) {
	for k := range w.waits {
		pw := &w.waits[k]
		if pw.done {
			continue
		}
		if err := pw.r.WaitForHW(ctx, pw.last, pw.epoch); err != nil {
			w.parts[pw.i].Err = kerrOf(err)
		}
		pw.done = true
	}
}

// Expire gives REQUEST_TIMED_OUT to the partitions still waiting (the request timed out).
func (w *ProduceWait) Expire() {
	for k := range w.waits {
		if pw := &w.waits[k]; !pw.done {
			pw.done = true
			w.parts[pw.i].Err = fmt.Errorf("%w: the HW did not pass offset %d of %s-%d in time", kerr.RequestTimedOut, pw.last, pw.r.Topic(), pw.r.Partition())
		}
	}
}

func failProduce(p *ProducePartition, err error) {
	p.Err = err
	p.BaseOffset = -1
	p.LogAppendTimeMs = -1
	p.LogStartOffset = -1
}
