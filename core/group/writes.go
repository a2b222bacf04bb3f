package group

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/records"
)

// The Coordinator's writes to __consumer_offsets: the appends and their acks=all waits
// (await; Poll with Config.Manual).

// currentLocked reports whether this broker still leads partition p in the leader epoch p
// was loaded for (mu held): NOT_COORDINATOR if it does not lead p, COORDINATOR_LOAD_IN_PROGRESS
// if it leads p in another epoch (a reload is due).
func (c *Coordinator) currentLocked(p int32) error {
	r, ok := c.b.Replica(OffsetsTopic, p)
	e, led := c.mu.led[p]
	switch {
	case !ok || !led || !r.IsLeader():
		return kerr.NotCoordinator
	case r.LeaderEpoch() != e:
		return kerr.CoordinatorLoadInProgress
	}
	return nil
}

// write is one append to __consumer_offsets and its acks=all wait.
type write struct {
	parts    []broker.ProducePartition
	w        *broker.ProduceWait // nil: the append failed (parts[0].Err)
	deadline int64               // ms: offsets.commit.timeout.ms after the append
	done     func(base int64, err error)
}

// result is the write's base offset, or its error.
func (wr *write) result() (int64, error) {
	p := wr.parts[0]
	if p.Err != nil {
		return -1, fmt.Errorf("appending to %s-%d: %w", OffsetsTopic, p.Partition, p.Err)
	}
	return p.BaseOffset, nil
}

// appendLocked appends recs as one uncompressed RecordBatch v2 to __consumer_offsets-p as
// leader, for acks=all (await waits for it), if this broker still leads p in the leader
// epoch p's groups were loaded for (mu held): NOT_LEADER_OR_FOLLOWER otherwise, since the
// Machine's state of p is then about to be dropped or reloaded. A failed append is a write
// whose result is the error.
func (c *Coordinator) appendLocked(p int32, recs []Record) (*write, error) {
	if err := c.currentLocked(p); err != nil {
		return nil, fmt.Errorf("appending to %s-%d: broker %d no longer leads it in the leader epoch it loaded (%v): %w",
			OffsetsTopic, p, c.b.ID(), err, kerr.NotLeaderForPartition)
	}
	rs := make([]records.Record, len(recs))
	for i, r := range recs {
		rs[i] = records.Record{Key: r.Key, Value: r.Value}
	}
	now := c.now()
	batch := records.AppendBatch(nil, 0, 0, now, rs)
	parts := []broker.ProducePartition{{Topic: OffsetsTopic, Partition: p, Records: batch, InternalTopicsAllowed: true}}
	return &write{parts: parts, w: c.b.ProduceAppend(-1, parts), deadline: now + c.cfg.OffsetsCommitTimeoutMs}, nil
}

// await calls done, without mu, once wr's acks=all wait is over (offsets.commit.timeout.ms
// at most): on a goroutine of its own, or with Config.Manual from the Poll that sees it end.
func (c *Coordinator) await(wr *write, done func(base int64, err error)) {
	wr.done = done
	if wr.w == nil {
		done(wr.result())
		return
	}
	if c.cfg.Manual {
		c.mu.Lock()
		closed := c.mu.closed
		if !closed {
			c.mu.writes = append(c.mu.writes, wr)
		}
		c.mu.Unlock()
		if closed {
			wr.w.Expire()
			done(wr.result())
		}
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, time.Duration(c.cfg.OffsetsCommitTimeoutMs)*time.Millisecond)
		wr.w.Wait(ctx)
		cancel()
		done(wr.result())
	}()
}

// Poll ends the acks=all waits that are over (Config.Manual): each write whose HW passed
// it, whose leadership ended or whose offsets.commit.timeout.ms passed gets its outcome.
func (c *Coordinator) Poll() {
	now := c.now()
	var due []*write
	c.mu.Lock()
	kept := c.mu.writes[:0]
	for _, wr := range c.mu.writes {
		switch {
		case wr.w.Check():
		case now >= wr.deadline:
			wr.w.Expire()
		default:
			kept = append(kept, wr)
			continue
		}
		due = append(due, wr)
	}
	clear(c.mu.writes[len(kept):])
	c.mu.writes = kept
	c.mu.Unlock()
	for _, wr := range due {
		wr.done(wr.result())
	}
}
