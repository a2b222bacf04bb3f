package sim

import (
	"container/heap"
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
	// LeaderFlaps counts leaderships moved back to the previous leader soon after a move;
	// ParkedWaits counts acks=all waits first looked at late (parkedUntil).
	LeaderFlaps, ParkedWaits int
	// MetaFaults counts metadata-log faults (full disk, I/O errors); MetaRefused the
	// metadata changes refused meanwhile.
	MetaFaults, MetaRefused int
	// MetaCrashes counts power losses of the controller's disk (with a torn append or a
	// flipped bit in one copy, sometimes).
	MetaCrashes int
	// RetentionOn counts the times the topic's retention.bytes was set (retentionBytes);
	// RetentionDeletes counts retention passes that deleted segments; ConsumerResets counts
	// consumers moved up to a log start that retention passed.
	RetentionOn, RetentionDeletes, ConsumerResets int
	// Groups counts the group coordinator's work (groups.go).
	Groups GroupStats
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

	acked     map[key]entry // acks=all acknowledged: (partition, offset) -> value
	consumed  map[key]entry // read by a consumer below the HW
	consumer  []int64       // consumer position per partition
	nextValue int
	pending   []*pendingProduce
	idem      []*idemProducer
	hwSeen    map[termKey]int64 // highest HW seen per leadership term
	synced    map[syncKey]int32 // follower applied a fetch response in this leader epoch
	lastState map[int32]string  // last traced controller state per partition
	// crashPending: a broker crashed and the cluster has not been back in sync since;
	// lossAllowedUpTo is the number of the last record produced before a correlated
	// failure, whose loss it excuses (records are numbered by nextValue).
	crashPending    bool
	lossAllowedUpTo int
	// metaFault says what keeps the metadata log from being written ("" nothing).
	metaFault string
	// retention: the topic's retention.bytes is retentionBytes now (a fault toggles it);
	// retentionUsed: it was at some point, so acknowledged and consumed records below a
	// leader's log start are expired, not lost.
	retention, retentionUsed bool
	// groups: the group coordinators and their consumers (groups.go).
	groups *groupSim
}

// entry is a record the oracle holds: its value and its number (the order it was produced in).
type entry struct {
	value string
	num   int
}

// excused reports whether a correlated failure excuses losing e (produced before it).
func (s *Sim) excused(e entry) bool { return e.num <= s.lossAllowedUpTo }

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
	inflight      map[*broker.Fetcher]bool
	lastHeartbeat int64
	held          []func() // deliveries waiting for Resume
	rs            broker.ReplicaServe
}

func (n *node) up() bool { return n.b != nil }

// Run runs one simulation.
func Run(o Options) Result {
	o.fill()
	s := &Sim{o: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), now: startNs,
		cut: map[[2]int32]bool{}, slow: map[[2]int32]int64{}, acked: map[key]entry{}, consumed: map[key]entry{},
		nparts: o.Partitions, consumer: make([]int64, o.Partitions), hwSeen: map[termKey]int64{}, synced: map[syncKey]int32{},
		lastState: map[int32]string{}}
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
		ManualDelivery: true, Logf: func(f string, a ...any) { s.tracef("controller: "+f, a...) },
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
	s.ctrlFS = vfs.NewMemFS(s.wall)
	s.openController()
	for i := 0; i < s.o.Brokers; i++ {
		n := &node{id: int32(i), fs: vfs.NewMemFS(s.wall)}
		s.nodes = append(s.nodes, n)
		s.start(n)
	}
	if _, err := s.ctrl.CreateTopic(topic, int32(s.o.Partitions), int16(s.o.RF),
		map[string]string{controller.ConfigMinInsyncReplicas: fmt.Sprint(s.o.MinISR)}); err != nil {
		s.fail("create topic: %v", err)
		return
	}
	for i := 0; i < s.o.Steps && s.err == nil; i++ {
		s.step(true)
	}
	if s.err == nil {
		s.heal()
	}
	for i := 0; i < 4000 && s.err == nil; i++ {
		s.step(false)
		if i%20 == 0 && s.inSync() {
			break
		}
		if i%200 == 199 {
			s.operatorElections()
		}
	}
	if s.err == nil && !s.inSync() {
		s.fail("the cluster did not converge after the faults healed: %s", s.describe())
	}
	// Every idempotent batch in flight is acknowledged once the cluster is healthy.
	for i := 0; i < 2000 && s.err == nil && s.idemInFlight() != ""; i++ {
		s.step(false)
	}
	if s.err == nil {
		if b := s.idemInFlight(); b != "" {
			s.fail("an idempotent producer's batch is never acknowledged on a healthy cluster: %s", b)
		}
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
	cfg.Logf = func(f string, a ...any) { s.tracef(f, a...) }
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
	n.b, n.inc, n.paused, n.inflight, n.held = b, n.inc+1, false, map[*broker.Fetcher]bool{}, nil
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

// failure notes a fault that takes a broker out of service. While a crashed broker has not
// caught up (the cluster was not back in sync since the crash), any further failure may lose
// what the crash lost: records acknowledged until then are no longer checked (a correlated
// failure of two replicas, which no RF 3 / min ISR 2 setup survives in general). This holds
// for every failure until the cluster is back in sync, not only the first: records
// acknowledged after one such failure can still be held only by the crashed broker's page
// cache and one other replica.
func (s *Sim) failure(what string) {
	if !s.crashPending {
		return
	}
	s.lossAllowedUpTo = s.nextValue
	s.stats.Correlated++
	s.tracef("%s while a crashed broker catches up: a correlated failure; the %d records produced so far are no longer checked", what, s.nextValue)
}

// work does one piece of ordinary work: a fetcher round, a produce, a consumer read, an
// ISR pass, a heartbeat, a metadata delivery, a session check, a checkpoint or a retention
// pass.
func (s *Sim) work(produce bool) {
	if s.groupWork(produce) {
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
		s.consume()
	case r < 72:
		if n.up() && !n.paused && !n.ctrlCut {
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
			_ = n.b.WriteHWCheckpoint()
		} else if d := n.b.ApplyRetention(); d > 0 {
			s.stats.RetentionDeletes++
			s.tracef("broker %d: retention deleted %d segments", n.id, d)
		}
	}
}
