package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
)

// The Coordinator's waiting points, written once for both modes: an acks=all wait of a
// __transaction_state write (await), a delay (after), a marker write through a leader
// (sendMarkers) and work that would block the caller (spawn). By default each runs on a
// goroutine of the coordinator's; with Config.Manual nothing runs by itself: Poll ends the
// acks=all waits, Tick runs what is due, MarkersAsync answers the markers, and every
// continuation runs on the caller's goroutine.

// pendingWrite is an acks=all wait of a __transaction_state append (Config.Manual).
type pendingWrite struct {
	w        *broker.ProduceWait
	deadline int64 // ms: Config.WriteTimeoutMs after the append
	done     func()
}

// timer is a continuation due at a time in ms (Config.Manual).
type timer struct {
	at int64
	fn func(closed bool)
}

// spawn runs fn on a goroutine of the coordinator's (Config.Manual: now, on the caller's).
func (c *Coordinator) spawn(fn func()) {
	if c.cfg.Manual {
		fn()
		return
	}
	c.wg.Add(1)
	go func() { defer c.wg.Done(); fn() }()
}

// await calls done once w's acks=all wait is over (Config.WriteTimeoutMs at most; at once
// after Close), without mu held.
func (c *Coordinator) await(w *broker.ProduceWait, done func()) {
	if c.cfg.Manual {
		c.mu.Lock()
		closed := c.mu.closed
		if !closed {
			c.mu.writes = append(c.mu.writes, &pendingWrite{w: w, deadline: c.now() + c.cfg.WriteTimeoutMs, done: done})
		}
		c.mu.Unlock()
		if closed {
			w.Expire()
			done()
		}
		return
	}
	c.spawn(func() {
		ctx, cancel := context.WithTimeout(c.ctx, time.Duration(c.cfg.WriteTimeoutMs)*time.Millisecond)
		w.Wait(ctx)
		cancel()
		done()
	})
}

// after calls fn(false) ms from now, or fn(true) once the coordinator closes first.
func (c *Coordinator) after(ms int64, fn func(closed bool)) {
	if c.cfg.Manual {
		c.mu.Lock()
		closed := c.mu.closed
		if !closed {
			c.mu.timers = append(c.mu.timers, timer{at: c.now() + ms, fn: fn})
		}
		c.mu.Unlock()
		if closed {
			fn(true)
		}
		return
	}
	c.spawn(func() {
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			fn(false)
		case <-c.ctx.Done():
			fn(true)
		}
	})
}

// sendMarkers writes m through leader and calls done once each partition's Err is final
// (Config.MarkersAsync with Config.Manual, else Config.Markers on a goroutine).
func (c *Coordinator) sendMarkers(leader int32, m *broker.TxnMarker, done func(error)) {
	if c.cfg.Manual {
		if c.cfg.MarkersAsync != nil {
			c.cfg.MarkersAsync(leader, m, done)
			return
		}
		c.localMarkersAsync(leader, m, done)
		return
	}
	c.spawn(func() {
		ctx, cancel := context.WithTimeout(c.ctx, time.Duration(c.cfg.WriteTimeoutMs)*time.Millisecond)
		err := c.cfg.Markers(ctx, leader, m)
		cancel()
		done(err)
	})
}

// localMarkersAsync is the Manual-mode MarkerWriter of a coordinator without MarkersAsync:
// this broker writes the markers of the partitions it leads, and Poll ends their waits.
func (c *Coordinator) localMarkersAsync(leader int32, m *broker.TxnMarker, done func(error)) {
	if leader != c.b.ID() {
		done(kerr.NotLeaderForPartition)
		return
	}
	waits := c.b.AppendTxnMarkers([]broker.TxnMarker{*m})
	if len(waits) == 0 {
		done(nil)
		return
	}
	c.await(waits[0], func() { done(nil) })
}

// Poll ends the acks=all waits that are over (Config.Manual): each write whose HW passed it,
// whose leadership ended or whose Config.WriteTimeoutMs passed gets its outcome.
func (c *Coordinator) Poll() {
	now := c.now()
	var due []*pendingWrite
	c.mu.Lock()
	kept := c.mu.writes[:0]
	for _, pw := range c.mu.writes {
		switch {
		case pw.w.Check():
		case now >= pw.deadline:
			pw.w.Expire()
		default:
			kept = append(kept, pw)
			continue
		}
		due = append(due, pw)
	}
	clear(c.mu.writes[len(kept):])
	c.mu.writes = kept
	c.mu.Unlock()
	for _, pw := range due {
		pw.done()
	}
}

// Tick runs what is due now (Config.Manual): marker retries, and the periodic abort of timed
// out transactions and expiry of idle transactional ids.
func (c *Coordinator) Tick() {
	now := c.now()
	var due []timer
	c.mu.Lock()
	kept := c.mu.timers[:0]
	for _, t := range c.mu.timers {
		if t.at <= now {
			due = append(due, t)
		} else {
			kept = append(kept, t)
		}
	}
	clear(c.mu.timers[len(kept):])
	c.mu.timers = kept
	check := !c.mu.closed && now >= c.mu.nextCheck
	if check {
		c.mu.nextCheck = now + c.cfg.AbortCheckIntervalMs
	}
	remove := !c.mu.closed && now >= c.mu.nextRemove
	if remove {
		c.mu.nextRemove = now + c.cfg.RemoveExpiredIntervalMs
	}
	c.mu.Unlock()
	for _, t := range due {
		t.fn(false)
	}
	if check {
		c.AbortExpired()
	}
	if remove {
		c.ExpireIDs()
	}
}

// NextDeadline is the time (ms) of the next Tick with work to do (Config.Manual).
func (c *Coordinator) NextDeadline() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := min(c.mu.nextCheck, c.mu.nextRemove)
	for _, t := range c.mu.timers {
		next = min(next, t.at)
	}
	return next
}

// closeManual ends what Manual mode holds when the coordinator closes: the acks=all waits
// expire and the timers run with closed set.
func (c *Coordinator) closeManual() {
	c.mu.Lock()
	writes, timers := c.mu.writes, c.mu.timers
	c.mu.writes, c.mu.timers = nil, nil
	c.mu.Unlock()
	for _, pw := range writes {
		pw.w.Expire()
		pw.done()
	}
	for _, t := range timers {
		t.fn(true)
	}
}

// block runs an Async method and waits for its answer or ctx (the answer then comes later
// and is dropped; what it started goes on). A request whose context ends first (its
// connection or its broker's server closing) is answered NOT_COORDINATOR, as a coordinator
// that stops leading answers: the client finds the coordinator again and retries, and the
// retry finds what the dropped answer would have said. Not for Config.Manual, where nothing
// answers by itself.
func block[T any](ctx context.Context, start func(done func(T))) (T, error) {
	ch := make(chan T, 1)
	start(func(v T) { ch <- v })
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%w: the request ended before its answer: %w", kerr.NotCoordinator, ctx.Err())
	}
}
