package controller

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isrbench/isrbench/core/vfs"
)

// Controller is the in-process metadata plane: brokers, topics, replica
// placement, leader election and ISR changes. Brokers call it directly.
//
// All methods are safe for concurrent use by any number of goroutines. One
// mutex (mu) guards the state; no method calls out (subscription callbacks,
// Offsets) while holding it. Every change is written to the metadata log (when
// Config.Dir is set) before subscribers hear of it.
type Controller struct {
	cfg       Config
	now       func() int64
	timeoutNs int64
	logf      func(format string, args ...any)
	topicIDs  atomic.Pointer[TopicIDIndex] // replaced whole after topic changes, read lock-free

	// epochs maps each alive (unfenced) broker to the epoch of its current registration;
	// replaced as a whole on every change, read lock-free (BrokerEpoch).
	epochs atomic.Pointer[map[int32]int64]

	mu struct {
		sync.Mutex
		// image is the live state (brokers, topics, configs), changed by operations.
		image
		offsets Offsets
		// subs holds every subscriber whose delivery goroutine has not
		// exited yet (cancelled ones included until then, for Sync).
		subs   map[*subscriber]struct{}
		closed bool
		counters
		// store is the metadata log (nil: in memory only); batch holds the records of the
		// operation under way and outbox its notifications, both flushed by unlock.
		store  *store
		batch  []record
		outbox []outMsg
		// durable is the state the metadata log holds (store != nil only); undo what an
		// operation may change beyond it, taken by lock: a change that cannot be
		// persisted is rolled back from both (rollbackLocked).
		durable image
		undo    undo
		// storeErr is the metadata log's write error while it cannot be written (nil
		// once it can again); storeFailures counts the changes refused meanwhile and
		// in total, refusedLogged when the last refusal was logged (cfg.Now).
		storeErr      error
		storeFailures int64
		refused       int64
		refusedLogged int64
		topicsChanged bool // topics changed or rolled back: flushLocked republishes topicIDs
	}
}

// counters are the controller's counters of Stats.
type counters struct {
	elections, unclean, lost, isrChanges, isrShrinks int64
}

// undo is what an operation may change that the durable image does not hold: the brokers'
// liveness and session state, the counters.
type undo struct {
	brokers         map[int32]brokerState
	counters        counters
	lastBrokerEpoch int64
}

type brokerState struct {
	info          BrokerInfo
	epoch         int64 // broker epoch of the current registration (-1: none in this controller's life)
	lastHeartbeat int64 // ns, cfg.Now clock
	// fencedBySession is true while the broker is fenced because its
	// session expired: its next heartbeat unfences it (as KRaft unfences a
	// broker that heartbeats again). A broker fenced by BrokerDown stays
	// fenced until BrokerUp or RegisterBroker.
	fencedBySession bool
	// offlineDir: the broker reported its log directory offline; it stays fenced until it
	// registers again.
	offlineDir bool
}

type topicState struct {
	name string
	// seq numbers the topic's creation over the cluster's life; 0 for a topic recorded
	// before topics were numbered.
	seq int64
	// id is the incarnation's topic id (topicid.go), never zero.
	id      TopicID
	configs map[string]string // validated overrides only
	parts   []PartitionState  // index = partition id; owned by the controller
	// damaged[p] lists the brokers whose replica of partition p lost acknowledged data
	// (recovery found its log shorter than its checkpointed HW, or missing): they are not
	// elected cleanly until they rejoin the ISR from a leader.
	damaged map[int32][]int32
}

// New returns a Controller with no brokers and no topics, kept in memory only. Use Open to
// keep the metadata in a directory.
func New(cfg Config) *Controller {
	cfg.Dir = ""
	c, _, err := Open(cfg)
	if err != nil {
		panic("BUG: controller.New without a directory failed: " + err.Error())
	}
	return c
}

// Open returns a Controller whose metadata (brokers and their epochs, topics with their
// configs, partition states, damaged replicas) is kept in Config.Dir's metadata log, loaded
// from it if it exists: what a KRaft controller quorum's metadata log is to Kafka. A loaded
// controller knows every broker but considers all of them fenced (their processes are new
// incarnations) and every partition offline until its brokers register again; the ISRs are
// kept, so the first ISR member to register is elected (see RegisterBroker). Recovery says
// what was loaded and repaired. Without Config.Dir it is New.
func Open(cfg Config) (*Controller, Recovery, error) {
	c := &Controller{cfg: cfg, now: cfg.Now, logf: cfg.Logf}
	if c.now == nil {
		c.now = func() int64 { return time.Now().UnixNano() }
	}
	if c.logf == nil {
		c.logf = stdlog.Printf
	}
	ms := cfg.BrokerSessionTimeoutMs
	if ms <= 0 {
		ms = DefaultBrokerSessionTimeoutMs
	}
	c.timeoutNs = ms * int64(time.Millisecond)
	c.mu.image = newImage()
	c.mu.subs = make(map[*subscriber]struct{})
	c.publishEpochsLocked()
	c.publishTopicIDsLocked()
	if cfg.Dir == "" {
		return c, Recovery{}, nil
	}
	st, o, rec, err := openStore(vfs.Or(cfg.FS), cfg.Dir)
	if err != nil {
		return nil, rec, err
	}
	c.mu.store = st
	c.mu.durable = newImage()
	c.mu.undo.brokers = make(map[int32]brokerState)
	c.lock()
	c.mu.topicsChanged = true
	err = c.loadLocked(o.recs, &rec)
	if err == nil && o.heal {
		// A copy was healed, the format was older or a fallback was used: write the
		// state as a new generation now, so both copies are whole again.
		if err = st.compact(c.mu.durable.records()); err == nil {
			rec.Generation = st.gen
			rec.Reason += fmt.Sprintf("; rewritten as generation %d", st.gen)
		} else {
			err = fmt.Errorf("controller: metadata log %s: writing the repaired state: %w", cfg.Dir, err)
		}
	}
	c.mu.Unlock()
	if err != nil {
		st.close()
		return nil, rec, err
	}
	return c, rec, nil
}

// lock takes the controller mutex for an operation that may change state, noting what a
// rollback needs; unlock writes the operation's records to the metadata log (fsync), then
// hands its notifications to the subscribers and releases the mutex.
func (c *Controller) lock() {
	c.mu.Lock()
	if c.mu.store == nil {
		return
	}
	u := &c.mu.undo
	clear(u.brokers)
	for id, b := range c.mu.brokers {
		u.brokers[id] = *b
	}
	u.counters, u.lastBrokerEpoch = c.mu.counters, c.mu.lastBrokerEpoch
}

// unlock ends an operation: it persists and delivers the operation's changes, or, when the
// metadata log cannot be written, rolls them back and returns the error (the change was
// not made and nobody heard of it).
func (c *Controller) unlock() error {
	err := c.flushLocked()
	c.mu.Unlock()
	return err
}

// unlockErr is unlock for an operation whose result is *err: a change that could not be
// persisted makes it fail.
func (c *Controller) unlockErr(err *error) {
	if ferr := c.unlock(); ferr != nil && *err == nil {
		*err = ferr
	}
}

// flushLocked persists the batch and delivers the outbox (mu held). If the batch cannot be
// persisted, nothing is delivered and the operation is rolled back; the error says why.
func (c *Controller) flushLocked() error {
	defer c.maybePublishTopicIDsLocked()
	if len(c.mu.batch) > 0 && (c.mu.store != nil || c.cfg.Dir != "") {
		if err := c.persistLocked(); err != nil {
			c.rollbackLocked()
			clear(c.mu.batch)
			c.mu.batch = c.mu.batch[:0]
			clear(c.mu.outbox)
			c.mu.outbox = c.mu.outbox[:0]
			return err
		}
	}
	clear(c.mu.batch)
	c.mu.batch = c.mu.batch[:0]
	for _, m := range c.mu.outbox {
		for s := range c.mu.subs {
			if m.forBroker(s.broker) {
				s.push(m.u)
			}
		}
	}
	clear(c.mu.outbox)
	c.mu.outbox = c.mu.outbox[:0]
	return nil
}

// ErrMetadataLog is wrapped by every error of a change refused because the metadata log
// cannot be written (a full disk, an I/O error). The change was not made. The error also
// wraps kerr.KafkaStorageError, the code Kafka clients get for it.
var ErrMetadataLog = errors.New("the metadata log cannot be written")

// persistLocked appends the batch to the metadata log. After an earlier failure it first
// writes a new generation from the durable state (the failed write's tail is uncertain).
func (c *Controller) persistLocked() error {
	st := c.mu.store
	if st == nil {
		// Closed: a change now could not be persisted, so it is not made.
		return fmt.Errorf("controller: closed, the metadata log %s is not open: the change was not made: %w", c.cfg.Dir, ErrMetadataLog)
	}
	if c.mu.storeErr != nil || st.failed != nil {
		if err := st.compact(c.mu.durable.records()); err != nil {
			return c.refuseLocked(err)
		}
		if c.mu.storeErr != nil {
			c.logf("controller: metadata log %s can be written again (generation %d): metadata changes resume after %d refused",
				c.cfg.Dir, st.gen, c.mu.refused)
		}
		st.failed, c.mu.storeErr, c.mu.refused = nil, nil, 0
	}
	data, err := encodeBatch(nil, c.mu.batch)
	if err != nil {
		return fmt.Errorf("BUG: controller: encoding metadata records: %w", err)
	}
	if err := st.append(data); err != nil {
		st.failed = err
		return c.refuseLocked(err)
	}
	for i, r := range c.mu.batch {
		if err := c.mu.durable.apply(r); err != nil {
			panic(fmt.Sprintf("BUG: controller: metadata record %d (%s) of a batch does not apply: %v", i+1, r.Type, err))
		}
	}
	if st.needsCompaction() {
		if err := st.compact(c.mu.durable.records()); err != nil {
			// The batch is durable in the current generation; the next change writes a
			// new generation first.
			st.failed = err
			c.logf("controller: metadata log %s: compaction failed (the change is durable; the next one retries): %v", c.cfg.Dir, err)
		}
	}
	return nil
}

// rollbackLocked undoes the operation under way: the topics and configs from the durable
// image, the brokers and counters from what lock noted.
func (c *Controller) rollbackLocked() {
	c.mu.topics = c.mu.durable.cloneTopics()
	c.mu.topicsChanged = true
	c.mu.brokerConfigs = cloneBrokerConfigs(c.mu.durable.brokerConfigs)
	c.mu.users = c.mu.durable.users.clone()
	c.mu.created = c.mu.durable.created
	u := &c.mu.undo
	for id := range c.mu.brokers {
		if _, ok := u.brokers[id]; !ok {
			delete(c.mu.brokers, id)
		}
	}
	for id, b := range u.brokers {
		if cur, ok := c.mu.brokers[id]; ok {
			*cur = b
		} else {
			cp := b
			c.mu.brokers[id] = &cp
		}
	}
	c.mu.counters, c.mu.lastBrokerEpoch = u.counters, u.lastBrokerEpoch
	c.publishEpochsLocked()
}

// MetadataLogError returns the error that keeps the metadata log from being written now, or
// nil when it can be written (or there is none).
func (c *Controller) MetadataLogError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.storeErr
}

// SetOffsets installs the Offsets used to count offsets lost by unclean
// elections (Stats.LostOffsets). nil disables the counting.
func (c *Controller) SetOffsets(o Offsets) {
	c.mu.Lock()
	c.mu.offsets = o
	c.mu.Unlock()
}

// publishEpochsLocked rebuilds the lock-free map of alive brokers' epochs (mu held).
func (c *Controller) publishEpochsLocked() {
	m := make(map[int32]int64, len(c.mu.brokers))
	for id, b := range c.mu.brokers {
		if b.info.Alive {
			m[id] = b.epoch
		}
	}
	c.epochs.Store(&m)
}

// BrokerEpoch returns the broker epoch of broker id's current registration if the broker is
// alive (unfenced), else -1. Lock-free: brokers call it on the replication path to check
// that a follower's fetches come from its current incarnation.
func (c *Controller) BrokerEpoch(id int32) int64 {
	if e, ok := (*c.epochs.Load())[id]; ok {
		return e
	}
	return -1
}

// Registration is what a broker tells the controller when it (re)starts.
type Registration struct {
	ID   int32
	Host string
	Port int32
	// Damaged lists the partitions whose local replica lost acknowledged data: recovery
	// found the log shorter than the HW checkpointed for it (a deleted segment or
	// directory, a power loss of unsynced bytes below the HW). Such a replica is not
	// elected cleanly until it has rejoined the ISR from a leader.
	Damaged []TopicPartition
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// RegisterBroker registers a new incarnation of broker reg.ID (every start of a broker
// process, after a kill, a crash or a clean stop, within broker.session.timeout.ms or not)
// and returns its broker epoch, larger than any before (KIP-380; KRaft's incarnation).
//
// The previous incarnation is fenced first, as BrokerDown does: the partitions it led elect
// another alive ISR member, and it leaves every ISR in which it is not the last member. The
// new incarnation then leads nothing and is in no ISR except as the last member of an
// offline partition, which it leads again at once if its replica is not damaged (a clean
// election of the last replica known to be in sync). Everywhere else it rejoins the ISR by
// the join rule, once it has truncated to the leader and caught up. Damaged replicas are
// recorded and skipped by clean elections.
//
// When the metadata log cannot be written the registration is refused (ErrMetadataLog) and
// the broker must not start serving: the cluster does not know this incarnation.
func (c *Controller) RegisterBroker(reg Registration) (epoch int64, err error) {
	snap := c.snapshotOffsets(func(st *PartitionState) bool { return slices.Contains(st.Replicas, reg.ID) })
	c.lock()
	defer c.unlockErr(&err)
	b, ok := c.mu.brokers[reg.ID]
	if !ok {
		b = &brokerState{info: BrokerInfo{ID: reg.ID}, epoch: -1}
		c.mu.brokers[reg.ID] = b
	}
	if b.info.Alive {
		c.fenceLocked(reg.ID, false, snap) // the old incarnation
	}
	for _, tp := range reg.Damaged {
		c.markDamagedLocked(tp, reg.ID)
	}
	c.mu.lastBrokerEpoch++
	b.epoch = c.mu.lastBrokerEpoch
	b.info.Host, b.info.Port = reg.Host, reg.Port
	b.offlineDir = false
	c.recordBrokerLocked(b)
	c.dropFromISRsLocked(reg.ID)
	c.unfenceLocked(reg.ID, snap)
	return b.epoch, nil
}

// Heartbeat records that broker id (incarnation brokerEpoch; -1 skips the check) is alive
// at the current time. A broker fenced by an expired session (CheckSessions) is unfenced by
// its next heartbeat, with the elections of BrokerUp; a broker fenced by BrokerDown or an
// offline log directory is not (a heartbeat racing with a kill must not revive it). Unknown
// ids and heartbeats of an older incarnation are ignored.
func (c *Controller) Heartbeat(id int32, brokerEpoch int64) {
	c.mu.Lock()
	b, ok := c.mu.brokers[id]
	if !ok || (brokerEpoch >= 0 && brokerEpoch != b.epoch) {
		c.mu.Unlock()
		return
	}
	b.lastHeartbeat = c.now()
	revive := !b.info.Alive && b.fencedBySession && !b.offlineDir
	c.mu.Unlock()
	if revive {
		c.brokerUp(id, true)
	}
}

// CheckSessions fences every alive broker whose last heartbeat is older than
// broker.session.timeout.ms (now - last > timeout), stalest first, each as
// BrokerDown does. The embedded cluster calls it periodically (or use Run).
func (c *Controller) CheckSessions() {
	now := c.now()
	c.mu.Lock()
	var expired []*brokerState
	for _, b := range c.mu.brokers {
		if b.info.Alive && now-b.lastHeartbeat > c.timeoutNs {
			expired = append(expired, b)
		}
	}
	sort.Slice(expired, func(i, j int) bool {
		if expired[i].lastHeartbeat != expired[j].lastHeartbeat {
			return expired[i].lastHeartbeat < expired[j].lastHeartbeat
		}
		return expired[i].info.ID < expired[j].info.ID
	})
	ids := make([]int32, len(expired))
	for i, b := range expired {
		ids[i] = b.info.ID
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.brokerDown(id, true)
	}
}

// Run calls CheckSessions every `every` until ctx is done, then returns
// ctx.Err(). every must be positive.
func (c *Controller) Run(ctx context.Context, every time.Duration) error {
	return runEvery(ctx, "Run", every, c.CheckSessions)
}

// runEvery calls fn every `every` until ctx is done, then returns ctx.Err(); the loop of
// the controller method name. A non-positive interval is a programmer error.
func runEvery(ctx context.Context, name string, every time.Duration, fn func()) error {
	if every <= 0 {
		panic("BUG: controller." + name + ": non-positive interval")
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			fn()
		}
	}
}

// Brokers returns every registered broker, ordered by id.
func (c *Controller) Brokers() []BrokerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]BrokerInfo, 0, len(c.mu.brokers))
	for _, b := range c.mu.brokers {
		out = append(out, b.info)
	}
	slices.SortFunc(out, func(a, b BrokerInfo) int { return int(a.ID) - int(b.ID) })
	return out
}

// Broker returns broker id's registration.
func (c *Controller) Broker(id int32) (BrokerInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.mu.brokers[id]
	if !ok {
		return BrokerInfo{}, false
	}
	return b.info, true
}

// Stats returns the controller's counters and gauges.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{
		Elections:        c.mu.elections,
		UncleanElections: c.mu.unclean,
		LostOffsets:      c.mu.lost,
		ISRChanges:       c.mu.isrChanges,
		ISRShrinks:       c.mu.isrShrinks,

		MetadataWriteFailures: c.mu.storeFailures,
	}
	if c.mu.storeErr != nil {
		s.MetadataLogError = c.mu.storeErr.Error()
	}
	for _, t := range c.mu.topics {
		for i := range t.parts {
			if t.parts[i].Leader == NoLeader {
				s.OfflinePartitions++
			}
		}
	}
	for _, b := range c.mu.brokers {
		if b.info.Alive {
			s.ActiveBrokers++
		} else {
			s.FencedBrokers++
		}
	}
	return s
}

// Close stops every subscription's delivery (as their cancel functions do) and closes the
// metadata log. The controller's state stays readable; later Subscribe calls get a
// subscription that delivers nothing, and a later change of a controller with a metadata log
// is refused (ErrMetadataLog: it could not be persisted).
func (c *Controller) Close() {
	c.mu.Lock()
	c.mu.closed = true
	subs := make([]*subscriber, 0, len(c.mu.subs))
	for s := range c.mu.subs {
		subs = append(subs, s)
	}
	if c.mu.store != nil {
		c.mu.store.close()
		c.mu.store = nil
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.stop()
	}
}

// aliveLocked reports whether broker id is registered and not fenced.
func (c *Controller) aliveLocked(id int32) bool {
	b, ok := c.mu.brokers[id]
	return ok && b.info.Alive
}

// aliveIDsLocked returns the unfenced broker ids in ascending order.
func (c *Controller) aliveIDsLocked() []int32 {
	ids := make([]int32, 0, len(c.mu.brokers))
	for id, b := range c.mu.brokers {
		if b.info.Alive {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
