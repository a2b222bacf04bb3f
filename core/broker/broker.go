package broker

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/core/vfs"
)

// HWCheckpointFile is the name of the HW checkpoint in DataDir (Kafka's
// ReplicaManager.HighWatermarkFilename).
const HWCheckpointFile = "replication-offset-checkpoint"

type tp struct {
	topic     string
	partition int32
}

func (k tp) String() string { return k.topic + "-" + strconv.Itoa(int(k.partition)) }

func tpLess(a, b tp) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return int(a.partition - b.partition)
}

// hosted is one replica on this broker.
type hosted struct {
	key tp
	r   *partition.Replica
	l   *log.Log
	// topicID is the incarnation of the topic the replica was opened for (zero: unknown, a
	// topic recorded before topic ids); a topic deleted and created again has a new one.
	topicID controller.TopicID
	// applied is the last controller state applied and topicConfigs the topic's config
	// overrides last applied (both guarded by Broker.apply).
	applied      controller.PartitionState
	topicConfigs map[string]string
	// throttle is which replication quotas apply to this replica (throttleLeader,
	// throttleFollower bits), from topicConfigs; read lock-free on the fetch paths.
	throttle atomic.Uint32
	// maxMessage is max.message.bytes in effect: the topic's, else the broker's dynamic
	// message.max.bytes, else its static one; read lock-free by Produce.
	maxMessage atomic.Int64

	dmg damageState // damage found and not healed yet (damage.go)
	// lostHW is the HW the HW checkpoint held for a replica whose log recovery found ending
	// below it (it lost acknowledged records), else 0: how far it had acknowledged.
	lostHW int64

	alter struct { // AlterPartition error logging (log de-duplication); a leaf lock
		sync.Mutex
		lastErr string // last AlterPartition error logged
	}
}

const (
	stateNew int32 = iota
	stateRunning
	stateStopped
)

// Broker is one broker's replica manager. All methods are safe for
// concurrent use. See the package doc for the lock order.
type Broker struct {
	// parkedHook, set by benchmarks before any Fetch, is called each time a Fetch parks.
	parkedHook func()

	cfg Config
	// txnVerify is transaction.partition.verification.enable, and txnGuard orders the
	// appends of verified transactional batches against markers (txnverify.go).
	txnVerify bool
	txnGuard  txnGuard
	// fs is hold: every file of the broker goes through it, so that Close can hold the
	// fsyncs of all its replicas back and make them durable with one syncfs.
	fs        vfs.FS
	hold      *vfs.HoldFS
	ctrl      *controller.Controller
	transport Transport
	now       func() int64

	state  atomic.Int32
	epoch  atomic.Int64 // broker epoch of this incarnation (its registration), -1 before Start
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	unsub  func()

	// offline is set once the log directory failed (KAFKA_STORAGE_ERROR): the broker
	// reported it to the controller and serves no replica any more.
	offline atomic.Pointer[error]
	// offlineReported is set once the controller accepted the offline report (it is
	// refused while the metadata log cannot be written; the heartbeat reports again).
	offlineReported atomic.Bool

	damage struct { // damage.go
		signal                                     chan struct{} // capacity 1: damage found
		found, truncated, fetchedCorrupt, scrubbed atomic.Int64
		any                                        atomic.Bool // a replica may have damage not healed
	}

	// resource counts the operations that failed for want of a file descriptor (or kernel
	// memory) and rate-limits their log lines; see resourceFailed.
	resource struct {
		count atomic.Int64
		sync.Mutex
		lastLog    int64 // b.now() of the last line, 0 = none yet
		suppressed int64 // failures not logged since
	}

	pmeta metadataWriter // metadatawriter.go
	// epochQ holds the leader-epoch checkpoint writes of a Manual broker until
	// WritePendingEpochCheckpoints (epochcheckpoint.go).
	epochQ struct {
		sync.Mutex
		pending []func() error
	}

	mu struct { // guards the replica and fetcher maps
		sync.RWMutex
		replicas map[tp]*hosted
		fetchers map[fetcherKey]*Fetcher
	}

	// apply serialises the application of controller state (the subscription's updates,
	// Start's recovery, the answer to an AlterPartition) and guards what it changes: every
	// hosted.applied and hosted.topicConfigs, and dyn. Taken before mu.
	apply struct {
		sync.Mutex
		// dyn is what the dynamic broker configs change (controller.BrokerConfigUpdate):
		// the static Config overlaid by them.
		// retry holds the partitions whose last controller state could not be applied for
		// want of a file descriptor (replica not opened, leader epoch not recorded):
		// RetryResourceFailures applies their current state again.
		retry map[tp]bool
		dyn   struct {
			configs     map[string]string // the dynamic configs last applied
			numFetchers int               // num.replica.fetchers
			minISR      int               // min.insync.replicas
			log         log.Config        // the log.* broker defaults of every replica
			maxMessage  int64             // message.max.bytes
		}
	}
	numFetchers atomic.Int32 // apply.dyn.numFetchers, read lock-free
	// fetchPlanGen moves when something the fetchers' plans read changes outside them (a
	// follower's log start by retention, a replication throttle): see Fetcher.mu.planOK.
	fetchPlanGen atomic.Uint64

	ckpt struct {
		sync.Mutex
		hws     map[tp]int64 // HWs read from the checkpoint at New (restored on open)
		missing bool         // no checkpoint file: a new or wiped log directory
		err     error        // the checkpoint could not be read
		written map[tp]int64 // what this incarnation last wrote (nil: nothing yet)
		// With Config.HousekeepingChangedOnly (changes.go): cur is the next write's entries
		// (nil: rebuilt from every replica at the next write), kept up to date from the
		// replicas ckptSet marks; stale says cur differs from written; rebuild asks for a
		// rebuild (a replica went away), as does hws shrinking below hwsLen (a startup
		// entry was dropped).
		cur            map[tp]int64
		stale, rebuild bool
		hwsLen         int
	}
	// ckptSet and isrSet are the replicas the HW checkpoint and the ISR expiry visit at
	// their next pass (changes.go).
	ckptSet, isrSet *changeSet

	// ISR expansion proposals from the fetch path (partition -> followers).
	exp struct {
		sync.Mutex
		pending map[tp][]int32
		signal  chan struct{}
	}

	pause struct {
		sync.Mutex
		paused   bool
		resumeCh chan struct{} // closed on Resume; replaced on Pause
	}

	changed struct {
		sync.Mutex
		ch chan struct{} // closed on the next state change (Changed)
	}

	isrShrinks atomic.Int64
	isrExpands atomic.Int64

	// quotas are the replication throttles (quota.go); their bounds set under apply.
	quotas struct{ leader, follower *ReplicationQuota }

	stopOnce sync.Once
}

// New validates cfg and builds a stopped broker; Start brings it up. The
// HW checkpoint in DataDir is read here.
func New(cfg Config, ctrl *controller.Controller, transport Transport) (*Broker, error) {
	if err := validateConfig(&cfg); err != nil {
		return nil, err
	}
	if ctrl == nil {
		return nil, errors.New("broker: controller is nil")
	}
	if transport == nil {
		return nil, errors.New("broker: transport is nil")
	}
	hold := vfs.NewHoldFS(cfg.FS, cfg.DataDir)
	fs := vfs.FS(hold)
	if err := vfs.MkdirAllDurable(fs, cfg.DataDir); err != nil {
		return nil, fmt.Errorf("broker %d: log.dirs %q: %w", cfg.ID, cfg.DataDir, err)
	}
	now := cfg.Now
	if now == nil {
		now = func() int64 { return time.Now().UnixNano() }
	}
	cfg.Log.FS = fs
	if cfg.Counters == nil {
		cfg.Counters = new(Counters)
	}
	cfg.Log.Writer = log.CountedWriter(cfg.Log.Writer, &cfg.Counters.Log)
	if cfg.Log.RollFlush == nil && !cfg.Manual {
		// Rolled segments are flushed on background goroutines, as Kafka's scheduler does,
		// so that no produce waits for the fsync of a whole segment (Manual brokers, the
		// simulator's, flush in the appending goroutine: deterministic).
		cfg.Log.RollFlush = log.FlushInBackground
	}
	if cfg.Log.NowMs == nil {
		cfg.Log.NowMs = func() int64 { return now() / int64(time.Millisecond) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{cfg: cfg, fs: fs, hold: hold, ctrl: ctrl, transport: transport, now: now, ctx: ctx, cancel: cancel,
		txnVerify: cfg.Settings.Bool("transaction.partition.verification.enable")}
	b.epoch.Store(-1)
	b.apply.dyn.numFetchers, b.apply.dyn.minISR, b.apply.dyn.log = cfg.NumReplicaFetchers, cfg.MinInsyncReplicas, cfg.Log
	b.apply.dyn.maxMessage = cfg.Settings.Int("message.max.bytes")
	b.numFetchers.Store(int32(cfg.NumReplicaFetchers))
	b.mu.replicas = make(map[tp]*hosted)
	b.apply.retry = make(map[tp]bool)
	b.mu.fetchers = make(map[fetcherKey]*Fetcher)
	b.exp.pending = make(map[tp][]int32)
	b.exp.signal = make(chan struct{}, 1)
	b.damage.signal = make(chan struct{}, 1)
	b.pause.resumeCh = make(chan struct{})
	close(b.pause.resumeCh) // not paused
	b.changed.ch = make(chan struct{})
	b.ckptSet = newChangeSet((*partition.Replica).WatchHWChanges)
	b.isrSet = newChangeSet((*partition.Replica).WatchISRChanges)
	qnow := cfg.QuotaNow
	if qnow == nil {
		qnow = now
	}
	b.quotas.leader, b.quotas.follower = NewReplicationQuota(qnow), NewReplicationQuota(qnow)
	b.applyThrottleRatesLocked(nil)
	path := filepath.Join(cfg.DataDir, HWCheckpointFile)
	hws, missing, err := readHWCheckpoint(fs, path)
	if log.IsResourceError(err) {
		// No descriptor to read it with says nothing about the replicas: rather than treat
		// every one as damaged, do not start.
		cancel()
		return nil, log.IOError(fmt.Sprintf("broker %d", cfg.ID), err)
	}
	if err != nil {
		// Kafka would take the log dir offline. The checkpoint only serves to restore HWs
		// and to detect damage, so the broker starts without it, treating every replica as
		// possibly damaged.
		b.logf("broker %d: %v: every replica is treated as damaged", cfg.ID, err)
		b.ckpt.err = err
	}
	b.ckpt.hws, b.ckpt.missing = hws, missing
	return b, nil
}

func (b *Broker) logf(format string, args ...any) {
	if b.cfg.Logf != nil {
		b.cfg.Logf(format, args...)
		return
	}
	stdlog.Printf(format, args...)
}

// ID returns the broker id.
func (b *Broker) ID() int32 { return b.cfg.ID }

// Epoch returns the broker epoch of this incarnation (-1 before Start registered it).
func (b *Broker) Epoch() int64 { return b.epoch.Load() }

// Config returns the effective configuration (defaults filled in).
func (b *Broker) Config() Config { return b.cfg }

func (b *Broker) running() bool { return b.state.Load() == stateRunning }

// usable returns nil when the broker runs with its log directory online, else why not
// (a KAFKA_STORAGE_ERROR, or a stopped broker as NOT_LEADER_OR_FOLLOWER).
func (b *Broker) usable() error {
	if p := b.offline.Load(); p != nil {
		return *p
	}
	if !b.running() {
		return fmt.Errorf("%w: broker %d is not running", kerr.NotLeaderForPartition, b.cfg.ID)
	}
	return nil
}

// LogDirOffline returns the error that took the log directory offline, or nil.
func (b *Broker) LogDirOffline() error {
	if p := b.offline.Load(); p != nil {
		return *p
	}
	return nil
}

// storageFailed handles err from a log operation: a KAFKA_STORAGE_ERROR takes the whole log
// directory offline (once): it is logged, the controller is told (it fences this broker, so
// leaderships move and it leaves the ISRs), and from then on every request for a replica
// here gets KAFKA_STORAGE_ERROR. A resource error (no file descriptor left: log.IsResourceError)
// is not a disk failure: it is reported (resourceFailed) and fails only the operation. Other
// errors are ignored. Returns err.
func (b *Broker) storageFailed(err error) error {
	if log.IsResourceError(err) {
		b.resourceFailed(err)
		return err
	}
	if err == nil || !errors.Is(err, kerr.KafkaStorageError) || log.AsDamage(err) != nil {
		return err // a damaged batch is its replica's problem (damage.go), not the directory's
	}
	if errors.Is(err, log.ErrClosed) {
		// The replica was closed under the caller (its topic was deleted, or the broker
		// stops): no disk failed. NOT_LEADER_OR_FOLLOWER makes a client look again.
		return fmt.Errorf("%w: %v", kerr.NotLeaderForPartition, err)
	}
	e := fmt.Errorf("broker %d: log directory %s is offline: %w", b.cfg.ID, b.cfg.DataDir, err)
	if b.offline.CompareAndSwap(nil, &e) {
		b.logf("%v; reporting it to the controller", e)
		b.reportOffline() // before registration Start reports it once registered
		b.notifyChanged()
	}
	return err
}

// reportOffline tells the controller that the log directory is offline, once it has been
// accepted: a refused report (the metadata log cannot be written) is sent again by the
// next heartbeat.
func (b *Broker) reportOffline() {
	epoch := b.epoch.Load()
	if b.offline.Load() == nil || b.offlineReported.Load() || epoch < 0 {
		return
	}
	if err := b.ctrl.ReportOfflineLogDir(b.cfg.ID, epoch); err != nil {
		b.logf("broker %d: reporting the offline log directory: %v (reported again at the next heartbeat)", b.cfg.ID, err)
		return
	}
	b.offlineReported.Store(true)
}

// resourceLogEvery is the least time between two log lines about resource errors.
const resourceLogEvery = 10 * time.Second

// resourceFailed reports an operation that failed for want of a file descriptor: counted
// (ResourceErrors) and logged, at most one line every resourceLogEvery with the number of
// failures since the last one. The log directory stays online.
func (b *Broker) resourceFailed(err error) {
	b.resource.count.Add(1)
	now := b.now()
	b.resource.Lock()
	if b.resource.lastLog != 0 && now-b.resource.lastLog < int64(resourceLogEvery) {
		b.resource.suppressed++
		b.resource.Unlock()
		return
	}
	more := b.resource.suppressed
	b.resource.lastLog, b.resource.suppressed = now, 0
	b.resource.Unlock()
	if more > 0 {
		b.logf("broker %d: %v (and %d more such failures since the last message; the log directory stays online)", b.cfg.ID, err, more)
		return
	}
	b.logf("broker %d: %v (the log directory stays online)", b.cfg.ID, err)
}

// ResourceErrors returns how many operations failed for want of a file descriptor (or of
// kernel memory to open a file) since New.
func (b *Broker) ResourceErrors() int64 { return b.resource.count.Load() }

func (b *Broker) lookup(topic string, p int32) *hosted {
	b.mu.RLock()
	h := b.mu.replicas[tp{topic, p}]
	b.mu.RUnlock()
	return h
}

// Replica returns the replica of topic-p hosted here.
func (b *Broker) Replica(topic string, p int32) (*partition.Replica, bool) {
	h := b.lookup(topic, p)
	if h == nil {
		return nil, false
	}
	return h.r, true
}

// Leads reports whether this broker leads topic-p of the topic incarnation topicID (zero:
// any) in leaderEpoch or a later epoch and takes produce requests for it: it runs with its
// log directory online and has applied that leadership (MakeLeader), so a Produce finds the
// replica a leader, not the replica of a topic deleted under the same name. The wire server
// lists a partition's leader in Metadata only once this holds. Safe for concurrent use; it
// takes only the replica map's read lock.
func (b *Broker) Leads(topic string, topicID controller.TopicID, p int32, leaderEpoch int32) bool {
	if b.usable() != nil {
		return false
	}
	h := b.lookup(topic, p)
	if h == nil {
		return false
	}
	if topicID != (controller.TopicID{}) && h.topicID != (controller.TopicID{}) && h.topicID != topicID {
		return false // the replica of the topic deleted under this name
	}
	// Epoch, role, epoch again: the role read belongs to the epoch read.
	e := h.r.LeaderEpoch()
	return e >= leaderEpoch && h.r.IsLeader() && h.r.LeaderEpoch() == e
}

// ReplicaOffsets implements controller.Offsets for this broker's replicas.
func (b *Broker) ReplicaOffsets(broker int32, topic string, p int32) (leo, hw int64, ok bool) {
	if broker != b.cfg.ID || !b.running() {
		return 0, 0, false
	}
	h := b.lookup(topic, p)
	if h == nil {
		return 0, 0, false
	}
	return h.r.LEO(), h.r.HW(), true
}

// Changed returns a channel closed at the next change of a hosted
// partition's leadership or ISR applied on this broker (and when the broker
// stops). For tests and the harness: take the channel, check the state,
// then wait on it.
func (b *Broker) Changed() <-chan struct{} {
	b.changed.Lock()
	defer b.changed.Unlock()
	return b.changed.ch
}

// OnChanges calls f now and after every change Changed reports, until ctx ends (a
// coordinator following the leadership of its internal topic's partitions). It returns when
// ctx ends; f runs on the caller's goroutine.
func (b *Broker) OnChanges(ctx context.Context, f func()) {
	for {
		ch := b.Changed()
		f()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

func (b *Broker) notifyChanged() {
	b.changed.Lock()
	close(b.changed.ch)
	b.changed.ch = make(chan struct{})
	b.changed.Unlock()
}

// allReplicas returns the hosted replicas sorted by topic and partition.
func (b *Broker) allReplicas() []*hosted {
	return sortedValues(&b.mu.RWMutex, b.mu.replicas, func(x, y *hosted) int { return tpLess(x.key, y.key) })
}

// sortedValues returns the values of m, read under mu's read lock, sorted by cmp outside it.
func sortedValues[K comparable, V any](mu *sync.RWMutex, m map[K]V, cmp func(x, y V) int) []V {
	mu.RLock()
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	mu.RUnlock()
	slices.SortFunc(out, cmp)
	return out
}

// kerrOf maps err to a Kafka error (UNKNOWN_SERVER_ERROR when it wraps none).
func kerrOf(err error) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return err
	}
	return fmt.Errorf("%w: %v", kerr.UnknownServerError, err)
}
