package txn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/records"
)

// MarkerWriter writes m's markers through the leader broker leader and returns once each
// partition's marker is acknowledged (acks=all) or failed (its Err). Called from the
// coordinator's goroutines concurrently.
type MarkerWriter func(ctx context.Context, leader int32, m *broker.TxnMarker) error

// Coordinator is one broker's transaction coordinator: the thin layer around the decision
// rules (machine.go) that owns the goroutines and the I/O. See the package doc. All methods
// are safe for concurrent use.
type Coordinator struct {
	cfg  Config
	b    *broker.Broker
	ctrl *controller.Controller
	now  func() int64 // ms

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		parts  map[int32]*loaded // __transaction_state partition -> what is loaded for it
		closed bool
		// With Config.Manual: the acks=all waits (Poll), the continuations due later and
		// the time of the next periodic check (Tick).
		writes                []*pendingWrite
		timers                []timer
		nextCheck, nextRemove int64
	}
}

// loaded is one led __transaction_state partition: the leader epoch it was loaded for (the
// coordinator epoch of its markers) and its transactional ids.
type loaded struct {
	epoch   int32
	loading bool
	txns    map[string]*entry
}

// entry is one transactional id: its acknowledged state, and whether a write is in flight
// (another request on the id is then CONCURRENT_TRANSACTIONS, as Kafka's pendingState).
type entry struct {
	meta    Meta
	exists  bool
	pending bool
	// offset is the offset of the id's latest record in __transaction_state (-1: none): a
	// state loaded or written at or past the HW is not committed yet (a leader change may
	// truncate it), so an answer that relies on it without a write writes it again first.
	offset int64
}

// NewCoordinator returns the transaction coordinator of broker b (not started). now returns
// the time in ms (nil = the wall clock).
func NewCoordinator(cfg Config, b *broker.Broker, ctrl *controller.Controller, now func() int64) *Coordinator {
	if now == nil {
		now = func() int64 { return time.Now().UnixMilli() }
	}
	c := &Coordinator{cfg: cfg.withDefaults(), b: b, ctrl: ctrl, now: now}
	if c.cfg.Markers == nil {
		c.cfg.Markers = LocalMarkers(b)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.parts = map[int32]*loaded{}
	return c
}

// LocalMarkers is the MarkerWriter of a broker that writes only to partitions it leads.
func LocalMarkers(b *broker.Broker) MarkerWriter {
	return func(ctx context.Context, leader int32, m *broker.TxnMarker) error {
		if leader != b.ID() {
			return fmt.Errorf("broker %d cannot reach broker %d for transaction markers: %w", b.ID(), leader, kerr.NotLeaderForPartition)
		}
		for _, w := range b.AppendTxnMarkers([]broker.TxnMarker{*m}) {
			w.Wait(ctx)
		}
		return nil
	}
}

// Config returns the effective config.
func (c *Coordinator) Config() Config { return c.cfg }

func (c *Coordinator) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf("transaction coordinator %d: "+format, append([]any{c.b.ID()}, args...)...)
	}
}

// Start starts the leadership watcher and the expiry timer (with Config.Manual, nothing: the
// caller calls Scan, Tick and Poll).
func (c *Coordinator) Start() {
	if c.cfg.Manual {
		c.mu.Lock()
		c.mu.nextCheck = c.now() + c.cfg.AbortCheckIntervalMs
		c.mu.nextRemove = c.now() + c.cfg.RemoveExpiredIntervalMs
		c.mu.Unlock()
		return
	}
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.watch() }()
	go func() { defer c.wg.Done(); c.expireLoop() }()
}

// Close stops the goroutines (transactions being completed are finished by the next
// coordinator of their partition, which reloads them); requests in flight end with
// NOT_COORDINATOR. Idempotent.
func (c *Coordinator) Close() {
	c.cancel()
	c.mu.Lock()
	c.mu.closed = true
	c.mu.parts = map[int32]*loaded{}
	c.mu.Unlock()
	c.closeManual()
	c.wg.Wait()
}

func (c *Coordinator) watch() { c.b.OnChanges(c.ctx, c.Scan) }

// Scan compares each hosted __transaction_state replica's leadership with what is loaded: a
// new leadership (or leader epoch) loads the partition, a lost one drops it.
func (c *Coordinator) Scan() {
	type load struct{ p, epoch int32 }
	var loads []load
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	for p := int32(0); p < c.cfg.NumPartitions; p++ {
		r, ok := c.b.Replica(StateTopic, p)
		leading := ok && r.IsLeader()
		lp := c.mu.parts[p]
		switch {
		case leading && (lp == nil || lp.epoch != r.LeaderEpoch()):
			e := r.LeaderEpoch()
			c.mu.parts[p] = &loaded{epoch: e, loading: true, txns: map[string]*entry{}}
			loads = append(loads, load{p, e})
		case !leading && lp != nil:
			delete(c.mu.parts, p)
			c.logf("%s-%d: no longer leader: its transactional ids moved", StateTopic, p)
		}
	}
	c.mu.Unlock()
	for _, l := range loads {
		c.spawn(func() { c.load(l.p, l.epoch) })
	}
}

// LoadedEpoch returns the leader epoch __transaction_state partition p is loaded for, and
// whether it is loaded (led here, its log read).
func (c *Coordinator) LoadedEpoch(p int32) (int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lp := c.mu.parts[p]
	if lp == nil || lp.loading {
		return -1, false
	}
	return lp.epoch, true
}

// load replays partition p's log (to the log end, as the group coordinator does) and
// installs the latest state of every transactional id, then finishes the transactions it
// finds between EndTxn and their markers (PrepareCommit / PrepareAbort).
func (c *Coordinator) load(p, epoch int32) {
	r, ok := c.b.Replica(StateTopic, p)
	if !ok || !r.IsLeader() || r.LeaderEpoch() != epoch {
		return
	}
	txns := map[string]Meta{}
	offsets := map[string]int64{}
	end := r.LEO()
	var buf []byte
	bad := 0
	for off := r.LogStart(); off < end; {
		s, err := r.Read(off, end, 1<<20, true)
		if err != nil {
			c.logf("%s-%d: loading at offset %d: %v (retrying on the next leadership change)", StateTopic, p, off, err)
			return
		}
		buf, err = s.ReadAll(buf[:0])
		next := s.NextOffset
		s.Release()
		if err == nil {
			err = records.Split(buf, func(batch []byte, h records.Header) error {
				if h.IsControl() {
					return nil
				}
				return records.ForEachRecord(batch, func(off, _ int64, key, value []byte) error {
					id, err := DecodeKey(key)
					if err != nil {
						bad++
						return nil
					}
					if value == nil {
						delete(txns, id)
						return nil
					}
					m, err := DecodeValue(id, value)
					if err != nil {
						bad++
						return nil
					}
					txns[id], offsets[id] = m, off
					return nil
				})
			})
		}
		if err != nil {
			c.logf("%s-%d: loading at offset %d: %v", StateTopic, p, off, err)
			return
		}
		if next <= off {
			break
		}
		off = next
	}
	var resume []Meta
	c.mu.Lock()
	lp := c.mu.parts[p]
	if lp == nil || lp.epoch != epoch {
		c.mu.Unlock()
		return
	}
	for id, m := range txns {
		lp.txns[id] = &entry{meta: m, exists: true, offset: offsets[id]}
		if m.State == PrepareCommit || m.State == PrepareAbort || m.State == PrepareEpochFence {
			resume = append(resume, m)
		}
	}
	lp.loading = false
	c.mu.Unlock()
	sort.Slice(resume, func(i, j int) bool { return resume[i].TransactionalID < resume[j].TransactionalID })
	if len(txns) > 0 || bad > 0 {
		c.logf("%s-%d: loaded %d transactional ids (%d undecodable records) up to offset %d, leader epoch %d; completing %d",
			StateTopic, p, len(txns), bad, end, epoch, len(resume))
	}
	for _, m := range resume {
		c.completeAsync(m, func(error) {})
	}
}

// partLocked finds id's partition and checks this broker coordinates it (mu held).
func (c *Coordinator) partLocked(id string) (int32, *loaded, error) {
	if c.mu.closed {
		return -1, nil, kerr.NotCoordinator
	}
	p := PartitionFor(id, c.cfg.NumPartitions)
	lp := c.mu.parts[p]
	r, ok := c.b.Replica(StateTopic, p)
	switch {
	case lp == nil || !ok || !r.IsLeader():
		return p, nil, fmt.Errorf("broker %d does not lead %s-%d: %w", c.b.ID(), StateTopic, p, kerr.NotCoordinator)
	case lp.loading || r.LeaderEpoch() != lp.epoch:
		return p, nil, fmt.Errorf("%s-%d is loading: %w", StateTopic, p, kerr.CoordinatorLoadInProgress)
	}
	return p, lp, nil
}

// updateAsync runs decide on id's state under mu, writes what it returns (when write) to
// __transaction_state with acks=all and installs it once acknowledged; then done gets the
// state decided (the current one when nothing is written), the coordinator epoch and the
// outcome. done runs without mu held, at most once.
func (c *Coordinator) updateAsync(id string, decide func(cur Meta, exists bool) (Meta, bool, error), done func(Meta, int32, error)) {
	c.mu.Lock()
	p, lp, err := c.partLocked(id)
	if err != nil {
		c.mu.Unlock()
		done(Meta{}, -1, err)
		return
	}
	e := lp.txns[id]
	if e != nil && e.pending {
		c.mu.Unlock()
		done(Meta{}, -1, fmt.Errorf("transactional id %q has a request in flight: %w", id, kerr.ConcurrentTransactions))
		return
	}
	var cur Meta
	if e != nil && e.exists {
		cur = e.meta
	}
	next, write, err := decide(cur, e != nil && e.exists)
	if err == nil && !write && e != nil && e.exists && e.offset >= c.hw(p) {
		// The answer relies on a state not committed yet (loaded past the HW, or its write
		// not acknowledged): it is written again, and answered once acknowledged.
		next, write = cur, true
	}
	if err != nil || !write {
		c.mu.Unlock()
		done(next, lp.epoch, err)
		return
	}
	if e == nil {
		e = &entry{}
		lp.txns[id] = e
	}
	e.pending = true
	epoch := lp.epoch
	c.mu.Unlock()

	c.writeAsync(p, epoch, next, func(off int64, err error) {
		c.mu.Lock()
		e.pending = false
		if err == nil && c.mu.parts[p] == lp {
			e.meta, e.exists, e.offset = next, true, off
			if next.State == Dead {
				delete(lp.txns, id)
			}
		} else if !e.exists && lp.txns[id] == e {
			delete(lp.txns, id)
		}
		c.mu.Unlock()
		done(next, epoch, err)
	})
}

// update is updateAsync waiting for its outcome or ctx.
func (c *Coordinator) update(ctx context.Context, id string, decide func(cur Meta, exists bool) (Meta, bool, error)) (Meta, int32, error) {
	type result struct {
		m     Meta
		epoch int32
		err   error
	}
	r, err := block(ctx, func(done func(result)) {
		c.updateAsync(id, decide, func(m Meta, epoch int32, err error) { done(result{m, epoch, err}) })
	})
	if err != nil {
		return Meta{}, -1, err
	}
	return r.m, r.epoch, r.err
}

// writeAsync appends m to __transaction_state-p as leader in leader epoch epoch and calls
// done once acks=all is met or failed (Config.WriteTimeoutMs at most). A Dead state is
// written as a tombstone (the id expired).
func (c *Coordinator) writeAsync(p, epoch int32, m Meta, done func(int64, error)) {
	r, ok := c.b.Replica(StateTopic, p)
	if !ok || !r.IsLeader() || r.LeaderEpoch() != epoch {
		done(-1, fmt.Errorf("broker %d no longer leads %s-%d in leader epoch %d: %w", c.b.ID(), StateTopic, p, epoch, kerr.NotCoordinator))
		return
	}
	rec := records.Record{Key: Key(m.TransactionalID), Value: Value(m)}
	if m.State == Dead {
		rec.Value = nil
	}
	batch := records.AppendBatch(nil, 0, 0, c.now(), []records.Record{rec})
	parts := []broker.ProducePartition{{Topic: StateTopic, Partition: p, Records: batch, InternalTopicsAllowed: true}}
	result := func() {
		if err := parts[0].Err; err != nil {
			done(-1, writeError(fmt.Errorf("writing transactional id %q to %s-%d: %w", m.TransactionalID, StateTopic, p, err)))
			return
		}
		done(parts[0].BaseOffset, nil)
	}
	w := c.b.ProduceAppend(-1, parts)
	if w == nil {
		result()
		return
	}
	c.await(w, result)
}

// hw is the HW of __transaction_state-p on this broker (0 when it has no replica).
func (c *Coordinator) hw(p int32) int64 {
	if r, ok := c.b.Replica(StateTopic, p); ok {
		return r.HW()
	}
	return 0
}

// writeError maps a failed __transaction_state write to what the request answers (Kafka's
// TransactionStateManager.appendTransactionToLog): NOT_COORDINATOR when this broker lost the
// partition, COORDINATOR_NOT_AVAILABLE when it is short of replicas or timed out.
func writeError(err error) error {
	switch {
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.KafkaStorageError), errors.Is(err, kerr.NotCoordinator):
		return fmt.Errorf("%v: %w", err, kerr.NotCoordinator)
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.NotEnoughReplicas),
		errors.Is(err, kerr.NotEnoughReplicasAfterAppend), errors.Is(err, kerr.RequestTimedOut):
		return fmt.Errorf("%v: %w", err, kerr.CoordinatorNotAvailable)
	}
	return fmt.Errorf("%v: %w", err, kerr.UnknownServerError)
}
