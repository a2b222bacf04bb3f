package partition

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// logStore is the part of *log.Log a Replica uses.
type logStore interface {
	Append(blob []byte, assignOffsets bool, leaderEpoch int32) (log.AppendInfo, error)
	LEO() int64
	LogStart() int64
	Read(offset, maxOffset int64, maxBytes int, minOneBatch bool) (log.Slice, error)
	TruncateTo(offset int64) error
	TruncateFullyAndStartAt(offset int64) error
	ApplyRetention(nowMs int64, maxDeletableOffset int64) (deletedSegments int, err error)
	IncrementLogStart(offset int64) (deletedSegments int, err error)
	ForEachBatchHeader(from int64, fn func(h records.Header) error) error
	EpochStartsAtOpen() []log.EpochStart
	abortIndex
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
// (they are rare or single-caller: one fetcher per partition). See the
// package doc for why the HW stays linearizable with ISR changes.
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
	minISR    atomic.Int32 // min.insync.replicas as configured (SetMinInsyncReplicas)

	epochs *EpochCache
	// epochRebuilt is why the epoch cache was rebuilt from the log at open ("" if it
	// loaded cleanly): storage damage that recovery reports.
	epochRebuilt string

	state atomic.Pointer[snapshot]
	hw    atomic.Int64

	// isrLock is the HWUpdate "mutex" ablation (Kafka's leaderIsrUpdateLock): HW advances
	// hold it for reading, snapshot changes for writing.
	isrLock sync.RWMutex

	// roleMu serialises MakeLeader, MakeFollower, ApplyISR, PrepareISRChange,
	// follower appends, truncation and Close (never taken on the leader's hot path).
	roleMu sync.Mutex

	hwSig  notifier
	leoSig notifier
	lag    lagRing

	// lwSig signals a change of the low watermark's inputs on the leader: a follower's
	// log start, or the leader's own (deleterecords.go).
	lwSig notifier

	// producers is the idempotent-producer state (producerstate.go), with
	// its own mutex, taken only for batches carrying a producer id.
	producers producerState
}

// snapshot is an immutable view of the replica's role and ISR; it is
// replaced as a whole (copy-on-write). Follower progress objects are shared
// between snapshots of one leadership term and hold atomics.
type snapshot struct {
	st         controller.PartitionState // private copy; st.ISR is the committed ISR
	leader     bool                      // st.Leader == this broker
	closed     bool
	epochStart int64       // start offset (inclusive) of st.LeaderEpoch on this leader, -1 if not leader
	followers  []*progress // leader only: one per replica other than the leader
	// maximal is the ISR the HW is computed over: the committed ISR plus the additions of
	// a pending change (KIP-497). While a shrink is pending it is the committed ISR.
	maximal []int32
	// pending is the ISR proposed to the controller and not answered yet (nil: none).
	// While one is pending no other change is proposed (Kafka's isInflight).
	pending []int32
	// prevTerm is the end of this replica's previous leadership term (epoch -1: none):
	// acks=all waiters of that term whose offset is below its final HW are committed.
	prevTerm termEnd
	// fencing marks the short-lived snapshot a role change installs to stop leader
	// operations before it reads the term's final HW: waiters keep waiting through it.
	fencing bool
	// hwCapped: a shrink below min.insync.replicas is pending (ISRProposal.FlushFirst);
	// the HW does not pass hwCap, the LEO it was proposed at, until it is applied or
	// withdrawn.
	hwCapped bool
	hwCap    int64

	// active counts leader operations (appends, follower updates, HW advances) running
	// under this snapshot. A change stores the next snapshot, then drains this to zero:
	// no operation that read this snapshot lands after the change returns.
	active atomic.Int64
}

// termEnd is where a leadership term ended: its leader epoch and its HW at the end.
type termEnd struct {
	epoch int32
	hw    int64
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

func (s *snapshot) followerLEO(id int32) int64 {
	if f := s.follower(id); f != nil {
		return f.leo.Load()
	}
	return -1
}

// progress is the leader's view of one follower (Kafka's Replica on the
// leader). Fields are atomics: a follower's fetches update them while the
// HW computation and ISR expiration read them.
type progress struct {
	id                 int32
	leo                atomic.Int64 // last fetch offset (exclusive LEO of the follower), -1 unknown
	logStart           atomic.Int64 // follower's log start offset (inclusive), -1 unknown
	brokerEpoch        atomic.Int64 // broker epoch of its last fetch, -1 unknown
	lastCaughtUpNs     atomic.Int64
	lastFetchLeaderLEO atomic.Int64
	lastFetchTimeNs    atomic.Int64
	// quiet is the clock of the fetch session that leaves this follower's caught-up fetches
	// out (session.go), nil when none does.
	quiet atomic.Pointer[FetchClock]
}

// NewReplica opens the replica state of topic-partition on broker brokerID
// over the log l (the Replica owns l from now on: Close closes it) and the
// leader epoch cache in dir (leader-epoch-checkpoint, created on first
// change). The replica starts with no role (not leader, leader epoch -1) and
// HW = log start offset; call RestoreHW with a checkpointed HW, then MakeLeader or
// MakeFollower. A leader-epoch checkpoint that cannot be read is rebuilt from the
// batches' partitionLeaderEpoch fields (EpochCacheRebuilt says why).
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
	r := &Replica{
		topic: topic, partition: partition, id: brokerID,
		log: l, dir: dir, cfg: cfg,
		lagMaxNs: cfg.ReplicaLagTimeMaxMs * int64(time.Millisecond),
		mutexHW:  cfg.HWUpdate == HWUpdateMutex,
	}
	r.minISR.Store(int32(cfg.MinInsyncReplicas))
	switch {
	case dir == "":
		r.epochs = NewEpochCache()
	case cfg.New && l.LEO() == 0:
		r.epochs = &EpochCache{fs: vfs.Or(cfg.FS), path: epochPath(dir)}
	default:
		epochs, err := LoadEpochCache(cfg.FS, dir)
		if err != nil {
			// Kafka takes the log dir offline; the batches themselves carry their epoch, so
			// the cache is rebuilt from them instead, and the damage is reported.
			if epochs, err = r.rebuildEpochCache(cfg.FS, dir, err); err != nil {
				return nil, err
			}
		}
		r.epochs = epochs
	}
	r.epochs.later = cfg.EpochCheckpointLater
	// Entries at or past the LEO belong to records lost in a crash (the
	// cache may be written before the log, as Kafka does).
	if err := r.epochs.TruncateFromEnd(l.LEO()); err != nil {
		return nil, fmt.Errorf("partition %s-%d: %w", topic, partition, err)
	}
	// Entries of the log's batches whose checkpoint write a crash lost (Assign does not
	// fsync it): restored from where the recovered batches' epochs rise.
	if r.epochRebuilt == "" {
		n, err := r.epochs.repairFromLog(l.EpochStartsAtOpen(), l.LogStart())
		if err != nil {
			return nil, fmt.Errorf("partition %s-%d: %w", topic, partition, err)
		}
		if n > 0 {
			r.epochRebuilt = fmt.Sprintf("leader epoch checkpoint behind the log (a write lost in a crash): %d entries restored from the batches' epochs", n)
		}
	}
	r.hwSig.init()
	r.leoSig.init()
	r.lwSig.init()
	r.state.Store(&snapshot{
		st:         controller.PartitionState{Topic: topic, Partition: partition, Leader: controller.NoLeader, LeaderEpoch: -1, PartitionEpoch: -1},
		epochStart: -1,
		prevTerm:   termEnd{epoch: -1},
	})
	r.hw.Store(min(l.LogStart(), l.LEO()))
	// The producers the segments below a new log start alone showed (logstartsnap.go).
	if h, ok := l.(interface{ SetBeforeLogStart(func(int64) error) }); ok {
		h.SetBeforeLogStart(r.beforeLogStart)
	}
	// Idempotent and transactional producers: their state from the snapshot the last Close
	// wrote plus the batches after it, else from the log-start snapshot and the whole
	// recovered log (snapshot.go); a new replica has neither.
	if cfg.New && l.LEO() == 0 {
		return r, nil
	}
	if err := r.loadProducers(); err != nil {
		return nil, err
	}
	return r, nil
}

// rebuildEpochCache replaces an unreadable leader-epoch checkpoint by one rebuilt from the
// log: an entry where each batch's partitionLeaderEpoch first rises.
func (r *Replica) rebuildEpochCache(fs vfs.FS, dir string, cause error) (*EpochCache, error) {
	c := &EpochCache{fs: fs, path: epochPath(dir)}
	latest := UndefinedEpoch
	err := r.log.ForEachBatchHeader(r.log.LogStart(), func(h records.Header) error {
		if h.PartitionLeaderEpoch > latest {
			c.entries = append(c.entries, EpochEntry{Epoch: h.PartitionLeaderEpoch, StartOffset: h.BaseOffset})
			latest = h.PartitionLeaderEpoch
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("partition %s-%d: rebuilding the leader epoch cache after %v: %w", r.topic, r.partition, cause, err)
	}
	c.mu.Lock()
	err = c.flushLocked(false) // rebuilt again if a crash loses it
	c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("partition %s-%d: %w", r.topic, r.partition, err)
	}
	r.epochRebuilt = fmt.Sprintf("leader epoch checkpoint unreadable (%v): rebuilt %d entries from the log", cause, len(c.entries))
	return c, nil
}

// EpochCacheRebuilt reports why the leader-epoch checkpoint was rebuilt or repaired from the
// log when the replica was opened, or "" when it loaded up to date.
func (r *Replica) EpochCacheRebuilt() string { return r.epochRebuilt }

// Topic returns the topic name.
func (r *Replica) Topic() string { return r.topic }

// Partition returns the partition number.
func (r *Replica) Partition() int32 { return r.partition }

// BrokerID returns the id of the broker hosting this replica.
func (r *Replica) BrokerID() int32 { return r.id }

// Config returns the effective configuration (defaults filled in).
func (r *Replica) Config() Config {
	c := r.cfg
	c.MinInsyncReplicas = int(r.minISR.Load())
	return c
}

// SetMinInsyncReplicas changes min.insync.replicas (a topic config change), effective for
// the next append and HW advance. n < 1 is ignored.
func (r *Replica) SetMinInsyncReplicas(n int) {
	if n < 1 {
		return
	}
	r.minISR.Store(int32(n))
	if s, ok := r.enterLeader(); ok {
		r.maybeAdvanceHW(s)
		s.exit()
	}
	r.hwSig.notifyAll()
}

// effectiveMinISR is EffectiveMinISR for s: min(min.insync.replicas, replication factor).
func (r *Replica) effectiveMinISR(s *snapshot) int {
	return EffectiveMinISR(int(r.minISR.Load()), len(s.st.Replicas))
}

// EffectiveMinISR returns min(min.insync.replicas, replication factor) now (EffectiveMinISR),
// the bound of the acks=all check, the HW freeze and the UnderMinIsr metrics. Lock-free.
func (r *Replica) EffectiveMinISR() int { return r.effectiveMinISR(r.state.Load()) }

// Epochs returns the leader epoch cache (for tools and tests).
func (r *Replica) Epochs() *EpochCache { return r.epochs }

// IsLeader reports whether this replica is the leader now.
func (r *Replica) IsLeader() bool { s := r.state.Load(); return s.leader && !s.closed }

// LeaderEpoch returns the leader epoch of the current role (-1 before the
// first MakeLeader/MakeFollower).
func (r *Replica) LeaderEpoch() int32 { return r.state.Load().st.LeaderEpoch }

// State returns the partition state this replica acts on (a copy).
func (r *Replica) State() controller.PartitionState { return r.state.Load().st.Clone() }

// ISR returns the committed ISR. It is a shared snapshot: do not modify it.
func (r *Replica) ISR() []int32 { return r.state.Load().st.ISR }

// LEO returns the log end offset (exclusive).
func (r *Replica) LEO() int64 { return r.log.LEO() }

// LogStart returns the log start offset (inclusive).
func (r *Replica) LogStart() int64 { return r.log.LogStart() }

// HW returns the high watermark (exclusive).
func (r *Replica) HW() int64 { return r.hw.Load() }

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

// ApplyRetention applies retention.ms / retention.bytes to the log, never
// deleting at or past the HW (exclusive) nor the active segment, then drops
// the epoch cache entries below the new log start offset (Kafka's
// truncateFromStart). It returns the number of deleted segments.
func (r *Replica) ApplyRetention(nowMs int64) (int, error) {
	n, err := r.log.ApplyRetention(nowMs, r.hw.Load())
	if n > 0 {
		r.lwSig.notifyAll() // the log start moved: fetch sessions report it
	}
	if err != nil || n == 0 {
		return n, err
	}
	return n, r.epochs.TruncateFromStart(r.log.LogStart())
}

// Read reads batches from offset (inclusive) up to maxOffset (exclusive, a
// batch boundary) as a file slice; see log.Log.Read. The caller picks
// maxOffset: HW for consumers, LEO for replicas.
func (r *Replica) Read(offset, maxOffset int64, maxBytes int, minOneBatch bool) (log.Slice, error) {
	return r.log.Read(offset, maxOffset, maxBytes, minOneBatch)
}
