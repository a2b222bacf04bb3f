package sim

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/vfs"
)

// Options configure one simulation. Zero fields take the defaults noted.
type Options struct {
	Seed       uint64
	Steps      int // steps of random work and faults (default 300); healing and convergence follow
	Brokers    int // default 3
	Partitions int // partitions of the topic (default 2)
	RF         int // replication factor (default 3)
	MinISR     int // min.insync.replicas (default 2)
	// FaultEvery: about one step in FaultEvery injects or heals a fault (default 8).
	FaultEvery int
}

func (o *Options) fill() {
	if o.Steps == 0 {
		o.Steps = 400
	}
	if o.Brokers == 0 {
		o.Brokers = 3
	}
	if o.Partitions == 0 {
		o.Partitions = 2
	}
	if o.RF == 0 {
		o.RF = min(3, o.Brokers)
	}
	if o.MinISR == 0 {
		o.MinISR = min(2, o.RF)
	}
	if o.FaultEvery == 0 {
		o.FaultEvery = 10
	}
}

// Result is the outcome of a simulation: Err is the first invariant violation (nil: none);
// Trace holds one line per step; Stats counts what happened.
type Result struct {
	Err   error
	Trace []string
	Stats Stats
}

// Stats counts a run's work and faults.
type Stats struct {
	Steps, Produced, AckedAll, AckedOne, Consumed         int
	Kills, Crashes, Restarts, Pauses, Partitions, DiskFul int
	ClusterRestarts, LeaderMoves, CtrlCuts, Correlated    int
	FetcherResizes, PartitionAdds, Rebalances             int
	// CrashesOutOfSync counts crashes while some broker was down or some ISR not full.
	CrashesOutOfSync int
	// LeaderFlaps counts leaderships moved back to the previous leader soon after a move;
	// ParkedWaits counts acks=all waits first looked at late (parkedUntil).
	LeaderFlaps, ParkedWaits int
	// MetaFaults counts metadata-log faults (full disk, I/O errors); MetaRefused the
	// metadata changes refused meanwhile.
	MetaFaults, MetaRefused int
	// MetaCrashes counts power losses of the controller's disk (with a torn append or a
	// flipped bit in one copy, sometimes).
	MetaCrashes int
	// FsyncRuns counts runs with flush.messages=1; PowerLosses the power losses of every
	// broker at once (in those runs only).
	FsyncRuns, PowerLosses int
	// EpochQueued counts broker incarnations started with the leader-epoch checkpoint writes
	// queued (isrbench.leader.epoch.checkpoint.async: run at the HW checkpoint passes, lost
	// to a kill or a crash before).
	EpochQueued int
	// AlterPartitions counts the leaders' AlterPartition requests (retries included);
	// AlterLost those whose request or answer was lost (answered REQUEST_TIMED_OUT).
	AlterPartitions, AlterLost int
	// ConvergedMaxNs is the longest a run took to meet every liveness condition after its
	// faults healed (the maximum over runs when added up).
	ConvergedMaxNs int64
	// RetentionOn counts the times the topic's retention.bytes was set (retentionBytes);
	// RetentionDeletes counts retention passes that deleted segments; ConsumerResets counts
	// consumers moved up to a log start that retention passed.
	RetentionOn, RetentionDeletes, ConsumerResets int
	// Groups counts the group coordinator's work (groups.go).
	Groups GroupStats
	// Txns counts the transactions' work (txns.go).
	Txns TxnStats
}

// maxPartitions bounds the partitions CreatePartitions faults add.
const maxPartitions = 5

const (
	topic     = "t"
	startNs   = int64(1_700_000_000) * int64(time.Second) // a wall-clock-like origin
	sessionMs = 1500
	lagMs     = 1000
	timeoutNs = int64(3 * time.Second) // produce request timeout
	rpcTimeNs = int64(2 * time.Second) // a dropped request fails after this
	// segmentBytes is log.segment.bytes: small, so that a partition has several segments
	// for retention to delete; retentionBytes is the topic's retention.bytes while on.
	segmentBytes   = 1024
	retentionBytes = 600
)

// Sim is one simulation (one goroutine).
type Sim struct {
	o     Options
	rng   *rand.Rand
	ids   *rand.ChaCha8 // topic ids' bytes: a run's topic ids follow from its seed
	now   int64
	trace []string
	stats Stats
	err   error

	ctrlFS *vfs.MemFS
	ctrl   *controller.Controller
	nodes  []*node
	// nparts is the topic's partition count now (Options.Partitions, raised by
	// CreatePartitions faults up to maxPartitions).
	nparts int

	queue msgQueue
	seq   int64
	cut   map[[2]int32]bool  // network partition between two brokers (both directions)
	slow  map[[2]int32]int64 // extra one-way delay (ns)

	acked     map[key]entry  // acks=all acknowledged: (partition, offset) -> value
	acking    map[int]ackRef // acks=all acknowledged by a leader, the answer on its way, by record number
	consumed  map[key]entry  // read by a consumer below the HW
	consumer  []int64        // consumer position per partition
	nextValue int
	pending   []*pendingProduce
	idem      []*idemProducer
	hwSeen    map[termKey]int64 // highest HW seen per leadership term
	synced    map[syncKey]int32 // follower applied a fetch response in this leader epoch
	lastState map[int32]string  // last traced controller state per partition
	// crashPending: a broker crashed and the cluster has not been back in sync since;
	// excusedNums holds the numbers of the records a failure excuses losing, lossy the
	// partitions where one was or that had no live holder left (see excuse.go).
	crashPending bool
	excusedNums  map[int]bool
	lossy        map[int32]bool
	// fsyncAll: the topic has flush.messages=1 (one run in four): every append is fsynced
	// before anyone sees it, so crashes excuse nothing.
	fsyncAll bool
	// txnVerifyOff: the brokers run with transaction.partition.verification.enable=false
	// (one seed in four, by the seed's value: no random draw), so that the partitions' own
	// producer-epoch fencing is checked without KIP-890's verification in front of it.
	txnVerifyOff bool
	// metaFault says what keeps the metadata log from being written ("" nothing).
	metaFault string
	// healed: the faults have healed (the convergence phase): no message is lost any more,
	// and timers run what the brokers' and the controller's goroutines would (liveness.go);
	// lastSessionCheck is when they last checked the sessions.
	healed           bool
	lastSessionCheck int64
	// retention: the topic's retention.bytes is retentionBytes now (a fault toggles it);
	// retentionUsed: it was at some point, so acknowledged and consumed records below a
	// leader's log start are expired, not lost.
	retention, retentionUsed bool
	// groups: the group coordinators and their consumers (groups.go).
	groups *groupSim
	// comparedOK: the last byte-for-byte comparison of each ISR member that passed (check).
	comparedOK map[syncKey]compared
	// txns: the transaction coordinators, the transactional producers and their oracle
	// (txns.go).
	txns *txnSim
}

// entry is a record the oracle holds: its value and its number (the order it was produced in).
type entry struct {
	value string
	num   int
}

// ackRef is a record acknowledged at a leader whose answer is on its way to the client.
type ackRef struct {
	at key
	e  entry
}

// valueNum is the number of a value "v123" or "i123".
func valueNum(v string) int {
	n := 0
	for _, c := range v[1:] {
		n = 10*n + int(c-'0')
	}
	return n
}

type key struct {
	p   int32
	off int64
}

type termKey struct {
	p     int32
	node  int32
	inc   int
	epoch int32
}

type syncKey struct {
	node int32
	inc  int
	p    int32
}

type node struct {
	id            int32
	fs            *vfs.MemFS
	b             *broker.Broker // nil while down
	inc           int            // incarnation counter (a restart makes a new one)
	paused        bool
	ctrlCut       bool // heartbeats and metadata do not flow between it and the controller
	diskFull      bool
	inflight      map[*broker.Fetcher]int64 // when each fetcher's round in flight was sent
	lastHeartbeat int64
	held          []func() // deliveries waiting for Resume
	rs            broker.ReplicaServe
	// lastISRPass is when the convergence phase's timers last ran its ISR expiration.
	lastISRPass int64
	// downHeld is what its replicas held when it last went down (nil while up); crashHeld
	// what they held at each of its crashes (checkMinISR).
	downHeld  map[int32]heldLog
	crashHeld []map[int32]heldLog
}

func (n *node) up() bool { return n.b != nil }

// Run runs one simulation.
func Run(o Options) Result {
	o.fill()
	s := &Sim{o: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), now: startNs,
		cut: map[[2]int32]bool{}, slow: map[[2]int32]int64{}, acked: map[key]entry{}, acking: map[int]ackRef{}, consumed: map[key]entry{},
		nparts: o.Partitions, consumer: make([]int64, o.Partitions), hwSeen: map[termKey]int64{}, synced: map[syncKey]int32{},
		lastState: map[int32]string{}, excusedNums: map[int]bool{}, lossy: map[int32]bool{}, comparedOK: map[syncKey]compared{}}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], o.Seed)
	s.ids = rand.NewChaCha8(seed)
	s.run()
	return Result{Err: s.err, Trace: s.trace, Stats: s.stats}
}

func (s *Sim) tracef(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%8.3fs ", float64(s.now-startNs)/1e9)+fmt.Sprintf(format, args...))
}

func (s *Sim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf(format, args...)
		s.tracef("FAIL: %v", s.err)
	}
}

func (s *Sim) clock() int64 { return s.now }

func (s *Sim) openController() {
	ctrl, rec, err := controller.Open(controller.Config{
		BrokerSessionTimeoutMs: sessionMs, Now: s.clock, Dir: "/metadata", FS: s.ctrlFS,
		TopicIDSource: s.ids, ManualDelivery: true, Logf: func(f string, a ...any) { s.tracef("controller: "+f, a...) },
	})
	if err != nil {
		s.fail("controller: open: %v", err)
		return
	}
	s.ctrl = ctrl
	s.tracef("controller open: %v", rec)
}

func (s *Sim) run() {
	for i := 0; i < 2; i++ {
		s.idem = append(s.idem, &idemProducer{pid: int64(1000 + i), next: map[int32]int32{}, inflight: map[int32]*idemBatch{}})
	}
	s.ctrlFS = vfs.NewStrictMemFS(s.wall)
	s.openController()
	if s.txnVerifyOff = s.o.Seed%4 == 0; s.txnVerifyOff {
		s.tracef("transaction.partition.verification.enable=false: transactional batches are not verified with their coordinator")
	}
	for i := 0; i < s.o.Brokers; i++ {
		n := &node{id: int32(i), fs: vfs.NewStrictMemFS(s.wall)}
		s.nodes = append(s.nodes, n)
		s.start(n)
	}
	configs := map[string]string{controller.ConfigMinInsyncReplicas: fmt.Sprint(s.o.MinISR)}
	if s.fsyncAll = s.rng.IntN(4) == 0; s.fsyncAll {
		configs[controller.ConfigFlushMessages] = "1"
		s.stats.FsyncRuns++
	}
	s.tracef("%s", s.describeFsync())
	if _, err := s.ctrl.CreateTopic(topic, int32(s.o.Partitions), int16(s.o.RF), configs); err != nil {
		s.fail("create topic: %v", err)
		return
	}
	for i := 0; i < s.o.Steps && s.err == nil; i++ {
		s.step(true)
	}
	if s.err == nil {
		s.heal()
		s.healed = true
		s.converge()
	}
	if s.err == nil {
		s.checkDurability(true)
	}
}

func (s *Sim) wall() time.Time { return time.Unix(0, s.now) }

// start builds and starts a new incarnation of broker n on its disk.
func (s *Sim) start(n *node) {
	cfg := broker.DefaultConfig()
	cfg.ID = n.id
	cfg.DataDir = fmt.Sprintf("/broker-%d", n.id)
	cfg.FS = n.fs
	cfg.Manual = true
	cfg.Now = s.clock
	cfg.ReplicaFetchWaitMaxMs = 0
	cfg.ReplicaFetchBackoffMs = 100
	cfg.ReplicaLagTimeMaxMs = lagMs
	cfg.ReplicaFetchMaxBytes = 4 << 10
	cfg.Log.SegmentBytes = segmentBytes
	cfg.Log.IndexIntervalBytes = 256
	if cfg.EpochCheckpointAsync = s.rng.IntN(2) == 0; cfg.EpochCheckpointAsync {
		s.stats.EpochQueued++
	}
	if s.txnVerifyOff {
		if err := cfg.Settings.Set("transaction.partition.verification.enable", "false"); err != nil {
			s.fail("broker %d: %v", n.id, err)
			return
		}
	}
	cfg.Logf = func(f string, a ...any) { s.tracef(f, a...) }
	inc := n.inc + 1
	cfg.AlterPartition = func(req controller.AlterPartitionRequest, answer func(controller.PartitionState, error)) {
		s.alterPartition(n, inc, req, answer)
	}
	b, err := broker.New(cfg, s.ctrl, noTransport{})
	if err != nil {
		s.fail("broker %d: new: %v", n.id, err)
		return
	}
	if err := b.Start(); err != nil {
		b.Kill()
		if !s.refused(err) {
			s.fail("broker %d: start: %v", n.id, err)
		}
		return
	}
	held := n.held
	n.b, n.inc, n.paused, n.inflight, n.held, n.downHeld = b, inc, false, map[*broker.Fetcher]int64{}, nil, nil
	s.tracef("broker %d started: incarnation %d, broker epoch %d", n.id, n.inc, b.Epoch())
	for _, fn := range held {
		fn() // deliveries held for the previous incarnation: they fail now
	}
}

// step advances the clock, delivers what is due and does one random thing.
func (s *Sim) step(faults bool) {
	s.stats.Steps++
	s.now += int64(s.rng.IntN(20_000)) * int64(time.Microsecond)
	for s.queue.Len() > 0 && s.queue[0].at <= s.now && s.err == nil {
		m := heap.Pop(&s.queue).(*msg)
		m.fn()
	}
	s.checkProduces()
	s.heartbeats()
	if s.healed {
		s.timers()
	}
	if s.err != nil {
		return
	}
	if faults && s.rng.IntN(s.o.FaultEvery) == 0 {
		s.fault()
	} else {
		s.work(faults)
	}
	s.check()
}

// heartbeatNs is how often a running broker heartbeats (broker.heartbeat.interval.ms).
const heartbeatNs = int64(300 * time.Millisecond)

// heartbeats sends the heartbeats that are due: every broker that runs, is not paused and
// reaches the controller heartbeats every heartbeatNs, so a session expires only under a
// fault.
func (s *Sim) heartbeats() {
	for _, n := range s.nodes {
		if n.up() && !n.paused && !n.ctrlCut && s.now-n.lastHeartbeat >= heartbeatNs {
			n.b.Heartbeat()
			n.lastHeartbeat = s.now
		}
	}
}

// work does one piece of ordinary work: a fetcher round, a produce, a consumer read, an
// ISR pass, a heartbeat, a metadata delivery, a session check, a checkpoint or a retention
// pass.
func (s *Sim) work(produce bool) {
	if s.groupWork(produce) || s.txnWork(produce) {
		return
	}
	n := s.nodes[s.rng.IntN(len(s.nodes))]
	switch r := s.rng.IntN(100); {
	case r < 35:
		s.fetchRound(n)
	case r < 55:
		if produce {
			s.produce()
		} else {
			s.fetchRound(n)
		}
	case r < 62:
		if s.rng.IntN(2) == 0 {
			s.consume()
		} else {
			s.consumeCommitted()
		}
	case r < 72:
		// A broker cut from the controller runs its ISR passes too: its AlterPartition
		// requests are lost and sent again.
		if n.up() && !n.paused {
			n.b.MaybeShrinkISRs()
			n.b.ApplyExpansions()
		}
	case r < 82:
		s.fetchRound(n)
	case r < 94:
		if n.up() && !n.paused && !n.ctrlCut {
			if k := s.ctrl.DeliverPending(n.id, 1+s.rng.IntN(4)); k > 0 {
				s.tracef("broker %d: applied %d metadata changes", n.id, k)
			}
		}
	case r < 97:
		s.ctrl.CheckSessions()
	default:
		if !n.up() || n.paused {
			break
		}
		if s.rng.IntN(2) == 0 {
			// The queued leader-epoch checkpoint writes run here, so a crash before
			// finds them pending (lost, and repaired from the log at the restart).
			n.b.WritePendingEpochCheckpoints()
			_ = n.b.WriteHWCheckpoint()
		} else if d := n.b.ApplyRetention(); d > 0 {
			s.stats.RetentionDeletes++
			s.tracef("broker %d: retention deleted %d segments", n.id, d)
		}
	}
}
