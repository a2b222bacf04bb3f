package group

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/core/records"
)

// Coordinator is one broker's group coordinator: the thin layer around a Machine that owns
// its goroutines and I/O. It watches the broker's __consumer_offsets replicas
// (broker.Changed): when this broker becomes leader of a partition it loads the partition's
// groups and offsets from the log (COORDINATOR_LOAD_IN_PROGRESS meanwhile), and when it stops
// leading one it drops them (NOT_COORDINATOR). It runs the Machine's timers, hands the
// answers of parked JoinGroup / SyncGroup requests to the waiting callers, and writes offset
// commits and group metadata through broker.Produce with acks=all.
//
// All methods are safe for concurrent use. Join and Sync block the caller until the answer
// is ready, ctx ends or the coordinator closes; no lock is held while they wait.
type Coordinator struct {
	cfg  Config
	b    *broker.Broker
	ctrl *controller.Controller
	now  func() int64 // ms

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // wakes the timer goroutine after deadlines changed

	mu struct {
		sync.Mutex
		m       *Machine
		led     map[int32]int32 // partition -> leader epoch it was (is being) loaded for
		waiters map[Ticket]chan Reply
		next    Ticket
		closed  bool
		loaded  chan struct{} // closed (and replaced) whenever a partition finishes loading
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
	c.mu.waiters = map[Ticket]chan Reply{}
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

// Start starts the leadership watcher and the timer goroutine.
func (c *Coordinator) Start() {
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
	c.mu.Unlock()
	c.deliver(replies, nil)
	c.wg.Wait()
}

func (c *Coordinator) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf("group coordinator %d: "+format, append([]any{c.b.ID()}, args...)...)
	}
}

// watch follows the leadership of the __consumer_offsets partitions hosted here.
func (c *Coordinator) watch() {
	for {
		ch := c.b.Changed()
		c.scan()
		select {
		case <-ch:
		case <-c.ctx.Done():
			return
		}
	}
}

// scan compares each hosted __consumer_offsets replica's leadership with what is loaded:
// a new leadership (or a new leader epoch) starts a load, a lost one unloads.
func (c *Coordinator) scan() {
	n := c.cfg.OffsetsTopicNumPartitions
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
			c.wg.Add(1)
			go func() { defer c.wg.Done(); c.load(p, r, e) }()
		case !leading && had:
			delete(c.mu.led, p)
			c.mu.m.Unload(p)
			c.logf("%s-%d: no longer leader: its groups moved", OffsetsTopic, p)
		}
	}
	replies := c.takeLocked()
	c.mu.Unlock()
	c.deliver(replies, nil)
}

// stillLeading reports whether r still leads at epoch (the load may go on).
func stillLeading(r *partition.Replica, epoch int32) bool {
	return r.IsLeader() && r.LeaderEpoch() == epoch
}

// load replays partition p's log after this broker became its leader at epoch: it waits
// until the HW reaches the log end it found (every record written by the previous leader
// that may have been acknowledged is then committed), reads [log start, HW) and installs the
// result, unless leadership moved meanwhile.
func (c *Coordinator) load(p int32, r *partition.Replica, epoch int32) {
	start := time.Now()
	target := r.LEO()
	for r.HW() < target {
		if !stillLeading(r, epoch) {
			return
		}
		hwCh := r.HWChanged()
		if r.HW() >= target {
			break
		}
		select {
		case <-hwCh:
		case <-c.b.Changed():
		case <-c.ctx.Done():
			return
		}
	}
	l := NewLoaded()
	end := r.HW()
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
			c.logf("%s-%d: loaded %d groups, %d records (%d skipped) up to offset %d in %v (leader epoch %d)",
				OffsetsTopic, p, len(l.Groups), l.Records, l.Skipped, end, time.Since(start).Round(time.Millisecond), epoch)
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
			c.mu.Lock()
			c.mu.m.Tick(c.now())
			replies, stores := c.takeLocked(), c.mu.m.DrainStores()
			c.mu.Unlock()
			c.deliver(replies, stores)
		case <-c.kick:
		case <-c.ctx.Done():
			return
		}
	}
}

// takeLocked collects the answers to deliver (mu held).
func (c *Coordinator) takeLocked() []routed {
	rs := c.mu.m.Drain()
	out := make([]routed, 0, len(rs))
	for _, r := range rs {
		if ch, ok := c.mu.waiters[r.Ticket]; ok {
			delete(c.mu.waiters, r.Ticket)
			out = append(out, routed{ch, r})
		}
	}
	return out
}

type routed struct {
	ch chan Reply
	r  Reply
}

// deliver hands answers to their waiters, starts background writes and wakes the timer
// goroutine (deadlines may have changed). Called without mu.
func (c *Coordinator) deliver(rs []routed, stores []GroupStore) {
	for _, r := range rs {
		r.ch <- r.r // buffered (1): never blocks
	}
	for i := range stores {
		s := stores[i]
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if _, err := c.append(c.ctx, s.Partition, []Record{s.Record()}); err != nil && c.ctx.Err() == nil {
				c.logf("group %s: writing group metadata (generation %d): %v", s.Group, s.Generation, err)
			}
		}()
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// call runs fn on the Machine under mu and delivers what it produced.
func (c *Coordinator) call(fn func(m *Machine, now int64)) {
	c.mu.Lock()
	fn(c.mu.m, c.now())
	replies, stores := c.takeLocked(), c.mu.m.DrainStores()
	c.mu.Unlock()
	c.deliver(replies, stores)
}

func (c *Coordinator) ticket() (Ticket, chan Reply) {
	ch := make(chan Reply, 1)
	c.mu.Lock()
	c.mu.next++
	t := c.mu.next
	c.mu.waiters[t] = ch
	c.mu.Unlock()
	return t, ch
}

func (c *Coordinator) forget(groupID string, t Ticket) {
	c.call(func(m *Machine, _ int64) {
		delete(c.mu.waiters, t)
		m.Cancel(groupID, t)
	})
}

// wait blocks until the parked request t is answered, ctx ends or the coordinator closes.
func (c *Coordinator) wait(ctx context.Context, groupID string, t Ticket, ch chan Reply) (Reply, error) {
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		c.forget(groupID, t)
		return Reply{}, ctx.Err()
	case <-c.ctx.Done():
		c.forget(groupID, t)
		return Reply{}, kerr.NotCoordinator
	}
}

// Join handles a JoinGroup, blocking while the rebalance runs. The error is ctx's when the
// caller gave up (the answer is then moot: the connection is going away).
func (c *Coordinator) Join(ctx context.Context, req JoinRequest) (JoinResult, error) {
	t, ch := c.ticket()
	var res JoinResult
	var parked bool
	c.call(func(m *Machine, now int64) {
		res, parked = m.Join(now, req, t)
		if !parked {
			delete(c.mu.waiters, t)
		}
	})
	if !parked {
		return res, nil
	}
	r, err := c.wait(ctx, req.Group, t, ch)
	if err != nil {
		if errors.Is(err, kerr.NotCoordinator) {
			return JoinResult{Err: err, MemberID: req.MemberID}, nil
		}
		return JoinResult{}, err
	}
	return *r.Join, nil
}

// Sync handles a SyncGroup, blocking until the leader's assignment is stored (or the
// rebalance fails). The leader's request writes the group metadata itself, with acks=all.
func (c *Coordinator) Sync(ctx context.Context, req SyncRequest) (SyncResult, error) {
	t, ch := c.ticket()
	var res SyncResult
	var parked bool
	var store *GroupStore
	c.call(func(m *Machine, now int64) {
		res, parked, store = m.Sync(now, req, t)
		if !parked {
			delete(c.mu.waiters, t)
		}
	})
	if !parked {
		return res, nil
	}
	if store != nil {
		_, err := c.append(c.ctx, store.Partition, []Record{store.Record()})
		err = groupStoreError(err)
		c.call(func(m *Machine, now int64) { m.SyncStored(now, store, err) })
	}
	r, err := c.wait(ctx, req.Group, t, ch)
	if err != nil {
		if errors.Is(err, kerr.NotCoordinator) {
			return SyncResult{Err: err}, nil
		}
		return SyncResult{}, err
	}
	return *r.Sync, nil
}

// Heartbeat handles a Heartbeat.
func (c *Coordinator) Heartbeat(groupID, memberID, instanceID string, generation int32) error {
	var err error
	c.call(func(m *Machine, now int64) { err = m.Heartbeat(now, groupID, memberID, instanceID, generation) })
	return err
}

// Leave handles a LeaveGroup (see Machine.Leave).
func (c *Coordinator) Leave(groupID string, members []LeaveMember) (error, []error) {
	var top error
	var per []error
	c.call(func(m *Machine, now int64) { top, per = m.Leave(now, groupID, members) })
	return top, per
}

// Commit handles the group side of an OffsetCommit and writes offs (already validated per
// partition by the caller) with acks=all; the error applies to every partition.
func (c *Coordinator) Commit(ctx context.Context, req CommitRequest, offs map[TP]Committed) error {
	var err error
	var p int32
	c.call(func(m *Machine, now int64) {
		err = m.CheckCommit(now, req)
		p = m.Partition(req.Group)
	})
	if err != nil || len(offs) == 0 {
		return err
	}
	base, err := c.append(ctx, p, OffsetRecords(req.Group, offs))
	if err != nil {
		return commitError(err)
	}
	c.call(func(m *Machine, _ int64) { m.CommitStored(req.Group, offs, base) })
	return nil
}

// Committed returns the committed offsets of groupID for tps (nil = all).
func (c *Coordinator) Committed(groupID string, tps []TP) (map[TP]Committed, error) {
	var out map[TP]Committed
	var err error
	c.call(func(m *Machine, _ int64) { out, err = m.Committed(groupID, tps) })
	return out, err
}

// Check returns NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / INVALID_GROUP_ID, or nil.
func (c *Coordinator) Check(groupID string) error {
	var err error
	c.call(func(m *Machine, _ int64) { err = m.Check(groupID) })
	return err
}

// Describe handles DescribeGroups for one group.
func (c *Coordinator) Describe(groupID string) (Description, error) {
	var d Description
	var err error
	c.call(func(m *Machine, _ int64) { d, err = m.Describe(groupID) })
	return d, err
}

// List handles ListGroups (the groups of the partitions this broker leads and has loaded);
// loading is true while some partition is still loading (COORDINATOR_LOAD_IN_PROGRESS).
func (c *Coordinator) List() (groups []Listing, loading bool) {
	c.call(func(m *Machine, _ int64) {
		groups = m.List()
		for _, p := range m.OwnedPartitions() {
			if m.Loading(p) {
				loading = true
			}
		}
	})
	return groups, loading
}

// Delete handles DeleteGroups for one group: the group goes, and its tombstones are written
// with acks=all.
func (c *Coordinator) Delete(ctx context.Context, groupID string) error {
	var p int32
	var recs []Record
	var err error
	c.call(func(m *Machine, _ int64) { p, recs, err = m.Delete(groupID) })
	if err != nil {
		return err
	}
	_, err = c.append(ctx, p, recs)
	return commitError(err)
}

// Stats returns groupID's rebalance counters if this coordinator holds the group.
func (c *Coordinator) Stats(groupID string) (Stats, bool) {
	var st Stats
	var ok bool
	c.call(func(m *Machine, _ int64) { st, ok = m.Stats(groupID) })
	return st, ok
}

// append writes recs as one uncompressed RecordBatch v2 to __consumer_offsets-p with
// acks=all (offsets.commit.timeout.ms) and returns the batch's base offset.
func (c *Coordinator) append(ctx context.Context, p int32, recs []Record) (int64, error) {
	rs := make([]records.Record, len(recs))
	for i, r := range recs {
		rs[i] = records.Record{Key: r.Key, Value: r.Value}
	}
	batch := records.AppendBatch(nil, 0, 0, c.now(), rs)
	parts := []broker.ProducePartition{{Topic: OffsetsTopic, Partition: p, Records: batch}}
	c.b.Produce(ctx, -1, time.Duration(c.cfg.OffsetsCommitTimeoutMs)*time.Millisecond, parts)
	if err := parts[0].Err; err != nil {
		return -1, fmt.Errorf("appending to %s-%d: %w", OffsetsTopic, p, err)
	}
	return parts[0].BaseOffset, nil
}
