package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/partition"
)

// Produce appends each partition's records as leader and fills its outputs
// (Err, BaseOffset, LogAppendTimeMs = -1, LogStartOffset). acks 0 and 1
// return after the appends; acks -1 (all) then waits, up to timeout, until
// the HW passes the last appended offset of every partition that appended
// (REQUEST_TIMED_OUT on timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the
// ISR fell below min.insync.replicas meanwhile). Records are patched in
// place (base offset, leader epoch). Runs on the caller's goroutine; safe
// for concurrent use. If Config.ProduceDelay > 0 it first sleeps that long
// (the regression-gate slowdown) — the wire server must not add its own.
func (b *Broker) Produce(ctx context.Context, acks int16, timeout time.Duration, parts []ProducePartition) {
	if acks != 0 && acks != 1 && acks != -1 {
		for i := range parts {
			failProduce(&parts[i], fmt.Errorf("%w: acks must be -1, 0 or 1, got %d", kerr.InvalidRequiredAcks, acks))
		}
		return
	}
	if b.cfg.ProduceDelay > 0 {
		t := time.NewTimer(b.cfg.ProduceDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if !b.running() {
		for i := range parts {
			failProduce(&parts[i], fmt.Errorf("%w: broker %d is not running", kerr.NotLeaderForPartition, b.cfg.ID))
		}
		return
	}
	// acks=all: the replica and last appended offset of every partition that
	// appended (nil replica: nothing to wait for), so the wait needs no second
	// lookup.
	var waits int
	var waitBuf [8]produceWait
	var pending []produceWait
	if acks == -1 {
		if len(parts) > len(waitBuf) {
			pending = make([]produceWait, len(parts))
		} else {
			pending = waitBuf[:len(parts)]
		}
	}
	for i := range parts {
		p := &parts[i]
		h := b.lookup(p.Topic, p.Partition)
		if h == nil {
			failProduce(p, fmt.Errorf("%w: %s-%d is not hosted on broker %d", kerr.UnknownTopicOrPartition, p.Topic, p.Partition, b.cfg.ID))
			continue
		}
		info, err := h.r.AppendAsLeader(p.Records, acks)
		if err != nil {
			failProduce(p, kerrOf(err))
			continue
		}
		p.Err = nil
		p.BaseOffset = info.FirstOffset
		p.LogAppendTimeMs = -1
		p.LogStartOffset = h.r.LogStart()
		if acks == -1 {
			pending[i] = produceWait{r: h.r, last: info.LastOffset}
		}
		waits++
	}
	if acks != -1 || waits == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for i := range parts {
		w := &pending[i]
		if w.r == nil {
			continue
		}
		if err := w.r.WaitForHW(wctx, w.last); err != nil {
			parts[i].Err = kerrOf(err)
		}
	}
}

// produceWait is one acks=all partition of a Produce call waiting for the HW.
type produceWait struct {
	r    *partition.Replica
	last int64 // last appended offset (inclusive)
}

func failProduce(p *ProducePartition, err error) {
	p.Err = err
	p.BaseOffset = -1
	p.LogAppendTimeMs = -1
	p.LogStartOffset = -1
}
