package group

import (
	"context"
	"fmt"
	"time"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/records"
)

// The Coordinator's writes to __consumer_offsets: the appends and their acks=all waits
// (await; Poll with Config.Manual).

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

// startAppend appends recs as one uncompressed RecordBatch v2 to __consumer_offsets-p as
// leader, for acks=all (await waits for it).
func (c *Coordinator) startAppend(p int32, recs []Record) *write {
	rs := make([]records.Record, len(recs))
	for i, r := range recs {
		rs[i] = records.Record{Key: r.Key, Value: r.Value}
	}
	now := c.now()
	batch := records.AppendBatch(nil, 0, 0, now, rs)
	parts := []broker.ProducePartition{{Topic: OffsetsTopic, Partition: p, Records: batch}}
	return &write{parts: parts, w: c.b.ProduceAppend(-1, parts), deadline: now + c.cfg.OffsetsCommitTimeoutMs}
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
