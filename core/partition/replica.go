package partition

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

// Config configures a Replica. Zero fields take the defaults noted.
type Config struct {
	// MinInsyncReplicas is min.insync.replicas, default 1 (0 means 1).
	MinInsyncReplicas int
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms in milliseconds,
	// default 30000 (0 means the default).
	ReplicaLagTimeMaxMs int64
	// HWUpdate is isrbench.hw.update: "atomic" (default: CAS-to-max, no
	// mutex on the fetch -> HW -> ack path) or "mutex" (ablation: every
	// follower update and HW read under one mutex).
	HWUpdate string
	// TruncateMode is "epoch" (default, KIP-101/KIP-279 truncation by
	// leader epoch) or "hw" (ablation: a follower truncates to its local HW
	// before fetching from a new leader, the pre-KIP-101 behaviour).
	TruncateMode string
	// Now is the clock in nanoseconds (any fixed origin); nil = wall clock.
	Now func() int64
	// OnHWLag, if set, is called once per leader append when the HW passes
	// its last offset, with the time since the append (ns) and its record
	// count. It is called from whatever goroutine advanced the HW, under a
	// small lock: it must be quick and must not call into the Replica.
	OnHWLag func(lagNs int64, records int64)
}

// Kafka defaults.
const (
	DefaultReplicaLagTimeMaxMs = 30000
	DefaultMinInsyncReplicas   = 1
)

// HWUpdate and TruncateMode values.
const (
	HWUpdateAtomic    = "atomic"
	HWUpdateMutex     = "mutex"
	TruncateModeEpoch = "epoch"
	TruncateModeHW    = "hw"
)

func (c *Config) fill() error {
	if c.MinInsyncReplicas < 0 {
		return fmt.Errorf("min.insync.replicas %d: must be >= 1", c.MinInsyncReplicas)
	}
	if c.MinInsyncReplicas == 0 {
		c.MinInsyncReplicas = DefaultMinInsyncReplicas
	}
	if c.ReplicaLagTimeMaxMs < 0 {
		return fmt.Errorf("replica.lag.time.max.ms %d: must be > 0", c.ReplicaLagTimeMaxMs)
	}
	if c.ReplicaLagTimeMaxMs == 0 {
		c.ReplicaLagTimeMaxMs = DefaultReplicaLagTimeMaxMs
	}
	switch c.HWUpdate {
	case "":
		c.HWUpdate = HWUpdateAtomic
	case HWUpdateAtomic, HWUpdateMutex:
	default:
		return fmt.Errorf("isrbench.hw.update %q: want %q or %q", c.HWUpdate, HWUpdateAtomic, HWUpdateMutex)
	}
	switch c.TruncateMode {
	case "":
		c.TruncateMode = TruncateModeEpoch
	case TruncateModeEpoch, TruncateModeHW:
	default:
		return fmt.Errorf("truncate mode %q: want %q or %q", c.TruncateMode, TruncateModeEpoch, TruncateModeHW)
	}
	if c.Now == nil {
		c.Now = func() int64 { return time.Now().UnixNano() }
	}
	return nil
}

// logStore is the part of *log.Log a Replica uses (tests use an in-memory
// fake).
type logStore interface {
	Append(blob []byte, assignOffsets bool, leaderEpoch int32) (log.AppendInfo, error)
	LEO() int64
	LogStart() int64
	Read(offset, maxOffset int64, maxBytes int, minOneBatch bool) (log.Slice, error)
	TruncateTo(offset int64) error
	TruncateFullyAndStartAt(offset int64) error
	ApplyRetention(nowMs int64, maxDeletableOffset int64) (deletedSegments int, err error)
	Close() error
}

// Replica is one partition on one broker: its log, leader epoch cache,
// role, ISR, high watermark and (as leader) its followers' progress.
//
// Every method is safe for concurrent use. The produce -> follower fetch ->
// HW advance -> ack path (AppendAsLeader, UpdateFollower, HW, WaitForHW,
// HWChanged) takes no mutex with HWUpdate "atomic": the HW is an atomic
// advanced by compare-and-swap-to-max, follower progress fields are atomics
// and the role/ISR is an immutable snapshot swapped on change. Role and ISR
// changes, follower appends and truncation are serialised by one mutex
// (they are rare or single-caller: one fetcher per partition).
//
// Offsets: LEO and HW are exclusive (next offset to write / first offset
// consumers cannot read); log start, fetch offsets and last offsets are
// inclusive.
type Replica struct {
	topic     string
	partition int32
	id        int32
	log       logStore
	dir       string
	cfg       Config
	lagMaxNs  int64
	mutexHW   bool

	epochs *EpochCache

	state atomic.Pointer[snapshot]
	// leaderAppends counts AppendAsLeader calls past their leadership check and not yet
	// done. A role change stores its new snapshot first, then drains this to zero
	// (drainLeaderAppends), so no append made under the old role or epoch lands after
	// MakeFollower, MakeLeader or Close returns (Kafka holds a read lock across the append
	// for the same reason). Sequentially consistent atomics make this a handshake: an append
	// either sees the new snapshot or is counted before the role change looks.
	leaderAppends atomic.Int64
	hw            atomic.Int64

	// hwMu is the HWUpdate "mutex" ablation: with it every follower update,
	// HW computation and HW read takes this mutex.
	hwMu sync.Mutex

	// roleMu serialises MakeLeader, MakeFollower, ApplyISR, follower
	// appends, truncation and Close (never taken on the leader's hot path).
	roleMu sync.Mutex

	hwSig  notifier
	leoSig notifier
	lag    lagRing

	// producers is the idempotent-producer state (producerstate.go), with
	// its own mutex, taken only for batches carrying a producer id.
	producers producerState
}

// snapshot is an immutable view of the replica's role and ISR; it is
// replaced as a whole (copy-on-write). Follower progress objects are shared
// between snapshots of one leadership term and hold atomics.
type snapshot struct {
	st         controller.PartitionState // private copy
	leader     bool                      // st.Leader == this broker
	closed     bool
	epochStart int64       // start offset (inclusive) of st.LeaderEpoch on this leader, -1 if not leader
	followers  []*progress // leader only: one per replica other than the leader
}

func (s *snapshot) follower(id int32) *progress {
	for _, f := range s.followers {
		if f.id == id {
			return f
		}
	}
	return nil
}

func (s *snapshot) inISR(id int32) bool { return slices.Contains(s.st.ISR, id) }

// progress is the leader's view of one follower (Kafka's Replica on the
// leader). Fields are atomics: a follower's fetches update them while the
// HW computation and ISR expiration read them.
type progress struct {
	id                 int32
	leo                atomic.Int64 // last fetch offset (exclusive LEO of the follower), -1 unknown
	logStart           atomic.Int64 // follower's log start offset (inclusive), -1 unknown
	lastCaughtUpNs     atomic.Int64
	lastFetchLeaderLEO atomic.Int64
	lastFetchTimeNs    atomic.Int64
}

// NewReplica opens the replica state of topic-partition on broker brokerID
// over the log l (the Replica owns l from now on: Close closes it) and the
// leader epoch cache in dir (leader-epoch-checkpoint, created on first
// change). The replica starts with no role (not leader, leader epoch -1) and
// HW = log start offset; call RestoreHW with a checkpointed HW, then MakeLeader or
// MakeFollower.
func NewReplica(topic string, partition int32, brokerID int32, l *log.Log, dir string, cfg Config) (*Replica, error) {
	if l == nil {
		return nil, errors.New("partition: NewReplica: nil log")
	}
	return newReplica(topic, partition, brokerID, l, dir, cfg)
}

func newReplica(topic string, partition int32, brokerID int32, l logStore, dir string, cfg Config) (*Replica, error) {
	if err := cfg.fill(); err != nil {
		return nil, fmt.Errorf("partition %s-%d: %w", topic, partition, err)
	}
	var epochs *EpochCache
	if dir == "" {
		epochs = NewEpochCache()
	} else {
		var err error
		if epochs, err = LoadEpochCache(dir); err != nil {
			return nil, fmt.Errorf("partition %s-%d: %w", topic, partition, err)
		}
	}
	// Entries at or past the LEO belong to records lost in a crash (the
	// cache may be written before the log, as Kafka does).
	if err := epochs.TruncateFromEnd(l.LEO()); err != nil {
		return nil, fmt.Errorf("partition %s-%d: %w", topic, partition, err)
	}
	r := &Replica{
		topic: topic, partition: partition, id: brokerID,
		log: l, dir: dir, cfg: cfg,
		lagMaxNs: cfg.ReplicaLagTimeMaxMs * int64(time.Millisecond),
		mutexHW:  cfg.HWUpdate == HWUpdateMutex,
		epochs:   epochs,
	}
	r.hwSig.init()
	r.leoSig.init()
	r.state.Store(&snapshot{
		st:         controller.PartitionState{Topic: topic, Partition: partition, Leader: controller.NoLeader, LeaderEpoch: -1, PartitionEpoch: -1},
		epochStart: -1,
	})
	r.hw.Store(min(l.LogStart(), l.LEO()))
	// Idempotent producers: rebuild their state from the recovered log.
	if err := r.rebuildProducers(); err != nil {
		return nil, err
	}
	return r, nil
}

// Topic returns the topic name.
func (r *Replica) Topic() string { return r.topic }

// Partition returns the partition number.
func (r *Replica) Partition() int32 { return r.partition }

// BrokerID returns the id of the broker hosting this replica.
func (r *Replica) BrokerID() int32 { return r.id }

// Config returns the effective configuration (defaults filled in).
func (r *Replica) Config() Config { return r.cfg }

// Epochs returns the leader epoch cache (for tools and tests).
func (r *Replica) Epochs() *EpochCache { return r.epochs }

// IsLeader reports whether this replica is the leader now.
func (r *Replica) IsLeader() bool { s := r.state.Load(); return s.leader && !s.closed }

// LeaderEpoch returns the leader epoch of the current role (-1 before the
// first MakeLeader/MakeFollower).
func (r *Replica) LeaderEpoch() int32 { return r.state.Load().st.LeaderEpoch }

// State returns the partition state this replica acts on (a copy).
func (r *Replica) State() controller.PartitionState { return r.state.Load().st.Clone() }

// ISR returns the current ISR. It is a shared snapshot: do not modify it.
func (r *Replica) ISR() []int32 { return r.state.Load().st.ISR }

// LEO returns the log end offset (exclusive).
func (r *Replica) LEO() int64 { return r.log.LEO() }

// LogStart returns the log start offset (inclusive).
func (r *Replica) LogStart() int64 { return r.log.LogStart() }

// HW returns the high watermark (exclusive).
func (r *Replica) HW() int64 {
	if r.mutexHW {
		r.hwMu.Lock()
		defer r.hwMu.Unlock()
	}
	return r.hw.Load()
}

// LatestEpoch returns the latest epoch of the leader epoch cache (the epoch
// a follower sends in OffsetForLeaderEpoch), or -1.
func (r *Replica) LatestEpoch() int32 { return r.epochs.Latest() }

// HWChanged returns a channel closed on the next HW advance (or role/ISR
// change). Check the HW after calling it, then wait on it. Cheap when nobody
// waits: the HW path only replaces the channel after HWChanged was called.
func (r *Replica) HWChanged() <-chan struct{} { return r.hwSig.wait() }

// LEOChanged returns a channel closed on the next append (or truncation or
// role change), for long-poll fetches. Same protocol as HWChanged.
func (r *Replica) LEOChanged() <-chan struct{} { return r.leoSig.wait() }

func (r *Replica) errNotLeader(s *snapshot) error {
	if s.closed {
		return fmt.Errorf("partition %s-%d on broker %d is closed: %w", r.topic, r.partition, r.id, kerr.NotLeaderForPartition)
	}
	return fmt.Errorf("partition %s-%d: broker %d is not the leader (leader %d, epoch %d): %w",
		r.topic, r.partition, r.id, s.st.Leader, s.st.LeaderEpoch, kerr.NotLeaderForPartition)
}

// AppendAsLeader appends blob (one or more RecordBatch v2 batches) as the
// leader: offsets from the LEO, partitionLeaderEpoch = the leader epoch.
// Errors: NotLeaderForPartition when not the leader; with requiredAcks -1
// and len(ISR) < min.insync.replicas, NotEnoughReplicas and nothing is
// appended (acks 0 and 1 append anyway). Waiting for acks=all is the
// caller's WaitForHW(info.LastOffset).
//
// Idempotent producers (producerstate.go): a batch with a producer id >= 0
// is sequence-checked and appended under the partition's producer-state
// mutex. A duplicate (a retry of one of the producer's last 5 batches) is
// not appended: it returns the original batch's offsets with Batches == 0
// and Records == 0. Sequence errors: OutOfOrderSequenceNumber,
// InvalidProducerEpoch. Batches without a producer id take no lock.
func (r *Replica) AppendAsLeader(blob []byte, requiredAcks int16) (log.AppendInfo, error) {
	if s := r.state.Load(); !s.leader || s.closed {
		// Not the leader: refused without touching leaderAppends, so a flood of produces
		// to a demoted leader does not keep a role change draining.
		return log.AppendInfo{}, r.errNotLeader(s)
	}
	r.leaderAppends.Add(1) // before the state load that decides: see leaderAppends
	defer r.leaderAppends.Add(-1)
	s := r.state.Load()
	if !s.leader || s.closed {
		return log.AppendInfo{}, r.errNotLeader(s)
	}
	if requiredAcks == -1 && len(s.st.ISR) < r.cfg.MinInsyncReplicas {
		return log.AppendInfo{}, fmt.Errorf("partition %s-%d: ISR %v has %d members, min.insync.replicas is %d: %w",
			r.topic, r.partition, s.st.ISR, len(s.st.ISR), r.cfg.MinInsyncReplicas, kerr.NotEnoughReplicas)
	}
	var info log.AppendInfo
	var err error
	if isIdempotentBlob(blob) { // hook: idempotent producers (producerstate.go)
		var dup bool
		info, dup, err = r.appendIdempotent(blob, s.st.LeaderEpoch)
		if dup {
			return info, nil // duplicate: nothing appended, original offsets
		}
	} else {
		info, err = r.log.Append(blob, true, s.st.LeaderEpoch)
	}
	if err != nil {
		return info, err
	}
	if r.cfg.OnHWLag != nil {
		now := r.cfg.Now()
		r.lag.push(lagEntry{lastOffset: info.LastOffset, appendNs: now, records: info.Records})
		if hw := r.hw.Load(); hw > info.LastOffset {
			r.lag.drain(hw, now, r.cfg.OnHWLag) // a follower was faster than us
		}
	}
	r.leoSig.notify()
	// An ISR of the leader alone (with min.insync.replicas <= 1) commits
	// right away; otherwise this is a no-op until followers fetch.
	r.maybeAdvanceHW(s)
	return info, nil
}

// WaitForHW blocks until the HW passes lastOffset (inclusive), i.e. HW >
// lastOffset. Errors: ctx done -> RequestTimedOut; the ISR fell below
// min.insync.replicas before the HW passed -> NotEnoughReplicasAfterAppend;
// leadership lost (or the leader epoch changed) -> NotLeaderForPartition.
func (r *Replica) WaitForHW(ctx context.Context, lastOffset int64) error {
	s := r.state.Load()
	if !s.leader || s.closed {
		return r.errNotLeader(s)
	}
	epoch := s.st.LeaderEpoch
	if r.hw.Load() > lastOffset {
		return nil // fast path: already committed, nothing armed
	}
	for {
		ch := r.hwSig.wait()
		// The HW is checked first: a record the HW has passed is committed even if
		// leadership moved since (the new leader holds it: it was in the ISR).
		if r.hw.Load() > lastOffset {
			return nil
		}
		s = r.state.Load()
		if !s.leader || s.closed || s.st.LeaderEpoch != epoch {
			return r.errNotLeader(s)
		}
		if len(s.st.ISR) < r.cfg.MinInsyncReplicas {
			return fmt.Errorf("partition %s-%d: offset %d written but ISR %v is below min.insync.replicas %d: %w",
				r.topic, r.partition, lastOffset, s.st.ISR, r.cfg.MinInsyncReplicas, kerr.NotEnoughReplicasAfterAppend)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("partition %s-%d: waiting for HW to pass offset %d (HW %d): %v: %w",
				r.topic, r.partition, lastOffset, r.hw.Load(), ctx.Err(), kerr.RequestTimedOut)
		}
	}
}

// maybeAdvanceHW recomputes the leader HW from s and applies it as
// CAS-to-max, then signals waiters.
func (r *Replica) maybeAdvanceHW(s *snapshot) {
	if r.mutexHW {
		r.hwMu.Lock()
		old, nw, ok := r.advanceLocked(s)
		r.hwMu.Unlock()
		if ok {
			r.afterAdvance(old, nw)
		}
		return
	}
	leo := r.log.LEO()
	hw, ok := HighWatermark(leo, s.st.ISR, r.id, s.followerLEO, r.cfg.MinInsyncReplicas)
	if !ok {
		return
	}
	for {
		cur := r.hw.Load()
		if hw <= cur {
			return
		}
		if r.hw.CompareAndSwap(cur, hw) {
			r.afterAdvance(cur, hw)
			return
		}
	}
}

// advanceLocked is the mutex ablation of the HW update (hwMu held).
func (r *Replica) advanceLocked(s *snapshot) (old, nw int64, ok bool) {
	hw, ok := HighWatermark(r.log.LEO(), s.st.ISR, r.id, s.followerLEO, r.cfg.MinInsyncReplicas)
	cur := r.hw.Load()
	if !ok || hw <= cur {
		return cur, cur, false
	}
	r.hw.Store(hw)
	return cur, hw, true
}

func (s *snapshot) followerLEO(id int32) int64 {
	if f := s.follower(id); f != nil {
		return f.leo.Load()
	}
	return -1
}

// afterAdvance runs after the HW moved from old to nw: waiters first (the
// ack path), then the HW-lag bookkeeping.
func (r *Replica) afterAdvance(_, nw int64) {
	r.hwSig.notify()
	if r.cfg.OnHWLag != nil {
		r.lag.drain(nw, r.cfg.Now(), r.cfg.OnHWLag)
	}
}

// UpdateFollower records a replica fetch of follower at fetchOffset (the
// follower's LEO, exclusive) with its log start offset (inclusive): the
// follower's LEO, Kafka's caught-up time, then the HW (CAS-to-max) and the
// acks=all waiters. It returns a proposed ISR (the current ISR plus the
// follower) when the follower is outside the ISR and may join; the caller
// sends it to the controller (AlterPartition) and calls ApplyISR with the
// accepted state. Errors: NotLeaderForPartition when not the leader,
// ReplicaNotAvailable for a broker that is not a replica, OffsetOutOfRange
// for a fetch offset past the leader's LEO.
//
// Safe for concurrent use; fetches of one follower are expected one at a
// time (as Kafka's fetch sessions are), concurrent ones stay race-free.
func (r *Replica) UpdateFollower(follower int32, fetchOffset int64, followerLogStart int64) (isrChange []int32, err error) {
	s := r.state.Load()
	if !s.leader || s.closed {
		return nil, r.errNotLeader(s)
	}
	f := s.follower(follower)
	if f == nil {
		return nil, fmt.Errorf("partition %s-%d: broker %d is not a follower replica (replicas %v): %w",
			r.topic, r.partition, follower, s.st.Replicas, kerr.ReplicaNotAvailable)
	}
	leo := r.log.LEO()
	if fetchOffset > leo || fetchOffset < 0 {
		return nil, fmt.Errorf("partition %s-%d: follower %d fetch offset %d outside [0, LEO %d]: %w",
			r.topic, r.partition, follower, fetchOffset, leo, kerr.OffsetOutOfRange)
	}
	now := r.cfg.Now()
	if r.mutexHW {
		r.hwMu.Lock()
		r.recordFetch(f, fetchOffset, followerLogStart, leo, now)
		old, nw, ok := r.advanceLocked(s)
		r.hwMu.Unlock()
		if ok {
			r.afterAdvance(old, nw)
		}
	} else {
		r.recordFetch(f, fetchOffset, followerLogStart, leo, now)
		r.maybeAdvanceHW(s)
	}
	if !s.inISR(follower) && CanJoinISR(fetchOffset, r.hw.Load(), s.epochStart) {
		isr := make([]int32, len(s.st.ISR), len(s.st.ISR)+1)
		copy(isr, s.st.ISR)
		return append(isr, follower), nil
	}
	return nil, nil
}

func (r *Replica) recordFetch(f *progress, fetchOffset, logStart, leaderLEO, now int64) {
	f.leo.Store(fetchOffset)
	f.logStart.Store(logStart)
	caught := CaughtUpUpdate(fetchOffset, leaderLEO, f.lastFetchLeaderLEO.Load(), f.lastFetchTimeNs.Load(), f.lastCaughtUpNs.Load(), now)
	for {
		cur := f.lastCaughtUpNs.Load()
		if caught <= cur || f.lastCaughtUpNs.CompareAndSwap(cur, caught) {
			break
		}
	}
	f.lastFetchLeaderLEO.Store(leaderLEO)
	f.lastFetchTimeNs.Store(now)
}

// MaybeShrinkISR returns the ISR without the followers that have not been
// caught up for more than replica.lag.time.max.ms, or nil when nothing
// changes (or this replica is not the leader). The leader always stays.
func (r *Replica) MaybeShrinkISR() []int32 {
	s := r.state.Load()
	if !s.leader || s.closed {
		return nil
	}
	now := r.cfg.Now()
	var out []int32
	for i, id := range s.st.ISR {
		keep := id == r.id
		if !keep {
			f := s.follower(id)
			keep = f != nil && !OutOfSync(f.lastCaughtUpNs.Load(), now, r.lagMaxNs)
		}
		if !keep && out == nil {
			out = append(make([]int32, 0, len(s.st.ISR)), s.st.ISR[:i]...)
		} else if keep && out != nil {
			out = append(out, id)
		}
	}
	return out
}

// OutOfSyncReplicas returns the ISR followers MaybeShrinkISR would remove.
func (r *Replica) OutOfSyncReplicas() []int32 {
	s := r.state.Load()
	if !s.leader || s.closed {
		return nil
	}
	now := r.cfg.Now()
	var out []int32
	for _, id := range s.st.ISR {
		if id == r.id {
			continue
		}
		if f := s.follower(id); f == nil || OutOfSync(f.lastCaughtUpNs.Load(), now, r.lagMaxNs) {
			out = append(out, id)
		}
	}
	return out
}

// ApplyISR installs a partition state the controller accepted
// (AlterPartition) or announced for the current leadership: the ISR,
// replicas and partition epoch. A state for another leader or leader epoch
// is not an ISR change and is ignored (MakeLeader/MakeFollower handle it),
// as is a stale one (older partition epoch). A shrink may advance the HW; a
// drop below min.insync.replicas wakes acks=all waiters.
func (r *Replica) ApplyISR(st controller.PartitionState) {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	r.applyISRLocked(st)
}

func (r *Replica) applyISRLocked(st controller.PartitionState) {
	s := r.state.Load()
	if s.closed || st.Leader != s.st.Leader || st.LeaderEpoch != s.st.LeaderEpoch || st.PartitionEpoch < s.st.PartitionEpoch {
		return
	}
	ns := &snapshot{st: st.Clone(), leader: s.leader, epochStart: s.epochStart}
	if s.leader {
		ns.followers = r.carryFollowers(s, ns.st)
	}
	r.state.Store(ns)
	if ns.leader {
		r.maybeAdvanceHW(ns)
	}
	r.hwSig.notifyAll()
}

// carryFollowers keeps the progress of followers that stay replicas and
// adds fresh progress for new ones.
func (r *Replica) carryFollowers(old *snapshot, st controller.PartitionState) []*progress {
	out := make([]*progress, 0, len(st.Replicas))
	now := r.cfg.Now()
	leo := r.log.LEO()
	for _, id := range st.Replicas {
		if id == r.id {
			continue
		}
		if f := old.follower(id); f != nil {
			out = append(out, f)
			continue
		}
		out = append(out, newProgress(id, leo, now, slices.Contains(st.ISR, id)))
	}
	return out
}

func newProgress(id int32, leaderLEO, now int64, inISR bool) *progress {
	f := &progress{id: id}
	f.leo.Store(-1)
	f.logStart.Store(-1)
	f.lastFetchLeaderLEO.Store(leaderLEO)
	f.lastFetchTimeNs.Store(now)
	if inISR {
		f.lastCaughtUpNs.Store(now)
	} else {
		f.lastCaughtUpNs.Store(0)
	}
	return f
}

// MakeLeader makes this replica the leader of st (st.Leader must be this
// broker) at st.LeaderEpoch: it records (epoch, LEO) in the leader epoch
// cache before serving, resets every follower's progress (LEO unknown; ISR
// members count as caught up now, as Kafka does) and keeps the HW (a new
// leader's HW may lag; it advances once the ISR followers fetch, and never
// decreases). A stale epoch gets FencedLeaderEpoch; the same epoch again is
// an ISR update.
func (r *Replica) MakeLeader(st controller.PartitionState) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.closed {
		return r.errNotLeader(s)
	}
	if st.Leader != r.id {
		return fmt.Errorf("partition %s-%d: MakeLeader on broker %d with leader %d: %w", r.topic, r.partition, r.id, st.Leader, kerr.InvalidRequest)
	}
	if !slices.Contains(st.ISR, r.id) && len(st.ISR) > 0 {
		// Unclean election: the controller put us in the ISR already; a
		// state without us is a caller bug.
		return fmt.Errorf("partition %s-%d: MakeLeader: ISR %v lacks leader %d: %w", r.topic, r.partition, st.ISR, r.id, kerr.InvalidRequest)
	}
	if st.LeaderEpoch < s.st.LeaderEpoch {
		return fmt.Errorf("partition %s-%d: MakeLeader epoch %d older than current %d: %w", r.topic, r.partition, st.LeaderEpoch, s.st.LeaderEpoch, kerr.FencedLeaderEpoch)
	}
	if st.LeaderEpoch == s.st.LeaderEpoch && s.leader {
		r.applyISRLocked(st)
		return nil
	}
	if s.leader {
		// Re-elected with a new epoch: fence the old term's appends before the new
		// epoch's start offset is read, so no old-epoch batch lands above it.
		fenced := *s
		fenced.leader = false
		r.state.Store(&fenced)
		r.drainLeaderAppends()
	}
	leo := r.log.LEO()
	if _, err := r.epochs.Assign(st.LeaderEpoch, leo); err != nil {
		return err
	}
	start := r.epochs.StartOffsetOf(st.LeaderEpoch)
	if start < 0 {
		start = leo
	}
	ns := &snapshot{st: st.Clone(), leader: true, epochStart: start}
	ns.followers = r.carryFollowers(&snapshot{}, ns.st) // nothing carried: every follower starts fresh
	if hw := r.hw.Load(); hw > leo {
		r.hw.Store(leo) // BUG guard: a HW above the LEO cannot be served
	}
	r.lag.clear()
	r.state.Store(ns)
	r.maybeAdvanceHW(ns)
	r.hwSig.notifyAll()
	r.leoSig.notifyAll()
	return nil
}

// MakeFollower makes this replica a follower of st.Leader at
// st.LeaderEpoch. It does not truncate: the fetcher calls TruncateToLeader
// (or TruncationFor + TruncateTo) before fetching. Pending acks=all waits
// end with NotLeaderForPartition. A stale epoch gets FencedLeaderEpoch.
func (r *Replica) MakeFollower(st controller.PartitionState) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.closed {
		return r.errNotLeader(s)
	}
	if st.Leader == r.id {
		return fmt.Errorf("partition %s-%d: MakeFollower on broker %d which st names as leader: %w", r.topic, r.partition, r.id, kerr.InvalidRequest)
	}
	if st.LeaderEpoch < s.st.LeaderEpoch {
		return fmt.Errorf("partition %s-%d: MakeFollower epoch %d older than current %d: %w", r.topic, r.partition, st.LeaderEpoch, s.st.LeaderEpoch, kerr.FencedLeaderEpoch)
	}
	r.lag.clear()
	r.state.Store(&snapshot{st: st.Clone(), epochStart: -1})
	r.drainLeaderAppends() // the fetcher truncates after this returns: no append may follow
	r.hwSig.notifyAll()
	r.leoSig.notifyAll()
	return nil
}

// drainLeaderAppends waits until every AppendAsLeader that passed its leadership check
// under an earlier snapshot has finished (roleMu held, the new snapshot stored). Appends
// are short (one write, or a place in a group commit), so it yields rather than parks.
func (r *Replica) drainLeaderAppends() {
	for r.leaderAppends.Load() != 0 {
		runtime.Gosched()
	}
}

// RestoreHW sets the HW from a checkpoint (replication-offset-checkpoint)
// when the replica is opened, clamped to [log start, LEO]. Only before the first
// MakeLeader/MakeFollower or on a follower.
func (r *Replica) RestoreHW(hw int64) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	if s := r.state.Load(); s.leader {
		return fmt.Errorf("partition %s-%d: RestoreHW on the leader: %w", r.topic, r.partition, kerr.InvalidRequest)
	}
	r.hw.Store(max(r.log.LogStart(), min(hw, r.log.LEO())))
	return nil
}

// AppendAsFollower appends blob (batches fetched from the leader, starting
// at this replica's LEO) keeping their offsets, records each batch's
// partitionLeaderEpoch in the epoch cache, then sets the follower HW to
// min(leaderHW, LEO). Truncation, if any, must have happened before (a
// separate TruncateTo/TruncateToLeader call by the fetcher), so the HW is
// applied after it. An empty blob only updates the HW.
// Errors: NotLeaderForPartition on the leader; malformed batches (wrapping
// CorruptMessage / InvalidRecord); non-contiguous offsets (OffsetOutOfRange,
// from the log).
func (r *Replica) AppendAsFollower(blob []byte, leaderHW int64) (log.AppendInfo, error) {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.leader || s.closed {
		return log.AppendInfo{}, fmt.Errorf("partition %s-%d: AppendAsFollower on broker %d (leader=%v closed=%v): %w",
			r.topic, r.partition, r.id, s.leader, s.closed, kerr.NotLeaderForPartition)
	}
	var info log.AppendInfo
	if len(blob) > 0 {
		assigned := false
		undo := func(err error) error {
			// Drop the epochs this failed append introduced.
			if assigned {
				if terr := r.epochs.TruncateFromEnd(r.log.LEO()); terr != nil {
					return errors.Join(err, terr)
				}
			}
			return err
		}
		// Record new epochs first (as Kafka does): an entry past the LEO
		// after a crash is dropped by NewReplica.
		latest := r.epochs.Latest()
		for b := blob; len(b) > 0; {
			h, err := records.ParseHeader(b)
			if err != nil {
				return info, undo(fmt.Errorf("partition %s-%d: follower append: %w", r.topic, r.partition, err))
			}
			if h.Size() > len(b) {
				return info, undo(fmt.Errorf("partition %s-%d: follower append: batch at offset %d needs %d bytes, %d left: %w",
					r.topic, r.partition, h.BaseOffset, h.Size(), len(b), kerr.CorruptMessage))
			}
			if h.PartitionLeaderEpoch > latest {
				assigned = true
				if _, err := r.epochs.Assign(h.PartitionLeaderEpoch, h.BaseOffset); err != nil {
					return info, undo(err)
				}
				latest = h.PartitionLeaderEpoch
			}
			b = b[h.Size():]
		}
		var err error
		info, err = r.log.Append(blob, false, 0)
		if err != nil {
			return info, undo(err)
		}
		r.applyFollowerProducers(blob) // hook: idempotent producer state (producerstate.go)
		r.leoSig.notify()
	}
	if leaderHW >= 0 {
		hw := min(leaderHW, r.log.LEO())
		if r.mutexHW {
			r.hwMu.Lock()
			r.hw.Store(hw)
			r.hwMu.Unlock()
		} else {
			r.hw.Store(hw)
		}
		r.hwSig.notify()
	}
	return info, nil
}

// TruncateTo truncates the follower's log to offset (exclusive end; rounded
// down to a batch boundary by the log), then the epoch cache from the new
// LEO and the HW to at most the new LEO. Not allowed on the leader.
func (r *Replica) TruncateTo(offset int64) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	return r.truncateLocked(offset)
}

func (r *Replica) truncateLocked(offset int64) error {
	s := r.state.Load()
	if s.leader || s.closed {
		return fmt.Errorf("partition %s-%d: TruncateTo(%d) on broker %d (leader=%v closed=%v): %w",
			r.topic, r.partition, offset, r.id, s.leader, s.closed, kerr.NotLeaderForPartition)
	}
	truncated := offset < r.log.LEO()
	if truncated {
		if err := r.log.TruncateTo(offset); err != nil {
			return err
		}
	}
	leo := r.log.LEO()
	if err := r.epochs.TruncateFromEnd(leo); err != nil {
		return err
	}
	// hook: forget producer batches above the truncation point (producerstate.go).
	if truncated {
		if err := r.rebuildProducers(); err != nil {
			return err
		}
	}
	if r.hw.Load() > leo {
		r.hw.Store(leo)
	}
	r.leoSig.notifyAll()
	return nil
}

// TruncateFullyAndStartAt empties the follower's log and restarts it at
// offset (the leader's log start offset, when the follower's fetch offset
// fell below it); the epoch cache is cleared and the HW set to offset.
func (r *Replica) TruncateFullyAndStartAt(offset int64) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.leader || s.closed {
		return fmt.Errorf("partition %s-%d: TruncateFullyAndStartAt on broker %d: %w", r.topic, r.partition, r.id, kerr.NotLeaderForPartition)
	}
	if err := r.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	if err := r.epochs.Clear(); err != nil {
		return err
	}
	r.clearProducers() // hook: the log is empty (producerstate.go)
	r.hw.Store(offset)
	r.leoSig.notifyAll()
	return nil
}

// TruncationFor is the follower's decision after an OffsetForLeaderEpoch
// answer (leaderEpoch, leaderEndOffset) to its latest epoch: see
// TruncationOffset. It does not truncate.
func (r *Replica) TruncationFor(leaderEpoch int32, leaderEndOffset int64) Truncation {
	leo := r.log.LEO()
	return TruncationOffset(leaderEpoch, leaderEndOffset, leo, r.hw.Load(), func(e int32) (int32, int64) {
		return r.epochs.EndOffsetFor(e, leo)
	})
}

// maxTruncationRounds bounds the KIP-279 loop: every round that is not done
// strictly lowers the follower's latest epoch, so a well-behaved leader
// needs at most one round per epoch; a misbehaving one gets an error.
const maxTruncationRounds = 1 << 12

// TruncateToLeader runs a follower's truncation before it fetches from a
// new leader and returns the resulting LEO (exclusive).
//
// TruncateMode "epoch": ask(latestEpoch) sends OffsetForLeaderEpoch to the
// leader and returns its answer; the follower truncates per TruncationFor
// and asks again until done (KIP-279). A follower without epochs (an empty
// cache) truncates to its HW, as Kafka does. TruncateMode "hw": truncate to
// the local HW without asking (the pre-KIP-101 behaviour, an ablation that
// loses acknowledged records; see the KIP-101 scenarios in testdata).
func (r *Replica) TruncateToLeader(ask func(latestEpoch int32) (leaderEpoch int32, endOffset int64, err error)) (int64, error) {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	if r.cfg.TruncateMode == TruncateModeHW {
		return r.log.LEO(), r.truncateLocked(r.hw.Load())
	}
	for round := 0; round < maxTruncationRounds; round++ {
		latest := r.epochs.Latest()
		if latest == UndefinedEpoch {
			return r.log.LEO(), r.truncateLocked(r.hw.Load())
		}
		le, end, err := ask(latest)
		if err != nil {
			return r.log.LEO(), err
		}
		if le > latest {
			return r.log.LEO(), fmt.Errorf("partition %s-%d: OffsetForLeaderEpoch(%d) answered epoch %d > requested: %w",
				r.topic, r.partition, latest, le, kerr.UnknownServerError)
		}
		t := r.TruncationFor(le, end)
		if err := r.truncateLocked(t.Offset); err != nil {
			return r.log.LEO(), err
		}
		if t.Done {
			return r.log.LEO(), nil
		}
	}
	return r.log.LEO(), fmt.Errorf("partition %s-%d: truncation did not converge in %d OffsetForLeaderEpoch rounds", r.topic, r.partition, maxTruncationRounds)
}

// ApplyRetention applies retention.ms / retention.bytes to the log, never
// deleting at or past the HW (exclusive) nor the active segment, then drops
// the epoch cache entries below the new log start offset (Kafka's
// truncateFromStart). It returns the number of deleted segments.
func (r *Replica) ApplyRetention(nowMs int64) (int, error) {
	n, err := r.log.ApplyRetention(nowMs, r.hw.Load())
	if err != nil || n == 0 {
		return n, err
	}
	return n, r.epochs.TruncateFromStart(r.log.LogStart())
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch for epoch from this
// replica's epoch cache and LEO: the largest epoch <= epoch and its end
// offset (exclusive), or (-1, -1). The leadership check is the caller's.
func (r *Replica) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return r.epochs.EndOffsetFor(epoch, r.log.LEO())
}

// Read reads batches from offset (inclusive) up to maxOffset (exclusive, a
// batch boundary) as a file slice; see log.Log.Read. The caller picks
// maxOffset: HW for consumers, LEO for replicas.
func (r *Replica) Read(offset, maxOffset int64, maxBytes int, minOneBatch bool) (log.Slice, error) {
	return r.log.Read(offset, maxOffset, maxBytes, minOneBatch)
}

// FollowerLEO returns the leader's record of follower id's LEO (exclusive),
// -1 when unknown or when this replica is not the leader.
func (r *Replica) FollowerLEO(id int32) int64 {
	s := r.state.Load()
	if !s.leader {
		return -1
	}
	return s.followerLEO(id)
}

// FollowerLastCaughtUp returns the follower's last caught-up time (ns), -1
// when unknown or not the leader.
func (r *Replica) FollowerLastCaughtUp(id int32) int64 {
	s := r.state.Load()
	if f := s.follower(id); s.leader && f != nil {
		return f.lastCaughtUpNs.Load()
	}
	return -1
}

// MaxLag returns, on the leader, the largest LEO - follower LEO over the
// followers (records; a follower with an unknown LEO counts from its log
// start 0). 0 on a follower.
func (r *Replica) MaxLag() int64 {
	s := r.state.Load()
	if !s.leader {
		return 0
	}
	leo := r.log.LEO()
	var lag int64
	for _, f := range s.followers {
		lag = max(lag, leo-max(0, f.leo.Load()))
	}
	return lag
}

// Close ends the replica: pending waits return NotLeaderForPartition, later
// calls fail, and the log is closed.
func (r *Replica) Close() error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.closed {
		return nil
	}
	ns := *s
	ns.closed = true
	ns.leader = false
	r.state.Store(&ns)
	r.drainLeaderAppends()
	r.hwSig.notifyAll()
	r.leoSig.notifyAll()
	return r.log.Close()
}
