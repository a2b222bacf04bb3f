package broker

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"path/filepath"
	"runtime/pprof"
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
	// applied is the last controller state applied and topicConfigs the topic's config
	// overrides last applied (both guarded by Broker.apply).
	applied      controller.PartitionState
	topicConfigs map[string]string

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
	cfg       Config
	fs        vfs.FS
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
		dyn struct {
			configs     map[string]string // the dynamic configs last applied
			numFetchers int               // num.replica.fetchers
			minISR      int               // min.insync.replicas
			log         log.Config        // the log.* broker defaults of every replica
		}
	}
	numFetchers atomic.Int32 // apply.dyn.numFetchers, read lock-free

	ckpt struct {
		sync.Mutex
		hws     map[tp]int64 // HWs read from the checkpoint at New (restored on open)
		missing bool         // no checkpoint file: a new or wiped log directory
		err     error        // the checkpoint could not be read
	}

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
	fs := vfs.Or(cfg.FS)
	if err := fs.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker %d: log.dirs %q: %w", cfg.ID, cfg.DataDir, err)
	}
	now := cfg.Now
	if now == nil {
		now = func() int64 { return time.Now().UnixNano() }
	}
	cfg.Log.FS = fs
	if cfg.Log.NowMs == nil {
		cfg.Log.NowMs = func() int64 { return now() / int64(time.Millisecond) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{cfg: cfg, fs: fs, ctrl: ctrl, transport: transport, now: now, ctx: ctx, cancel: cancel}
	b.epoch.Store(-1)
	b.apply.dyn.numFetchers, b.apply.dyn.minISR, b.apply.dyn.log = cfg.NumReplicaFetchers, cfg.MinInsyncReplicas, cfg.Log
	b.numFetchers.Store(int32(cfg.NumReplicaFetchers))
	b.mu.replicas = make(map[tp]*hosted)
	b.mu.fetchers = make(map[fetcherKey]*Fetcher)
	b.exp.pending = make(map[tp][]int32)
	b.exp.signal = make(chan struct{}, 1)
	b.pause.resumeCh = make(chan struct{})
	close(b.pause.resumeCh) // not paused
	b.changed.ch = make(chan struct{})
	path := filepath.Join(cfg.DataDir, HWCheckpointFile)
	hws, missing, err := readHWCheckpoint(fs, path)
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

func validateConfig(cfg *Config) error {
	if cfg.ID < 0 {
		return fmt.Errorf("broker: broker.id must be >= 0, got %d", cfg.ID)
	}
	if cfg.DataDir == "" {
		return errors.New("broker: log.dirs (Config.DataDir) must be set")
	}
	// Each numeric setting under its Kafka name, with its lower bound.
	for _, c := range []struct {
		name     string
		val, min int64
	}{
		{"num.replica.fetchers", int64(cfg.NumReplicaFetchers), 1},
		{"replica.fetch.wait.max.ms", int64(cfg.ReplicaFetchWaitMaxMs), 0},
		{"replica.fetch.min.bytes", int64(cfg.ReplicaFetchMinBytes), 0},
		{"replica.fetch.max.bytes", int64(cfg.ReplicaFetchMaxBytes), 1},
		{"replica.fetch.response.max.bytes", int64(cfg.ReplicaFetchResponseMaxBytes), 1},
		{"replica.fetch.backoff.ms", int64(cfg.ReplicaFetchBackoffMs), 0},
		{"replica.lag.time.max.ms", cfg.ReplicaLagTimeMaxMs, 2},
		{"min.insync.replicas", int64(cfg.MinInsyncReplicas), 1},
	} {
		if c.val < c.min {
			return fmt.Errorf("broker %d: %s must be >= %d, got %d", cfg.ID, c.name, c.min, c.val)
		}
	}
	// Kafka refuses to start with a fetch wait longer than the lag time: followers would
	// drop out of the ISR while their fetch is parked (KafkaConfig's requirement).
	if int64(cfg.ReplicaFetchWaitMaxMs) > cfg.ReplicaLagTimeMaxMs {
		return fmt.Errorf("broker %d: replica.fetch.wait.max.ms (%d) must be <= replica.lag.time.max.ms (%d): a parked follower fetch would fall out of the ISR",
			cfg.ID, cfg.ReplicaFetchWaitMaxMs, cfg.ReplicaLagTimeMaxMs)
	}
	if cfg.ReplicaHighWatermarkCheckpointIntervalMs <= 0 {
		cfg.ReplicaHighWatermarkCheckpointIntervalMs = 5000
	}
	if cfg.LogRetentionCheckIntervalMs <= 0 {
		cfg.LogRetentionCheckIntervalMs = 300000
	}
	if cfg.HeartbeatIntervalMs <= 0 {
		cfg.HeartbeatIntervalMs = controller.DefaultBrokerSessionTimeoutMs / 3
	}
	switch cfg.HWUpdate {
	case "":
		cfg.HWUpdate = partition.HWUpdateAtomic
	case partition.HWUpdateAtomic, partition.HWUpdateMutex:
	default:
		return fmt.Errorf("broker %d: isrbench.hw.update must be atomic or mutex, got %q", cfg.ID, cfg.HWUpdate)
	}
	switch cfg.TruncateMode {
	case "":
		cfg.TruncateMode = partition.TruncateModeEpoch
	case partition.TruncateModeEpoch, partition.TruncateModeHW:
	default:
		return fmt.Errorf("broker %d: truncate mode must be epoch or hw, got %q", cfg.ID, cfg.TruncateMode)
	}
	if cfg.ProduceDelay < 0 {
		return fmt.Errorf("broker %d: isrbench.produce.delay must be >= 0, got %v", cfg.ID, cfg.ProduceDelay)
	}
	if cfg.ProduceSpin < 0 {
		return fmt.Errorf("broker %d: isrbench.produce.spin must be >= 0, got %v", cfg.ID, cfg.ProduceSpin)
	} else if cfg.ProduceSpin > 0 {
		spinRate() // calibrate before the first request
	}
	return nil
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

// Start recovers the replicas the controller assigns to this broker (opening and checking
// their logs), registers this incarnation with the controller (reporting the replicas that
// lost acknowledged data), subscribes to the controller's changes and, unless
// Config.Manual, starts the fetcher, ISR, heartbeat, checkpoint and retention goroutines.
// A broker leads nothing and is in no ISR when it starts: the controller fenced its
// previous incarnation (see controller.RegisterBroker). Start may be called once.
func (b *Broker) Start() error {
	if !b.state.CompareAndSwap(stateNew, stateRunning) {
		return fmt.Errorf("broker %d: Start called twice or after stop", b.cfg.ID)
	}
	reg := controller.Registration{ID: b.cfg.ID}
	if b.cfg.Addr != "" {
		h, p, err := net.SplitHostPort(b.cfg.Addr)
		if err != nil {
			return fmt.Errorf("broker %d: Addr %q: %w", b.cfg.ID, b.cfg.Addr, err)
		}
		pn, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return fmt.Errorf("broker %d: Addr %q: bad port: %w", b.cfg.ID, b.cfg.Addr, err)
		}
		reg.Host, reg.Port = h, int32(pn)
	}
	b.apply.Lock()
	assigned := b.ctrl.PartitionsOf(b.cfg.ID)
	b.setAsideStrayLocked(assignedKeys(assigned))
	for _, st := range assigned {
		key := tp{st.Topic, st.Partition}
		_, damage, err := b.openReplica(key)
		if err != nil {
			// A storage error took the log directory offline (reported after the
			// registration below); anything else leaves this replica closed.
			b.logf("broker %d: %s: %v", b.cfg.ID, key, err)
			continue
		}
		if damage != "" {
			b.logf("broker %d: %s: replica damaged: %s; it will not lead until it has rejoined the ISR", b.cfg.ID, key, damage)
			reg.Damaged = append(reg.Damaged, controller.TopicPartition{Topic: key.topic, Partition: key.partition})
		}
	}
	b.apply.Unlock()
	b.epoch.Store(b.ctrl.RegisterBroker(reg))
	if b.offline.Load() != nil {
		b.ctrl.ReportOfflineLogDir(b.cfg.ID, b.epoch.Load()) // failed during recovery
	}
	if err := b.WriteHWCheckpoint(); err != nil {
		b.logf("broker %d: %v", b.cfg.ID, err)
	}
	b.unsub = b.ctrl.Subscribe(b.cfg.ID, b.onUpdate)
	if !b.cfg.Manual {
		b.goLabeled("isr-expiration", b.isrLoop)
		b.goLabeled("housekeeping", b.housekeepingLoop)
	}
	return nil
}

// goLabeled starts fn on a goroutine labelled broker=<id>, role=<role> and
// the extra label pairs; Close/Kill wait for it.
func (b *Broker) goLabeled(role string, fn func(ctx context.Context), extra ...string) {
	b.goLabeledIn(b.ctx, role, fn, extra...)
}

// goLabeledIn is goLabeled with fn's context derived from ctx (a child of b.ctx).
func (b *Broker) goLabeledIn(ctx context.Context, role string, fn func(ctx context.Context), extra ...string) {
	labels := append([]string{"broker", strconv.Itoa(int(b.cfg.ID)), "role", role}, extra...)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		pprof.Do(ctx, pprof.Labels(labels...), fn)
	}()
}

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
// here gets KAFKA_STORAGE_ERROR. Other errors are ignored. Returns err.
func (b *Broker) storageFailed(err error) error {
	if err == nil || !errors.Is(err, kerr.KafkaStorageError) {
		return err
	}
	if errors.Is(err, log.ErrClosed) {
		// The replica was closed under the caller (its topic was deleted, or the broker
		// stops): no disk failed. NOT_LEADER_OR_FOLLOWER makes a client look again.
		return fmt.Errorf("%w: %v", kerr.NotLeaderForPartition, err)
	}
	e := fmt.Errorf("broker %d: log directory %s is offline: %w", b.cfg.ID, b.cfg.DataDir, err)
	if b.offline.CompareAndSwap(nil, &e) {
		b.logf("%v; reporting it to the controller", e)
		if epoch := b.epoch.Load(); epoch >= 0 { // else Start reports it once registered
			b.ctrl.ReportOfflineLogDir(b.cfg.ID, epoch)
		}
		b.notifyChanged()
	}
	return err
}

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

// onUpdate applies one controller change (the subscription callback). States older than
// the last applied one are ignored.
func (b *Broker) onUpdate(u controller.Update) {
	if !b.running() {
		return
	}
	b.apply.Lock()
	defer b.apply.Unlock()
	if !b.running() {
		return
	}
	switch {
	case u.Partition != nil:
		if err := b.applyLocked(*u.Partition); err != nil {
			b.logf("broker %d: %s-%d: applying %v: %v", b.cfg.ID, u.Partition.Topic, u.Partition.Partition, *u.Partition, err)
		}
	case u.Topic != nil && u.Topic.Deleted:
		b.deleteTopicLocked(u.Topic.Name)
	case u.Topic != nil:
		for _, h := range b.allReplicas() {
			if h.key.topic == u.Topic.Name {
				b.applyTopicConfigsLocked(h, u.Topic.Configs)
			}
		}
	case u.BrokerConfigs != nil:
		b.applyBrokerConfigsLocked(u.BrokerConfigs.Configs)
	}
}

func newer(st, old controller.PartitionState) bool {
	if st.LeaderEpoch != old.LeaderEpoch {
		return st.LeaderEpoch > old.LeaderEpoch
	}
	return st.PartitionEpoch > old.PartitionEpoch
}

func (b *Broker) applyLocked(st controller.PartitionState) error {
	key := tp{st.Topic, st.Partition}
	if !slices.Contains(st.Replicas, b.cfg.ID) {
		return nil // not hosted here (no reassignment support)
	}
	h := b.lookup(st.Topic, st.Partition)
	if h == nil {
		var err error
		var damage string
		if h, damage, err = b.openReplica(key); err != nil {
			return err
		}
		if damage != "" {
			b.logf("broker %d: %s: replica opened after start is damaged: %s", b.cfg.ID, key, damage)
		}
	} else if h.applied.Topic != "" && !newer(st, h.applied) {
		return nil
	}
	roleChange := h.applied.Topic == "" || st.LeaderEpoch != h.applied.LeaderEpoch ||
		(st.Leader == b.cfg.ID) != h.r.IsLeader()
	st = st.Clone()
	switch {
	case st.Leader == b.cfg.ID && roleChange:
		b.removeFromFetchers(key)
		if err := h.r.MakeLeader(st); err != nil {
			return fmt.Errorf("MakeLeader: %w", b.storageFailed(err))
		}
	case st.Leader == b.cfg.ID:
		h.r.ApplyISR(st)
	case roleChange:
		b.removeFromFetchers(key)
		if err := h.r.MakeFollower(st); err != nil {
			return fmt.Errorf("MakeFollower: %w", b.storageFailed(err))
		}
		if st.Leader != controller.NoLeader {
			b.addToFetcher(h, st.Leader, st.LeaderEpoch)
		}
	default:
		h.r.ApplyISR(st) // follower: ISR bookkeeping only
	}
	h.applied = st
	b.notifyChanged()
	return nil
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

func (b *Broker) notifyChanged() {
	b.changed.Lock()
	close(b.changed.ch)
	b.changed.ch = make(chan struct{})
	b.changed.Unlock()
}

// Pause stops fetching, heartbeating and ISR expiration (as a SIGSTOPped or
// GC-paused broker would) until Resume. Serving requests is not paused (the
// wire server pauses its side).
func (b *Broker) Pause() {
	b.pause.Lock()
	defer b.pause.Unlock()
	if b.pause.paused {
		return
	}
	b.pause.paused = true
	b.pause.resumeCh = make(chan struct{})
}

// Resume undoes Pause.
func (b *Broker) Resume() {
	b.pause.Lock()
	defer b.pause.Unlock()
	if !b.pause.paused {
		return
	}
	b.pause.paused = false
	close(b.pause.resumeCh)
}

// Paused reports whether the broker is paused.
func (b *Broker) Paused() bool {
	b.pause.Lock()
	defer b.pause.Unlock()
	return b.pause.paused
}

// waitResumed blocks while paused; false when ctx is done first.
func (b *Broker) waitResumed(ctx context.Context) bool {
	b.pause.Lock()
	ch := b.pause.resumeCh
	b.pause.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// stop cancels every goroutine and waits for them. Returns false if the
// broker was already stopped.
func (b *Broker) stop() bool {
	first := false
	b.stopOnce.Do(func() {
		first = true
		b.state.Store(stateStopped)
		if b.unsub != nil {
			b.unsub()
		}
		b.cancel()
		// Let an in-flight state application finish; later ones see
		// !running, so no goroutine is added after this point.
		b.apply.Lock()
		b.apply.Unlock() //nolint:staticcheck // barrier
		b.wg.Wait()      // fetchers close their own connections on exit
		b.notifyChanged()
	})
	return first
}

// shutdown stops the broker for Close, Kill and Crash. It reports whether
// the caller must end the replicas: false when the broker never started (it
// only becomes stopped) or was already stopped.
func (b *Broker) shutdown() bool {
	if b.state.CompareAndSwap(stateNew, stateStopped) {
		b.cancel()
		return false
	}
	return b.stop()
}

// allReplicas returns the hosted replicas sorted by topic and partition.
func (b *Broker) allReplicas() []*hosted {
	b.mu.RLock()
	out := make([]*hosted, 0, len(b.mu.replicas))
	for _, h := range b.mu.replicas {
		out = append(out, h)
	}
	b.mu.RUnlock()
	slices.SortFunc(out, func(x, y *hosted) int { return tpLess(x.key, y.key) })
	return out
}

// Close stops the broker cleanly: fetchers and loops stop, the HW checkpoint
// is written, every replica (and its log) is closed. Idempotent.
func (b *Broker) Close() error {
	if !b.shutdown() {
		return nil
	}
	var errs []error
	if b.offline.Load() == nil {
		if err := b.WriteHWCheckpoint(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, h := range b.allReplicas() {
		if err := h.r.Close(); err != nil && b.offline.Load() == nil {
			errs = append(errs, fmt.Errorf("close %s: %w", h.key, err))
		}
	}
	return errors.Join(errs...)
}

// Kill stops the broker abruptly, as SIGKILL would: goroutines stop, no HW
// checkpoint, recovery point or epoch checkpoint is written and nothing is
// fsynced; the files are left as the page cache has them, so a new Broker
// on the same DataDir recovers from them. Each replica is demoted (pending acks=all waits
// end with NOT_LEADER_OR_FOLLOWER) and its log abandoned (log.Abandon: files closed with no
// fsync, index or recovery-point write), so no descriptor outlives the kill and a late
// append cannot write into files a new Broker has recovered. Idempotent.
func (b *Broker) Kill() {
	if !b.shutdown() {
		return
	}
	for _, h := range b.allReplicas() {
		st := h.r.State()
		st.Leader = controller.NoLeader
		_ = h.r.MakeFollower(st) // fails only on a closed replica: nothing to demote
		h.l.Abandon()
	}
}

// Crash is Kill followed by a power loss of the broker's file system: everything not
// fsynced is gone (Config.FS must be a vfs.Crasher: vfs.PowerLossFS or vfs.MemFS).
func (b *Broker) Crash() error {
	b.Kill()
	c, ok := b.fs.(vfs.Crasher)
	if !ok {
		return fmt.Errorf("broker %d: the file system of %s cannot simulate a power loss (use a vfs.PowerLossFS)", b.cfg.ID, b.cfg.DataDir)
	}
	if err := c.Crash(); err != nil {
		return fmt.Errorf("broker %d: power loss: %w", b.cfg.ID, err)
	}
	return nil
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
