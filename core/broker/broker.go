package broker

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"os"
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
)

// HWCheckpointFile is the name of the HW checkpoint in DataDir (Kafka's
// ReplicaManager.HighWatermarkFilename).
const HWCheckpointFile = "replication-offset-checkpoint"

// errBrokerStopped is returned by calls on a closed/killed broker.
var errBrokerStopped = errors.New("broker is stopped")

type tp struct {
	topic     string
	partition int32
}

func (k tp) String() string { return k.topic + "-" + strconv.Itoa(int(k.partition)) }

// hosted is one replica on this broker.
type hosted struct {
	key    tp
	r      *partition.Replica
	l      *log.Log
	minISR int
	// applied is the last controller state applied (guarded by Broker.applyMu).
	applied controller.PartitionState

	alterMu      sync.Mutex
	lastAlterErr string // last AlterPartition error logged (log de-duplication)
}

const (
	stateNew int32 = iota
	stateRunning
	stateStopped
)

// Broker is one broker's replica manager. All methods are safe for
// concurrent use.
type Broker struct {
	cfg       Config
	ctrl      *controller.Controller
	transport Transport
	now       func() int64

	state  atomic.Int32
	ctx    context.Context // cancelled by Close/Kill/Crash
	cancel context.CancelFunc
	wg     sync.WaitGroup
	unsub  func()

	mu       sync.RWMutex // guards replicas and fetchers maps
	replicas map[tp]*hosted
	fetchers map[fetcherKey]*fetcher

	applyMu sync.Mutex // serialises controller state application

	ckptMu  sync.Mutex
	ckptHWs map[tp]int64 // HWs read from the checkpoint at New (restore on open)

	// ISR expansion proposals from the fetch path (tp -> proposed ISR).
	expMu      sync.Mutex
	expPending map[tp][]int32
	expSignal  chan struct{}

	pauseMu  sync.Mutex
	paused   bool
	resumeCh chan struct{} // closed on Resume; replaced on Pause

	changedMu sync.Mutex
	changedCh chan struct{} // closed on the next state change (Changed)

	isrShrinks atomic.Int64
	isrExpands atomic.Int64

	stopOnce sync.Once
}

// New validates cfg and builds a stopped broker; Start brings it up. The
// HW checkpoint in DataDir is read here (a corrupt checkpoint is an error).
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
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker %d: log.dirs %q: %w", cfg.ID, cfg.DataDir, err)
	}
	hws, err := readHWCheckpoint(filepath.Join(cfg.DataDir, HWCheckpointFile))
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", cfg.ID, err)
	}
	now := cfg.Now
	if now == nil {
		now = func() int64 { return time.Now().UnixNano() }
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg:        cfg,
		ctrl:       ctrl,
		transport:  transport,
		now:        now,
		ctx:        ctx,
		cancel:     cancel,
		replicas:   make(map[tp]*hosted),
		fetchers:   make(map[fetcherKey]*fetcher),
		ckptHWs:    hws,
		expPending: make(map[tp][]int32),
		expSignal:  make(chan struct{}, 1),
		resumeCh:   make(chan struct{}),
		changedCh:  make(chan struct{}),
	}
	close(b.resumeCh) // not paused
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
		cfg.HWUpdate = "atomic"
	case "atomic", "mutex":
	default:
		return fmt.Errorf("broker %d: isrbench.hw.update must be atomic or mutex, got %q", cfg.ID, cfg.HWUpdate)
	}
	switch cfg.TruncateMode {
	case "":
		cfg.TruncateMode = "epoch"
	case "epoch", "hw":
	default:
		return fmt.Errorf("broker %d: truncate mode must be epoch or hw, got %q", cfg.ID, cfg.TruncateMode)
	}
	if cfg.ProduceDelay < 0 {
		return fmt.Errorf("broker %d: isrbench.produce.delay must be >= 0, got %v", cfg.ID, cfg.ProduceDelay)
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

// Config returns the effective configuration (defaults filled in).
func (b *Broker) Config() Config { return b.cfg }

// Start subscribes to the controller, registers the broker if Config.Addr is
// set, opens every hosted replica (recovering its log) and starts the ISR,
// heartbeat/checkpoint and fetcher goroutines. Start may be called once.
func (b *Broker) Start() error {
	if !b.state.CompareAndSwap(stateNew, stateRunning) {
		return fmt.Errorf("broker %d: Start called twice or after stop", b.cfg.ID)
	}
	var host string
	var port int32
	if b.cfg.Addr != "" {
		h, p, err := net.SplitHostPort(b.cfg.Addr)
		if err != nil {
			return fmt.Errorf("broker %d: Addr %q: %w", b.cfg.ID, b.cfg.Addr, err)
		}
		pn, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return fmt.Errorf("broker %d: Addr %q: bad port: %w", b.cfg.ID, b.cfg.Addr, err)
		}
		host, port = h, int32(pn)
	}
	b.goLabeled("isr-expiration", b.isrLoop)
	b.goLabeled("housekeeping", b.housekeepingLoop)
	b.unsub = b.ctrl.Subscribe(b.cfg.ID, b.onPartitionState)
	if b.cfg.Addr != "" {
		b.ctrl.RegisterBroker(b.cfg.ID, host, port)
	}
	// Catch up with states that existed before the subscription.
	for _, topic := range b.ctrl.Topics() {
		states, ok := b.ctrl.Partitions(topic)
		if !ok {
			continue
		}
		for _, st := range states {
			if slices.Contains(st.Replicas, b.cfg.ID) {
				b.onPartitionState(st)
			}
		}
	}
	return nil
}

// goLabeled starts fn on a goroutine labelled broker=<id>, role=<role> and
// the extra label pairs; Close/Kill wait for it.
func (b *Broker) goLabeled(role string, fn func(ctx context.Context), extra ...string) {
	labels := append([]string{"broker", strconv.Itoa(int(b.cfg.ID)), "role", role}, extra...)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		pprof.Do(b.ctx, pprof.Labels(labels...), fn)
	}()
}

func (b *Broker) running() bool { return b.state.Load() == stateRunning }

func (b *Broker) lookup(topic string, p int32) *hosted {
	b.mu.RLock()
	h := b.replicas[tp{topic, p}]
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

// onPartitionState applies one controller change (subscription callback and
// Start's catch-up scan). States older than the last applied one are ignored.
func (b *Broker) onPartitionState(st controller.PartitionState) {
	if !b.running() {
		return
	}
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	if !b.running() {
		return
	}
	if err := b.applyLocked(st); err != nil {
		b.logf("broker %d: %s-%d: applying %v: %v", b.cfg.ID, st.Topic, st.Partition, st, err)
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
		h, err = b.openReplica(key)
		if err != nil {
			return err
		}
	} else if !newer(st, h.applied) {
		return nil
	}
	roleChange := h.applied.Topic == "" || st.LeaderEpoch != h.applied.LeaderEpoch ||
		(st.Leader == b.cfg.ID) != h.r.IsLeader()
	st = st.Clone()
	switch {
	case st.Leader == b.cfg.ID && roleChange:
		b.removeFromFetchers(key)
		if err := h.r.MakeLeader(st); err != nil {
			return fmt.Errorf("MakeLeader: %w", err)
		}
	case st.Leader == b.cfg.ID:
		h.r.ApplyISR(st)
	case roleChange:
		b.removeFromFetchers(key)
		if err := h.r.MakeFollower(st); err != nil {
			return fmt.Errorf("MakeFollower: %w", err)
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
	b.changedMu.Lock()
	defer b.changedMu.Unlock()
	return b.changedCh
}

func (b *Broker) notifyChanged() {
	b.changedMu.Lock()
	close(b.changedCh)
	b.changedCh = make(chan struct{})
	b.changedMu.Unlock()
}

// openReplica opens (creating if needed) the replica directory, reports the
// log recovery and builds the partition.Replica. Called under applyMu.
func (b *Broker) openReplica(key tp) (*hosted, error) {
	dir := filepath.Join(b.cfg.DataDir, key.String())
	l, rec, err := log.Open(dir, b.cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	if b.cfg.OnRecovery != nil {
		b.cfg.OnRecovery(key.topic, key.partition, rec)
	} else if rec.TruncatedBytes > 0 || rec.IndexesRebuilt > 0 {
		b.logf("broker %d: %s recovery: %s", b.cfg.ID, key, rec)
	}
	minISR := b.cfg.MinInsyncReplicas
	if v, ok := b.ctrl.TopicConfig(key.topic)["min.insync.replicas"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.logf("broker %d: %s: topic config min.insync.replicas=%q is not an integer >= 1; using %d", b.cfg.ID, key, v, minISR)
		} else {
			minISR = n
		}
	}
	r, err := partition.NewReplica(key.topic, key.partition, b.cfg.ID, l, dir, partition.Config{
		MinInsyncReplicas:   minISR,
		ReplicaLagTimeMaxMs: b.cfg.ReplicaLagTimeMaxMs,
		HWUpdate:            b.cfg.HWUpdate,
		TruncateMode:        b.cfg.TruncateMode,
		Now:                 b.now,
		OnHWLag:             b.cfg.OnHWLag,
	})
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("replica %s: %w", key, err)
	}
	b.ckptMu.Lock()
	hw, ok := b.ckptHWs[key]
	b.ckptMu.Unlock()
	if ok {
		if err := restoreHW(r, min(hw, r.LEO())); err != nil {
			b.logf("broker %d: %s: restore HW %d: %v", b.cfg.ID, key, hw, err)
		}
	}
	h := &hosted{key: key, r: r, l: l, minISR: minISR}
	b.mu.Lock()
	b.replicas[key] = h
	b.mu.Unlock()
	return h, nil
}

// Pause stops fetching, heartbeating and ISR expiration (as a SIGSTOPped or
// GC-paused broker would) until Resume. Serving requests is not paused (the
// wire server pauses its side).
func (b *Broker) Pause() {
	b.pauseMu.Lock()
	defer b.pauseMu.Unlock()
	if b.paused {
		return
	}
	b.paused = true
	b.resumeCh = make(chan struct{})
}

// Resume undoes Pause.
func (b *Broker) Resume() {
	b.pauseMu.Lock()
	defer b.pauseMu.Unlock()
	if !b.paused {
		return
	}
	b.paused = false
	close(b.resumeCh)
}

// Paused reports whether the broker is paused.
func (b *Broker) Paused() bool {
	b.pauseMu.Lock()
	defer b.pauseMu.Unlock()
	return b.paused
}

// waitResumed blocks while paused; false when ctx is done first.
func (b *Broker) waitResumed(ctx context.Context) bool {
	b.pauseMu.Lock()
	ch := b.resumeCh
	b.pauseMu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// housekeepingLoop heartbeats the controller, writes the HW checkpoint and
// applies log retention.
func (b *Broker) housekeepingLoop(ctx context.Context) {
	hb := time.NewTicker(time.Duration(b.cfg.HeartbeatIntervalMs) * time.Millisecond)
	defer hb.Stop()
	ck := time.NewTicker(time.Duration(b.cfg.ReplicaHighWatermarkCheckpointIntervalMs) * time.Millisecond)
	defer ck.Stop()
	ret := time.NewTicker(time.Duration(b.cfg.LogRetentionCheckIntervalMs) * time.Millisecond)
	defer ret.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ret.C:
			if !b.Paused() {
				b.ApplyRetention()
			}
		case <-hb.C:
			// Under pauseMu: once Pause returns no heartbeat is in flight.
			b.pauseMu.Lock()
			if !b.paused {
				b.ctrl.Heartbeat(b.cfg.ID)
			}
			b.pauseMu.Unlock()
		case <-ck.C:
			if b.Paused() {
				continue
			}
			if err := b.WriteHWCheckpoint(); err != nil {
				b.logf("broker %d: %v", b.cfg.ID, err)
			}
		}
	}
}

// ApplyRetention applies retention.bytes / retention.ms to every hosted
// log, never deleting past the replica's HW (exclusive) nor the active
// segment, and drops the leader epoch cache entries below the new log start
// (partition.Replica.ApplyRetention); the housekeeping goroutine calls it
// every log.retention.check.interval.ms. Returns the number of segments
// deleted.
func (b *Broker) ApplyRetention() int {
	nowMs := time.Now().UnixMilli()
	n := 0
	for _, h := range b.allReplicas() {
		d, err := h.r.ApplyRetention(nowMs)
		n += d
		if err != nil {
			b.logf("broker %d: %s: retention: %v", b.cfg.ID, h.key, err)
		}
	}
	return n
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
		b.applyMu.Lock()
		b.applyMu.Unlock() //nolint:staticcheck // barrier
		b.wg.Wait()        // fetchers close their own connections on exit
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

func (b *Broker) allReplicas() []*hosted {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*hosted, 0, len(b.replicas))
	for _, h := range b.replicas {
		out = append(out, h)
	}
	slices.SortFunc(out, func(x, y *hosted) int {
		if c := strings.Compare(x.key.topic, y.key.topic); c != 0 {
			return c
		}
		return int(x.key.partition - y.key.partition)
	})
	return out
}

// Close stops the broker cleanly: fetchers and loops stop, the HW checkpoint
// is written, every replica (and its log) is closed. Idempotent.
func (b *Broker) Close() error {
	if !b.shutdown() {
		return nil
	}
	var errs []error
	if err := b.WriteHWCheckpoint(); err != nil {
		errs = append(errs, err)
	}
	for _, h := range b.allReplicas() {
		if err := h.r.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", h.key, err))
		}
	}
	return errors.Join(errs...)
}

// Kill stops the broker abruptly, as SIGKILL would: goroutines stop, no HW
// checkpoint, recovery point or epoch checkpoint is written and nothing is
// fsynced; the files are left as the page cache has them, so a new Broker
// on the same DataDir recovers from them. Logs are abandoned, not closed
// (see killReplica). Idempotent.
func (b *Broker) Kill() {
	if !b.shutdown() {
		return
	}
	for _, h := range b.allReplicas() {
		killReplica(h)
	}
}

// Crash is Kill followed by log.SimulatePowerLoss on every replica: every
// segment loses what was not fsynced (the crash-broker fault).
func (b *Broker) Crash() {
	if !b.shutdown() {
		return
	}
	for _, h := range b.allReplicas() {
		if err := h.l.SimulatePowerLoss(); err != nil {
			b.logf("broker %d: %s: simulate power loss: %v", b.cfg.ID, h.key, err)
		}
		_ = h.r.Close() // the log is already closed: this only ends the replica
	}
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
