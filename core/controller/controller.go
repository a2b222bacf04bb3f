package controller

import (
	"context"
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

	// epochs maps each alive (unfenced) broker to the epoch of its current registration;
	// replaced as a whole on every change, read lock-free (BrokerEpoch).
	epochs atomic.Pointer[map[int32]int64]

	mu struct {
		sync.Mutex
		brokers map[int32]*brokerState
		topics  map[string]*topicState
		// created counts created topics; topic k's placement starts at
		// broker index k % n so that topics do not all start at one broker. It also
		// numbers the topics' ids (topicState.seq).
		created int
		// brokerConfigs holds the dynamic broker configs by resource: "" the cluster-wide
		// default, "<id>" one broker's (Kafka's DYNAMIC_DEFAULT_BROKER_CONFIG and
		// DYNAMIC_BROKER_CONFIG); values validated, entries never empty.
		brokerConfigs map[string]map[string]string
		// lastBrokerEpoch is the epoch of the newest registration (broker epochs
		// increase over the cluster's life, across controller restarts).
		lastBrokerEpoch int64
		offsets         Offsets
		// subs holds every subscriber whose delivery goroutine has not
		// exited yet (cancelled ones included until then, for Sync).
		subs   map[*subscriber]struct{}
		closed bool
		// counters of Stats (gauges are computed in Stats).
		elections, unclean, lost, isrChanges, isrShrinks int64
		// store is the metadata log (nil: in memory only); batch holds the records of the
		// operation under way and outbox its notifications, both flushed by unlock.
		store    *store
		batch    []record
		outbox   []outMsg
		storeErr error
	}
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
	// seq numbers the topic's creation over the cluster's life (its TopicID); 0 for a
	// topic recorded before topic ids existed.
	seq     int64
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
	c.mu.brokers = make(map[int32]*brokerState)
	c.mu.topics = make(map[string]*topicState)
	c.mu.brokerConfigs = make(map[string]map[string]string)
	c.mu.subs = make(map[*subscriber]struct{})
	c.publishEpochsLocked()
	if cfg.Dir == "" {
		return c, Recovery{}, nil
	}
	st, rec, err := openStore(vfs.Or(cfg.FS), cfg.Dir)
	if err != nil {
		return nil, rec, err
	}
	c.mu.store = st
	if err := c.loadLocked(st.loaded, &rec); err != nil {
		st.close()
		return nil, rec, err
	}
	return c, rec, nil
}

// lock takes the controller mutex for an operation that may change state; unlock writes the
// operation's records to the metadata log (fsync), then hands its notifications to the
// subscribers and releases the mutex.
func (c *Controller) lock() { c.mu.Lock() }

func (c *Controller) unlock() {
	c.flushLocked()
	c.mu.Unlock()
}

// flushLocked persists the batch and delivers the outbox (mu held).
func (c *Controller) flushLocked() {
	if len(c.mu.batch) > 0 {
		if c.mu.store != nil {
			if err := c.mu.store.append(c.mu.batch, c.snapshotRecordsLocked); err != nil {
				if c.mu.storeErr == nil {
					c.logf("controller: metadata log %s: %v (metadata changes are no longer durable)", c.cfg.Dir, err)
				}
				c.mu.storeErr = err
			}
		}
		clear(c.mu.batch)
		c.mu.batch = c.mu.batch[:0]
	}
	for _, m := range c.mu.outbox {
		for s := range c.mu.subs {
			if m.forBroker(s.broker) {
				s.push(m.u)
			}
		}
	}
	clear(c.mu.outbox)
	c.mu.outbox = c.mu.outbox[:0]
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
func (c *Controller) RegisterBroker(reg Registration) int64 {
	snap := c.snapshotOffsets(func(st *PartitionState) bool { return slices.Contains(st.Replicas, reg.ID) })
	c.lock()
	defer c.unlock()
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
	return b.epoch
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
// subscription that delivers nothing, and later changes are not persisted.
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
