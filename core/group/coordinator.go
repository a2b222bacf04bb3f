package group

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/partition"
)

// Coordinator is one broker's group coordinator: the thin layer around a Machine that owns
// its goroutines and I/O. It watches the broker's __consumer_offsets replicas
// (broker.Changed): when this broker becomes leader of a partition it loads the partition's
// groups and offsets from the log (COORDINATOR_LOAD_IN_PROGRESS meanwhile), and when it stops
// leading one it drops them (NOT_COORDINATOR). It runs the Machine's timers, hands the
// answers of parked JoinGroup / SyncGroup requests to the waiting callers, and writes offset
// commits and group metadata to __consumer_offsets with acks=all.
//
// With Config.Manual it starts no goroutine: the caller drives it (Scan after a leadership
// change, Tick for the timers, Poll for the acks=all waits) and uses the Async methods,
// whose callbacks then run on the caller's goroutine; the deterministic simulator does.
//
// All methods are safe for concurrent use. Join, Sync and Commit block the caller until the
// answer is ready, ctx ends or the coordinator closes; no lock is held while they wait. The
// callbacks of the Async methods run without the coordinator's lock held, at most once each.
type Coordinator struct {
	cfg  Config
	b    *broker.Broker
	ctrl *controller.Controller
	now  func() int64 // ms

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // wakes the timer goroutine after deadlines changed

	// hooks lets tests stop a request at a chosen point (nil fields: none).
	hooks struct {
		// commitUnlocked runs when a commit first releases the lock: after it was
		// validated, appended and recorded, before its acks=all wait.
		commitUnlocked func()
	}

	mu struct {
		sync.Mutex
		m       *Machine
		led     map[int32]int32 // partition -> leader epoch it was (is being) loaded for
		waiters map[Ticket]func(Reply)
		next    Ticket
		closed  bool
		loaded  chan struct{} // closed (and replaced) whenever a partition finishes loading
		// writes: with Config.Manual, the appends waiting for acks=all (Poll).
		writes []*write
	}
}

// NewCoordinator returns the coordinator of broker b (not started). now returns the time in
// ms (nil = the wall clock).
func NewCoordinator(cfg Config, b *broker.Broker, ctrl *controller.Controller, now func() int64) *Coordinator {
	if now == nil {
		now = func() int64 { return time.Now().UnixMilli() }
	}
	c := &Coordinator{cfg: cfg.withDefaults(), b: b, ctrl: ctrl, now: now, kick: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.m = NewMachine(c.cfg)
	c.mu.led = map[int32]int32{}
	c.mu.waiters = map[Ticket]func(Reply){}
	c.mu.loaded = make(chan struct{})
	return c
}

// WaitReady blocks until this coordinator serves groupID (its partition is led here and
// loaded), ctx ends (its error) or the coordinator closes (NOT_COORDINATOR).
func (c *Coordinator) WaitReady(ctx context.Context, groupID string) error {
	for {
		c.mu.Lock()
		err := c.mu.m.Check(groupID)
		ch := c.mu.loaded
		c.mu.Unlock()
		if err == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ctx.Done():
			return kerr.NotCoordinator
		}
	}
}

// Config returns the effective config.
func (c *Coordinator) Config() Config { return c.cfg }

// Start starts the leadership watcher and the timer goroutine (with Config.Manual, nothing:
// the caller calls Scan, Tick and Poll).
func (c *Coordinator) Start() {
	if c.cfg.Manual {
		return
	}
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.watch() }()
	go func() { defer c.wg.Done(); c.timers() }()
}

// Close stops the goroutines and answers every parked request NOT_COORDINATOR. Idempotent.
func (c *Coordinator) Close() {
	c.cancel()
	c.mu.Lock()
	if !c.mu.closed {
		c.mu.closed = true
		c.mu.m.UnloadAll()
	}
	replies := c.takeLocked()
	writes := c.mu.writes
	c.mu.writes = nil
	c.mu.Unlock()
	c.deliver(replies, nil)
	for _, wr := range writes {
		wr.w.Expire()
		wr.done(wr.result())
	}
	c.wg.Wait()
}

func (c *Coordinator) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf("group coordinator %d: "+format, append([]any{c.b.ID()}, args...)...)
	}
}

// watch follows the leadership of the __consumer_offsets partitions hosted here.
func (c *Coordinator) watch() { c.b.OnChanges(c.ctx, c.Scan) }

// Scan compares each hosted __consumer_offsets replica's leadership with what is loaded:
// a new leadership (or a new leader epoch) starts a load, a lost one unloads. The watcher
// goroutine calls it on every change of the broker; with Config.Manual the caller does,
// and the loads run before Scan returns.
func (c *Coordinator) Scan() {
	n := c.cfg.OffsetsTopicNumPartitions
	type load struct {
		p     int32
		r     *partition.Replica
		epoch int32
	}
	var loads []load
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	for p := int32(0); p < n; p++ {
		r, ok := c.b.Replica(OffsetsTopic, p)
		leading := ok && r.IsLeader()
		epoch, had := c.mu.led[p]
		switch {
		case leading && (!had || epoch != r.LeaderEpoch()):
			e := r.LeaderEpoch()
			c.mu.led[p] = e
			c.mu.m.BeginLoad(p)
			loads = append(loads, load{p, r, e})
		case !leading && had:
			delete(c.mu.led, p)
			c.mu.m.Unload(p)
			c.logf("%s-%d: no longer leader: its groups moved", OffsetsTopic, p)
		}
	}
	replies := c.takeLocked()
	c.mu.Unlock()
	c.deliver(replies, nil)
	for _, l := range loads {
		if c.cfg.Manual {
			c.load(l.p, l.r, l.epoch)
			continue
		}
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.load(l.p, l.r, l.epoch) }()
	}
}

// LoadedEpoch returns the leader epoch of __consumer_offsets partition p its groups were
// loaded for, and whether they are loaded (false while p loads, or is not led here).
func (c *Coordinator) LoadedEpoch(p int32) (int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.mu.led[p]
	return e, ok && c.mu.m.Owns(p) && !c.mu.m.Loading(p)
}

// stillLeading reports whether r still leads at epoch (the load may go on).
func stillLeading(r *partition.Replica, epoch int32) bool {
	return r.IsLeader() && r.LeaderEpoch() == epoch
}

// load replays partition p's log after this broker became its leader at epoch: it reads
// [log start, log end) and installs the result, unless leadership moved meanwhile. As
// Kafka's GroupMetadataManager.doLoadGroupsAndOffsets (and the loader of its newer
// coordinator), it reads up to the log end, not the HW, and does not wait for the HW: a
// record the previous leader wrote may have been acknowledged by it even if this replica has
// not learnt the HW that passed it, and the HW may not move at all while the ISR is below
// min.insync.replicas. As in Kafka's classic coordinator, what is loaded is served at once,
// commits included. As leader this broker never truncates its log, so what it loaded stays
// in it; a later leader may lack records past this one's HW only if none of them was ever
// acknowledged. No write to p can come between the end read here and the install: p's
// groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile.
func (c *Coordinator) load(p int32, r *partition.Replica, epoch int32) {
	start := c.now()
	if !stillLeading(r, epoch) {
		return
	}
	l := NewLoaded()
	end := r.LEO()
	var buf []byte
	for off := r.LogStart(); off < end; {
		s, err := r.Read(off, end, 1<<20, true)
		if err != nil {
			c.logf("%s-%d: loading at offset %d: %v (retrying on the next leadership change)", OffsetsTopic, p, off, err)
			return
		}
		buf, err = s.ReadAll(buf[:0])
		next := s.NextOffset
		s.Release()
		if err == nil {
			err = l.ApplyBatches(buf)
		}
		if err != nil {
			c.logf("%s-%d: loading at offset %d: %v", OffsetsTopic, p, off, err)
			return
		}
		if next <= off {
			break
		}
		off = next
	}
	c.mu.Lock()
	if e, ok := c.mu.led[p]; ok && e == epoch && stillLeading(r, epoch) {
		c.mu.m.FinishLoad(c.now(), p, l)
		close(c.mu.loaded)
		c.mu.loaded = make(chan struct{})
		if l.Records > 0 {
			c.logf("%s-%d: loaded %d groups, %d records (%d skipped) up to offset %d in %d ms (leader epoch %d)",
				OffsetsTopic, p, len(l.Groups), l.Records, l.Skipped, end, c.now()-start, epoch)
		}
	}
	replies := c.takeLocked()
	c.mu.Unlock()
	c.deliver(replies, nil)
}

// timers runs the Machine's deadlines.
func (c *Coordinator) timers() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		c.mu.Lock()
		next := c.mu.m.NextDeadline()
		c.mu.Unlock()
		d := time.Hour
		if next != math.MaxInt64 {
			d = min(time.Duration(next-c.now())*time.Millisecond, time.Hour)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(max(d, 0))
		select {
		case <-t.C:
			c.Tick()
		case <-c.kick:
		case <-c.ctx.Done():
			return
		}
	}
}

// Tick runs the Machine's timers that are due (the timer goroutine calls it; with
// Config.Manual the caller does, at NextDeadline or later).
func (c *Coordinator) Tick() {
	c.call(func(m *Machine, now int64) { m.Tick(now) })
}

// NextDeadline is the earliest time (ms) at which Tick has something to do, or
// math.MaxInt64.
func (c *Coordinator) NextDeadline() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.m.NextDeadline()
}

// takeLocked collects the answers to deliver (mu held).
func (c *Coordinator) takeLocked() []routed {
	rs := c.mu.m.Drain()
	out := make([]routed, 0, len(rs))
	for _, r := range rs {
		if fn, ok := c.mu.waiters[r.Ticket]; ok {
			delete(c.mu.waiters, r.Ticket)
			out = append(out, routed{fn, r})
		}
	}
	return out
}

type routed struct {
	fn func(Reply)
	r  Reply
}

// deliver hands answers to their waiters, waits for the background writes and wakes the
// timer goroutine (deadlines may have changed). Called without mu.
func (c *Coordinator) deliver(rs []routed, writes []*write) {
	for _, r := range rs {
		r.fn(r.r)
	}
	for _, wr := range writes {
		c.await(wr, wr.done)
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// call runs fn on the Machine under mu, appends the group metadata the Machine asked to
// write (still under mu; their outcomes go back to Machine.Stored) and delivers what it
// produced.
func (c *Coordinator) call(fn func(m *Machine, now int64)) {
	c.mu.Lock()
	now := c.now()
	fn(c.mu.m, now)
	var writes []*write
	for stores := c.mu.m.DrainStores(); len(stores) > 0; stores = c.mu.m.DrainStores() {
		for i := range stores {
			s := &stores[i]
			stored := func(now int64, err error) {
				if err != nil && c.ctx.Err() == nil {
					c.logf("group %s: writing group metadata or tombstones (generation %d): %v", s.Group, s.Generation, err)
				}
				c.mu.m.Stored(now, s, groupStoreError(err))
			}
			wr, err := c.appendLocked(s.Partition, s.Records())
			if err == nil {
				_, err = wr.result()
			}
			if err != nil {
				stored(now, err)
				continue
			}
			wr.done = func(_ int64, err error) {
				c.call(func(_ *Machine, now int64) { stored(now, err) })
			}
			writes = append(writes, wr)
		}
	}
	replies := c.takeLocked()
	c.mu.Unlock()
	c.deliver(replies, writes)
}

// ticket registers fn as the receiver of the answer to a request about to park.
func (c *Coordinator) ticket(fn func(Reply)) Ticket {
	c.mu.Lock()
	c.mu.next++
	t := c.mu.next
	c.mu.waiters[t] = fn
	c.mu.Unlock()
	return t
}
