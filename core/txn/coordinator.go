package txn

import (
	"context"
	"errors"
	"fmt"
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

// Start starts the leadership watcher and the expiry timer.
func (c *Coordinator) Start() {
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.watch() }()
	go func() { defer c.wg.Done(); c.expireLoop() }()
}

// Close stops the goroutines (transactions being completed are finished by the next
// coordinator of their partition, which reloads them). Idempotent.
func (c *Coordinator) Close() {
	c.cancel()
	c.mu.Lock()
	c.mu.closed = true
	c.mu.parts = map[int32]*loaded{}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Coordinator) watch() {
	for {
		ch := c.b.Changed()
		c.Scan()
		select {
		case <-ch:
		case <-c.ctx.Done():
			return
		}
	}
}

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
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.load(l.p, l.epoch) }()
	}
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
				return records.ForEachRecord(batch, func(_, _ int64, key, value []byte) error {
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
					txns[id] = m
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
		lp.txns[id] = &entry{meta: m, exists: true}
		if m.State == PrepareCommit || m.State == PrepareAbort || m.State == PrepareEpochFence {
			resume = append(resume, m)
		}
	}
	lp.loading = false
	c.mu.Unlock()
	if len(txns) > 0 || bad > 0 {
		c.logf("%s-%d: loaded %d transactional ids (%d undecodable records) up to offset %d, leader epoch %d; completing %d",
			StateTopic, p, len(txns), bad, end, epoch, len(resume))
	}
	for _, m := range resume {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); _ = c.complete(c.ctx, m) }()
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

// update runs decide on id's state under mu, writes what it returns (when write) to
// __transaction_state with acks=all and installs it once acknowledged. It returns the state
// decided (the current one when nothing is written) and the coordinator epoch.
func (c *Coordinator) update(ctx context.Context, id string, decide func(cur Meta, exists bool) (Meta, bool, error)) (Meta, int32, error) {
	c.mu.Lock()
	p, lp, err := c.partLocked(id)
	if err != nil {
		c.mu.Unlock()
		return Meta{}, -1, err
	}
	e := lp.txns[id]
	if e != nil && e.pending {
		c.mu.Unlock()
		return Meta{}, -1, fmt.Errorf("transactional id %q has a request in flight: %w", id, kerr.ConcurrentTransactions)
	}
	var cur Meta
	if e != nil && e.exists {
		cur = e.meta
	}
	next, write, err := decide(cur, e != nil && e.exists)
	if err != nil || !write {
		c.mu.Unlock()
		return next, lp.epoch, err
	}
	if e == nil {
		e = &entry{}
		lp.txns[id] = e
	}
	e.pending = true
	epoch := lp.epoch
	c.mu.Unlock()

	err = c.write(ctx, p, epoch, next)

	c.mu.Lock()
	e.pending = false
	if err == nil && c.mu.parts[p] == lp {
		e.meta, e.exists = next, true
	} else if !e.exists && lp.txns[id] == e {
		delete(lp.txns, id)
	}
	c.mu.Unlock()
	return next, epoch, err
}

// write appends m to __transaction_state-p as leader in leader epoch epoch and waits for
// acks=all (Config.WriteTimeoutMs at most).
func (c *Coordinator) write(ctx context.Context, p, epoch int32, m Meta) error {
	r, ok := c.b.Replica(StateTopic, p)
	if !ok || !r.IsLeader() || r.LeaderEpoch() != epoch {
		return fmt.Errorf("broker %d no longer leads %s-%d in leader epoch %d: %w", c.b.ID(), StateTopic, p, epoch, kerr.NotCoordinator)
	}
	batch := records.AppendBatch(nil, 0, 0, c.now(), []records.Record{{Key: Key(m.TransactionalID), Value: Value(m)}})
	parts := []broker.ProducePartition{{Topic: StateTopic, Partition: p, Records: batch}}
	if w := c.b.ProduceAppend(-1, parts); w != nil {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(c.cfg.WriteTimeoutMs)*time.Millisecond)
		w.Wait(ctx)
		cancel()
	}
	if err := parts[0].Err; err != nil {
		return writeError(fmt.Errorf("writing transactional id %q to %s-%d: %w", m.TransactionalID, StateTopic, p, err))
	}
	return nil
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
