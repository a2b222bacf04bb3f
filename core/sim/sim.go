package sim

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/core/records"
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

type pendingProduce struct {
	n      *node
	inc    int
	w      *broker.ProduceWait
	parts  []broker.ProducePartition
	values []string
	dead   int64
	// checkAt: the request's handler looks at its wait again only from then on (a handler
	// parked behind another partition's wait, or descheduled, while leaderships change).
	checkAt int64
	done    func(broker.ProducePartition) // idempotent producers' own handling (nil: respond)
}

// idemProducer is an idempotent producer (acks=all): one batch in flight per partition,
// retried with the same sequence until acknowledged, as Kafka's producer does.
type idemProducer struct {
	pid      int64
	next     map[int32]int32 // next base sequence per partition
	inflight map[int32]*idemBatch
}

type idemBatch struct {
	p       int32
	seq     int32
	values  []string
	blob    []byte // as built: each attempt sends a copy (the leader patches it)
	attempt int
}

// msg is a delivery at a virtual time; seq orders deliveries at the same time.
type msg struct {
	at, seq int64
	fn      func()
}

type msgQueue []*msg

func (q msgQueue) Len() int { return len(q) }
func (q msgQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q msgQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *msgQueue) Push(x any)   { *q = append(*q, x.(*msg)) }
func (q *msgQueue) Pop() any {
	old := *q
	m := old[len(old)-1]
	*q = old[:len(old)-1]
	return m
}

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
	cfg.Log.SegmentBytes = 2 << 10
	cfg.Log.IndexIntervalBytes = 256
	cfg.Logf = func(f string, a ...any) { s.tracef(f, a...) }
	b, err := broker.New(cfg, s.ctrl, noTransport{})
	if err != nil {
		s.fail("broker %d: new: %v", n.id, err)
		return
	}
	if err := b.Start(); err != nil {
		s.fail("broker %d: start: %v", n.id, err)
		return
	}
	held := n.held
	n.b, n.inc, n.paused, n.inflight, n.held = b, n.inc+1, false, map[*broker.Fetcher]bool{}, nil
	s.tracef("broker %d started: incarnation %d, broker epoch %d", n.id, n.inc, b.Epoch())
	for _, fn := range held {
		fn() // deliveries held for the previous incarnation: they fail now
	}
}

// noTransport: in Manual mode the simulator carries the fetchers' requests itself.
type noTransport struct{}

func (noTransport) Dial(context.Context, int32, int) (broker.FetchConn, error) {
	return nil, fmt.Errorf("sim: fetchers are driven by the simulator")
}

// delay is a one-way network delay from a to b.
func (s *Sim) delay(a, b int32) int64 {
	d := int64(50+s.rng.IntN(1500)) * int64(time.Microsecond)
	if s.rng.IntN(20) == 0 {
		d += int64(s.rng.IntN(200)) * int64(time.Millisecond) // an occasional slow delivery
	}
	return d + s.slow[pair(a, b)]
}

func pair(a, b int32) [2]int32 {
	if a > b {
		a, b = b, a
	}
	return [2]int32{a, b}
}

// at schedules fn at virtual time t.
func (s *Sim) at(t int64, fn func()) {
	s.seq++
	heap.Push(&s.queue, &msg{at: t, seq: s.seq, fn: fn})
}

// send delivers fn from broker a to broker b after the network delay, or, if they are
// partitioned, runs failed after the request timeout.
func (s *Sim) send(a, b int32, fn, failed func()) {
	if a != b && s.cut[pair(a, b)] {
		if failed != nil {
			s.at(s.now+rpcTimeNs, failed)
		}
		return
	}
	s.at(s.now+s.delay(a, b), fn)
}

// deliver runs fn on node n now if it runs the incarnation inc, holds it while n is
// paused, drops it when n restarted or is down (then failed runs, if set).
func (s *Sim) deliver(n *node, inc int, fn, failed func()) {
	switch {
	case !n.up() || n.inc != inc:
		if failed != nil {
			failed()
		}
	case n.paused:
		n.held = append(n.held, func() { s.deliver(n, inc, fn, failed) })
	default:
		fn()
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
// ISR pass, a heartbeat, a metadata delivery, a session check or a checkpoint.
func (s *Sim) work(produce bool) {
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
		if n.up() && !n.paused {
			_ = n.b.WriteHWCheckpoint()
		}
	}
}

// fetchRound sends one round of a fetcher of n that has none in flight.
func (s *Sim) fetchRound(n *node) {
	if !n.up() || n.paused {
		return
	}
	fs := n.b.Fetchers()
	if len(fs) == 0 {
		return
	}
	f := fs[s.rng.IntN(len(fs))]
	if n.inflight[f] {
		return
	}
	r := f.Plan()
	if r.Empty() {
		// The fetcher goroutine parks on an empty round until a partition changes, or for
		// r.Wait: it must not plan nothing while a partition is ready now.
		if r.Wait == 0 && n.b.LogDirOffline() == nil {
			for _, fp := range f.Partitions() {
				if fp.State.Phase != partition.PhaseAwaitingAssignment && (fp.State.DelayedUntil == 0 || fp.State.DelayedUntil <= s.now) {
					s.fail("broker %d fetcher from %d planned an empty round with %s-%d ready (%s): its goroutine would park", n.id, f.Source(), fp.Topic, fp.Partition, fp.State.Phase)
				}
			}
		}
		return
	}
	n.inflight[f] = true
	src, inc := f.Source(), n.inc
	s.tracef("broker %d fetcher from %d: round of %d epoch, %d offset, %d fetch questions", n.id, src, len(r.Epochs), len(r.Offsets), len(r.Fetch.Partitions))
	// Copies of the requests (the Round is reused by the next Plan, after this one ends).
	epochs := slices.Clone(r.Epochs)
	offsets := slices.Clone(r.Offsets)
	fetch := r.Fetch
	fetch.Partitions = slices.Clone(r.Fetch.Partitions)
	failed := func() {
		if n.inc == inc && n.up() {
			f.Failed(r)
			n.inflight[f] = false
		}
	}
	s.send(n.id, src, func() {
		srcNode := s.nodes[src]
		if !srcNode.up() {
			s.at(s.now+s.delay(src, n.id), func() { s.deliver(n, inc, failed, nil) }) // connection refused
			return
		}
		s.deliver(srcNode, srcNode.inc, func() {
			var ea []broker.EpochAnswer
			var oa []broker.OffsetAnswer
			var resp *broker.ReplicaFetchResponse
			if len(epochs) > 0 {
				ea = broker.ServeEpochs(srcNode.b, epochs)
			}
			if len(offsets) > 0 {
				oa = broker.ServeOffsets(srcNode.b, n.id, offsets)
			}
			if len(fetch.Partitions) > 0 {
				got, err := srcNode.rs.Fetch(context.Background(), srcNode.b, &fetch)
				if err != nil {
					s.fail("broker %d serving a fetch of broker %d: %v", src, n.id, err)
					return
				}
				resp = copyResponse(got)
			}
			s.send(src, n.id, func() {
				s.deliver(n, inc, func() {
					if len(ea) > 0 {
						f.ApplyEpochs(r, ea)
					}
					if len(oa) > 0 {
						f.ApplyOffsets(r, oa)
					}
					if resp != nil {
						f.ApplyFetch(r, resp)
						// The HW a follower takes from a response it applied (not one it failed
						// to append, nor its restored checkpoint) never exceeds the leader's.
						if n.b.LogDirOffline() == nil {
							for _, fp := range f.Partitions() {
								if fp.State.Phase == partition.PhaseFetching && slices.ContainsFunc(fetch.Partitions, func(q broker.ReplicaFetchPartition) bool {
									return q.Partition == fp.Partition && q.CurrentLeaderEpoch == fp.State.LeaderEpoch
								}) {
									s.synced[syncKey{n.id, inc, fp.Partition}] = fp.State.LeaderEpoch
								}
							}
						}
					}
					n.inflight[f] = false
					s.tracef("broker %d fetcher from %d: round answered", n.id, src)
				}, nil)
			}, func() { s.deliver(n, inc, failed, nil) })
		}, func() { s.deliver(n, inc, failed, nil) })
	}, func() { s.deliver(n, inc, failed, nil) })
}

func copyResponse(r *broker.ReplicaFetchResponse) *broker.ReplicaFetchResponse {
	out := &broker.ReplicaFetchResponse{Partitions: slices.Clone(r.Partitions)}
	for i := range out.Partitions {
		out.Partitions[i].Records = slices.Clone(out.Partitions[i].Records)
	}
	return out
}

// produce sends a batch to the leader the client sees in the metadata: from an idempotent
// producer one time in three, else a plain one with acks 0, 1 or all.
func (s *Sim) produce() {
	if s.rng.IntN(3) == 0 {
		s.produceIdempotent()
		return
	}
	p := int32(s.rng.IntN(s.nparts))
	st, ok := s.ctrl.Partition(topic, p)
	if !ok || st.Leader == controller.NoLeader {
		return
	}
	acks := []int16{-1, -1, -1, 1, 0}[s.rng.IntN(5)]
	nrec := 1 + s.rng.IntN(5)
	values := make([]string, nrec)
	recs := make([]records.Record, nrec)
	for i := range recs {
		s.nextValue++
		values[i] = fmt.Sprintf("v%d", s.nextValue)
		recs[i] = records.Record{Value: []byte(values[i])}
	}
	blob := records.AppendBatch(nil, 0, 0, s.now/int64(time.Millisecond), recs)
	n := s.nodes[st.Leader]
	inc := n.inc
	s.stats.Produced++
	const client = -1
	s.at(s.now+s.delay(client, n.id), func() {
		s.deliver(n, inc, func() {
			parts := []broker.ProducePartition{{Topic: topic, Partition: p, Records: blob}}
			w := n.b.ProduceAppend(acks, parts)
			switch {
			case acks == 0:
			case w == nil:
				s.respond(n, acks, parts, values, nil)
			default:
				s.pending = append(s.pending, &pendingProduce{n: n, inc: inc, w: w, parts: parts, values: values, dead: s.now + timeoutNs, checkAt: s.parkedUntil()})
			}
		}, nil)
	})
}

// idemInFlight describes an idempotent batch still in flight, or "".
func (s *Sim) idemInFlight() string {
	for _, ip := range s.idem {
		for p := int32(0); p < int32(s.nparts); p++ {
			if ib := ip.inflight[p]; ib != nil {
				return fmt.Sprintf("producer %d p%d seq %d after %d attempts", ip.pid, p, ib.seq, ib.attempt)
			}
		}
	}
	return ""
}

// produceIdempotent starts a batch of an idempotent producer on a partition it has none in
// flight on.
func (s *Sim) produceIdempotent() {
	ip := s.idem[s.rng.IntN(len(s.idem))]
	p := int32(s.rng.IntN(s.nparts))
	if ip.inflight[p] != nil {
		return
	}
	nrec := 1 + s.rng.IntN(4)
	ib := &idemBatch{p: p, seq: ip.next[p], values: make([]string, nrec)}
	recs := make([]records.Record, nrec)
	for i := range recs {
		s.nextValue++
		ib.values[i] = fmt.Sprintf("i%d", s.nextValue)
		recs[i] = records.Record{Value: []byte(ib.values[i])}
	}
	ib.blob = idempotentBatch(ip.pid, 0, ib.seq, s.now/int64(time.Millisecond), recs)
	ip.inflight[p] = ib
	s.stats.Produced++
	s.sendIdempotent(ip, ib)
}

// sendIdempotent sends one attempt of ib to the leader the client sees; an error or no
// answer within the request timeout makes it send again (same sequence).
func (s *Sim) sendIdempotent(ip *idemProducer, ib *idemBatch) {
	ib.attempt++
	attempt := ib.attempt
	retry := func(why string) {
		if ip.inflight[ib.p] != ib || ib.attempt != attempt {
			return
		}
		s.tracef("idempotent producer %d p%d seq %d: %s, retrying", ip.pid, ib.p, ib.seq, why)
		s.at(s.now+int64(100*time.Millisecond), func() { s.sendIdempotent(ip, ib) })
	}
	s.at(s.now+timeoutNs+int64(time.Second), func() { retry("no answer") })
	st, ok := s.ctrl.Partition(topic, ib.p)
	if !ok || st.Leader == controller.NoLeader {
		return // the timeout retries
	}
	n := s.nodes[st.Leader]
	inc := n.inc
	done := func(res broker.ProducePartition) {
		if ip.inflight[ib.p] != ib || ib.attempt != attempt {
			return // an older attempt's late answer
		}
		switch {
		case res.Err == nil:
			ip.inflight[ib.p] = nil
			ip.next[ib.p] = ib.seq + int32(len(ib.values))
			s.stats.AckedAll++
			for i, v := range ib.values {
				k := key{ib.p, res.BaseOffset + int64(i)}
				if old, dup := s.acked[k]; dup && !s.excused(old) && old.value != v {
					s.fail("p%d offset %d acknowledged twice: %s and %s", k.p, k.off, old.value, v)
				}
				s.acked[k] = entry{v, valueNum(v)}
			}
			s.tracef("idempotent producer %d p%d seq %d: offsets %d..%d (attempt %d)", ip.pid, ib.p, ib.seq, res.BaseOffset, res.BaseOffset+int64(len(ib.values))-1, attempt)
		case errors.Is(res.Err, kerr.OutOfOrderSequenceNumber) && s.lossAllowedUpTo == 0:
			s.fail("idempotent producer %d p%d seq %d: %v: the broker lost the producer's acknowledged batches", ip.pid, ib.p, ib.seq, res.Err)
		default:
			retry(res.Err.Error())
		}
	}
	s.at(s.now+s.delay(-1, n.id), func() {
		s.deliver(n, inc, func() {
			parts := []broker.ProducePartition{{Topic: topic, Partition: ib.p, Records: slices.Clone(ib.blob)}}
			w := n.b.ProduceAppend(-1, parts)
			if w == nil {
				s.respond(n, -1, parts, ib.values, done)
				return
			}
			s.pending = append(s.pending, &pendingProduce{n: n, inc: inc, w: w, parts: parts, values: ib.values, dead: s.now + timeoutNs, checkAt: s.parkedUntil(), done: done})
		}, nil)
	})
}

// idempotentBatch builds one uncompressed batch of an idempotent producer (producer id,
// epoch, base sequence set; CRC over the rest).
func idempotentBatch(pid int64, epoch int16, seq int32, ts int64, recs []records.Record) []byte {
	b := records.AppendBatch(nil, 0, 0, ts, recs)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// parkedUntil is when a new acks=all wait is first looked at: at once, or, one time in four,
// up to 2.5 s later (within the request timeout), as a produce handler that waits on the
// partitions of its request one after the other does for the later ones.
func (s *Sim) parkedUntil() int64 {
	if s.rng.IntN(4) != 0 {
		return s.now
	}
	s.stats.ParkedWaits++
	return s.now + int64(s.rng.IntN(2500))*int64(time.Millisecond)
}

// checkProduces answers the acks=all produces whose wait is over.
func (s *Sim) checkProduces() {
	kept := s.pending[:0]
	for _, pp := range s.pending {
		switch {
		case pp.n.inc != pp.inc || !pp.n.up():
			continue // the broker died: the client times out
		case pp.n.paused, s.now < pp.checkAt:
		case pp.w.Check():
			s.respond(pp.n, -1, pp.parts, pp.values, pp.done)
			continue
		case s.now > pp.dead:
			pp.w.Expire()
			s.respond(pp.n, -1, pp.parts, pp.values, pp.done)
			continue
		}
		kept = append(kept, pp)
	}
	clear(s.pending[len(kept):])
	s.pending = kept
}

func (s *Sim) respond(n *node, acks int16, parts []broker.ProducePartition, values []string, done func(broker.ProducePartition)) {
	res := parts[0]
	s.at(s.now+s.delay(n.id, -1), func() {
		if done != nil {
			done(res)
			return
		}
		if res.Err != nil {
			s.tracef("produce to broker %d p%d acks=%d: %v", n.id, res.Partition, acks, res.Err)
			return
		}
		if acks == -1 {
			s.stats.AckedAll++
			for i, v := range values {
				k := key{res.Partition, res.BaseOffset + int64(i)}
				if old, dup := s.acked[k]; dup && !s.excused(old) {
					s.fail("p%d offset %d acknowledged twice: %s and %s", k.p, k.off, old.value, v)
				}
				s.acked[k] = entry{v, valueNum(v)}
			}
		} else {
			s.stats.AckedOne++
		}
		s.tracef("produce to broker %d p%d acks=%d: offsets %d..%d", n.id, res.Partition, acks, res.BaseOffset, res.BaseOffset+int64(len(values))-1)
	})
}

// consume reads one partition from its leader below the HW, as a consumer does.
func (s *Sim) consume() {
	p := int32(s.rng.IntN(s.nparts))
	st, ok := s.ctrl.Partition(topic, p)
	if !ok || st.Leader == controller.NoLeader {
		return
	}
	n := s.nodes[st.Leader]
	if !n.up() || n.paused {
		return
	}
	req := &broker.FetchRequest{ReplicaID: -1, MaxBytes: 1 << 20, Partitions: []broker.FetchPartition{{
		Topic: topic, Partition: p, FetchOffset: s.consumer[p], CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}}}
	n.b.Fetch(context.Background(), req)
	fp := &req.Partitions[0]
	defer fp.Records.Release()
	if fp.Err != nil {
		return
	}
	data, err := fp.Records.ReadAll(nil)
	if err != nil {
		s.fail("consumer read from broker %d: %v", n.id, err)
		return
	}
	nread := 0
	_ = records.Split(data, func(batch []byte, h records.Header) error {
		return records.ForEachRecord(batch, func(off, _ int64, _, v []byte) error {
			if off >= s.consumer[p] && off < fp.HighWatermark {
				s.consumed[key{p, off}] = entry{string(v), valueNum(string(v))}
				s.consumer[p] = off + 1
				nread++
			}
			return nil
		})
	})
	if nread > 0 {
		s.stats.Consumed += nread
		s.tracef("consumer read p%d from broker %d up to %d (HW %d)", p, n.id, s.consumer[p], fp.HighWatermark)
	}
}

// fault injects or heals one fault: half of the time it heals one (a restart, a resume, a
// mended link or disk), so the cluster spends time both under faults and back in sync.
func (s *Sim) fault() {
	n := s.nodes[s.rng.IntN(len(s.nodes))]
	if s.rng.IntN(2) == 0 {
		s.healOne(n)
		return
	}
	if s.crashPending && s.rng.IntN(5) != 0 {
		// Mostly spare the other brokers while a crashed one catches up, so that crashes
		// are checked for loss and not excused as correlated failures.
		s.healOne(n)
		return
	}
	switch r := s.rng.IntN(100); {
	case r < 14:
		if n.up() {
			s.kill(n, s.rng.IntN(2) == 0)
		}
	case r < 24:
		if n.up() && !s.crashPending && s.crashSafe() {
			s.crash(n)
		}
	case r < 40:
		if !n.up() {
			s.restart(n)
		}
	case r < 48:
		if n.up() && !n.paused {
			s.failure(fmt.Sprintf("broker %d paused", n.id))
			n.paused = true
			n.b.Pause()
			s.stats.Pauses++
			s.tracef("broker %d paused", n.id)
		} else if n.up() && n.paused {
			s.resume(n)
		}
	case r < 58:
		m := s.nodes[s.rng.IntN(len(s.nodes))]
		if m != n {
			k := pair(n.id, m.id)
			s.cut[k] = !s.cut[k]
			if s.cut[k] {
				s.stats.Partitions++
			}
			s.tracef("network between %d and %d: cut=%v", n.id, m.id, s.cut[k])
		}
	case r < 64:
		m := s.nodes[s.rng.IntN(len(s.nodes))]
		if m != n {
			k := pair(n.id, m.id)
			if s.slow[k] == 0 {
				s.slow[k] = int64(50+s.rng.IntN(400)) * int64(time.Millisecond)
			} else {
				s.slow[k] = 0
			}
			s.tracef("link %d-%d extra delay %v", n.id, m.id, time.Duration(s.slow[k]))
		}
	case r < 70:
		n.ctrlCut = !n.ctrlCut
		if n.ctrlCut {
			s.stats.CtrlCuts++
			s.failure(fmt.Sprintf("broker %d cut from the controller", n.id))
		}
		s.tracef("broker %d cut from the controller: %v", n.id, n.ctrlCut)
	case r < 77:
		p := int32(s.rng.IntN(s.nparts))
		if st, ok := s.ctrl.Partition(topic, p); ok && len(st.ISR) > 1 {
			to := st.ISR[s.rng.IntN(len(st.ISR))]
			if _, err := s.ctrl.TransferLeader(topic, p, to); err == nil {
				s.stats.LeaderMoves++
				s.tracef("leader of p%d moved to %d", p, to)
				if from := st.Leader; from != controller.NoLeader && s.rng.IntN(2) == 0 {
					// A flapping leadership: it moves back soon (the old leader follows
					// meanwhile, and may truncate what the new one lacks).
					s.at(s.now+int64(20+s.rng.IntN(500))*int64(time.Millisecond), func() {
						if _, err := s.ctrl.TransferLeader(topic, p, from); err == nil {
							s.stats.LeaderMoves++
							s.stats.LeaderFlaps++
							s.tracef("leader of p%d moved back to %d", p, from)
						}
					})
				}
			}
		}
	case r < 83:
		if n.up() && !n.diskFull {
			s.failure(fmt.Sprintf("broker %d disk full", n.id))
			n.diskFull = true
			n.fs.SetCapacity(n.fs.Used())
			s.stats.DiskFul++
			s.tracef("broker %d disk full", n.id)
		} else if n.diskFull {
			n.diskFull = false
			n.fs.SetCapacity(0)
			s.tracef("broker %d disk has room again", n.id)
			if n.up() && n.b.LogDirOffline() != nil {
				s.kill(n, false)
			}
		}
	case r < 87:
		if s.rng.IntN(3) == 0 {
			s.restartCluster()
		}
	case r < 91:
		// num.replica.fetchers changed at run time: the brokers move partitions between
		// fetchers when they learn of it, with rounds in flight.
		k := 1 + s.rng.IntN(4)
		if err := s.ctrl.ChangeBrokerConfig("", controller.ConfigChange{Set: map[string]string{"num.replica.fetchers": fmt.Sprint(k)}}); err != nil {
			s.fail("num.replica.fetchers=%d: %v", k, err)
			return
		}
		s.stats.FetcherResizes++
		s.tracef("num.replica.fetchers set to %d", k)
	case r < 94:
		if s.nparts < maxPartitions {
			if _, err := s.ctrl.CreatePartitions(topic, int32(s.nparts+1), nil, false); err == nil {
				s.nparts++
				s.consumer = append(s.consumer, 0)
				s.stats.PartitionAdds++
				s.tracef("partition p%d added", s.nparts-1)
			} else {
				s.tracef("create partition p%d refused: %v", s.nparts, err)
			}
		}
	case r < 96:
		if moved := s.ctrl.BalanceLeaders(10); len(moved) > 0 {
			s.stats.Rebalances++
			s.tracef("preferred leaders elected: %v", moved)
		}
	default:
		s.ctrl.CheckSessions()
	}
}

func (s *Sim) kill(n *node, fence bool) {
	s.failure(fmt.Sprintf("broker %d killed", n.id))
	n.b.Kill()
	n.b = nil
	s.stats.Kills++
	if fence {
		s.ctrl.BrokerDown(n.id)
	}
	s.tracef("broker %d killed (fenced at once: %v)", n.id, fence)
}

// crash is a power loss of one broker: it loses what it did not fsync. Only while the
// cluster is fully in sync, so that every acknowledged record is on another replica.
func (s *Sim) crash(n *node) {
	if err := n.b.Crash(); err != nil {
		s.fail("crash broker %d: %v", n.id, err)
	}
	n.b = nil
	s.stats.Crashes++
	s.crashPending = true
	s.tracef("broker %d crashed (power loss)", n.id)
}

func (s *Sim) restart(n *node) {
	s.stats.Restarts++
	s.start(n)
}

func (s *Sim) resume(n *node) {
	n.paused = false
	n.b.Resume()
	held := n.held
	n.held = nil
	s.tracef("broker %d resumed (%d held deliveries)", n.id, len(held))
	for _, fn := range held {
		fn()
	}
}

// restartCluster kills every broker and the controller (as kill -9 of `isrbench serve`),
// reopens the controller from its metadata log and starts every broker again.
func (s *Sim) restartCluster() {
	s.stats.ClusterRestarts++
	s.failure("a cluster restart")
	s.tracef("cluster restart")
	for _, n := range s.nodes {
		if n.up() {
			n.b.Kill()
			n.b = nil
		}
		n.diskFull = false
		n.fs.SetCapacity(0)
	}
	s.ctrl.Close()
	s.openController()
	if s.err != nil {
		return
	}
	if ps, ok := s.ctrl.Partitions(topic); !ok || len(ps) != s.nparts {
		s.fail("after a cluster restart the topic has %d partitions (exists %v), want %d", len(ps), ok, s.nparts)
		return
	}
	for _, n := range s.nodes {
		s.start(n)
	}
}

// healOne ends one fault of n, if it has one.
func (s *Sim) healOne(n *node) {
	switch {
	case !n.up():
		s.restart(n)
	case n.paused:
		s.resume(n)
	case n.ctrlCut:
		n.ctrlCut = false
		s.tracef("broker %d reaches the controller again", n.id)
	case n.diskFull:
		n.diskFull = false
		n.fs.SetCapacity(0)
		s.tracef("broker %d disk has room again", n.id)
		if n.b.LogDirOffline() != nil {
			s.kill(n, false)
		}
	default:
		for _, m := range s.nodes {
			if k := pair(n.id, m.id); s.cut[k] {
				delete(s.cut, k)
				s.tracef("network between %d and %d mended", k[0], k[1])
				return
			}
		}
	}
}

// crashSafe reports whether a power loss of one broker may not lose an acknowledged record:
// every broker runs and every partition has all its replicas in the ISR, so every record
// acknowledged with acks=all is in the page cache of every replica, and a crash loses it
// from one of them only.
func (s *Sim) crashSafe() bool {
	for _, n := range s.nodes {
		if !n.up() || n.b.LogDirOffline() != nil {
			return false
		}
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		st, ok := s.ctrl.Partition(topic, p)
		if !ok || st.Leader == controller.NoLeader || len(st.ISR) != len(st.Replicas) {
			return false
		}
	}
	return true
}

// operatorElections handles partitions left offline because every ISR member lost data:
// the safe outcome of a correlated failure (the damaged replicas do not lead). An operator
// would elect a leader uncleanly (kafka-leader-election --election-type unclean), which the
// simulator does then; without a correlated failure such a partition is a bug.
func (s *Sim) operatorElections() {
	for p := int32(0); p < int32(s.nparts); p++ {
		st, ok := s.ctrl.Partition(topic, p)
		if !ok || st.Leader != controller.NoLeader {
			continue
		}
		dmg := s.ctrl.Damaged(topic, p)
		if !slices.ContainsFunc(st.ISR, func(id int32) bool { return !slices.Contains(dmg, id) }) {
			if s.lossAllowedUpTo == 0 {
				s.fail("p%d is offline: every ISR member %v is damaged %v, without a correlated failure", p, st.ISR, dmg)
				return
			}
			if _, err := s.ctrl.ElectLeader(topic, p, true); err == nil {
				s.tracef("operator: unclean election of p%d (ISR %v all damaged after a correlated failure)", p, st.ISR)
			}
		}
	}
}

// heal ends every fault so the cluster can converge.
func (s *Sim) heal() {
	s.tracef("healing every fault")
	clear(s.cut)
	clear(s.slow)
	for _, n := range s.nodes {
		n.ctrlCut = false
		if n.diskFull || (n.up() && n.b.LogDirOffline() != nil) {
			n.diskFull = false
			n.fs.SetCapacity(0)
			if n.up() {
				s.kill(n, false)
			}
		}
		if n.up() && n.paused {
			s.resume(n)
		}
		if !n.up() {
			s.restart(n)
		}
	}
}

// inSync reports whether every broker runs and every partition has its whole replica set in
// the ISR, with every replica at the leader's LEO and the leader's HW there too.
func (s *Sim) inSync() bool {
	for _, n := range s.nodes {
		if !n.up() || n.paused || n.ctrlCut || n.diskFull || n.b.LogDirOffline() != nil || s.ctrl.Pending(n.id) > 0 {
			return false
		}
	}
	if len(s.cut) > 0 {
		for _, c := range s.cut {
			if c {
				return false
			}
		}
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		st, ok := s.ctrl.Partition(topic, p)
		if !ok || st.Leader == controller.NoLeader || len(st.ISR) != len(st.Replicas) {
			return false
		}
		lr, ok := s.nodes[st.Leader].b.Replica(topic, p)
		if !ok || !lr.IsLeader() || lr.HW() != lr.LEO() {
			return false
		}
		for _, id := range st.Replicas {
			r, ok := s.nodes[id].b.Replica(topic, p)
			if !ok || r.LEO() != lr.LEO() {
				return false
			}
		}
	}
	return true
}

func (s *Sim) describe() string {
	var b strings.Builder
	for _, bi := range s.ctrl.Brokers() {
		fmt.Fprintf(&b, "broker %d alive=%v epoch=%d; ", bi.ID, bi.Alive, s.ctrl.BrokerEpoch(bi.ID))
	}
	for _, n := range s.nodes {
		if n.up() {
			fmt.Fprintf(&b, "b%d runs epoch %d paused=%v", n.id, n.b.Epoch(), n.paused)
			for _, f := range n.b.Fetchers() {
				fmt.Fprintf(&b, " fetcher(from %d, inflight %v):", f.Source(), n.inflight[f])
				for _, fp := range f.Partitions() {
					fmt.Fprintf(&b, " p%d %s epoch %d until %d", fp.Partition, fp.State.Phase, fp.State.LeaderEpoch, fp.State.DelayedUntil-s.now)
				}
			}
			b.WriteString("; ")
		}
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		st, _ := s.ctrl.Partition(topic, p)
		fmt.Fprintf(&b, "[%v damaged %v;", st, s.ctrl.Damaged(topic, p))
		for _, n := range s.nodes {
			if !n.up() {
				fmt.Fprintf(&b, " b%d down", n.id)
				continue
			}
			if r, ok := n.b.Replica(topic, p); ok {
				fmt.Fprintf(&b, " b%d leo=%d hw=%d epoch=%d leader=%v isr=%v", n.id, r.LEO(), r.HW(), r.LeaderEpoch(), r.IsLeader(), r.ISR())
			}
		}
		b.WriteString("] ")
	}
	return b.String()
}

type reader interface {
	Read(offset, maxOffset int64, maxBytes int, minOneBatch bool) (log.Slice, error)
}

// rawLog returns the bytes of the whole batches of r in [from, to).
func rawLog(r reader, from, to int64) ([]byte, error) {
	var raw []byte
	for off := from; off < to; {
		sl, err := r.Read(off, to, 1<<20, true)
		if err != nil {
			return nil, err
		}
		if sl.Size == 0 {
			sl.Release()
			break
		}
		raw, err = sl.ReadAll(raw)
		next := sl.NextOffset
		sl.Release()
		if err != nil {
			return nil, err
		}
		off = next
	}
	return raw, nil
}

// readLog returns the record values of r in [from, to) by offset.
func readLog(r reader, from, to int64) (map[int64]string, error) {
	raw, err := rawLog(r, from, to)
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	err = records.Split(raw, func(batch []byte, h records.Header) error {
		return records.ForEachRecord(batch, func(o, _ int64, _, v []byte) error {
			out[o] = string(v)
			return nil
		})
	})
	return out, err
}
