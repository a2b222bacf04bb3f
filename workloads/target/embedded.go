package target

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/netfetch"
	"github.com/isrbench/isrbench/workloads/spec"
)

func init() { embeddedTarget = openEmbedded }

// embedded is the in-process netfetch cluster in a temporary data dir under os.TempDir(),
// removed by Close (which the runner defers, so also on error and cancellation).
type embedded struct {
	c       *cluster.Cluster
	dir     string
	seeds   []string
	sec     []kgo.Opt // the clients' security on the client listener (embedded_security.go)
	minISR  int
	closeMu sync.Once
	err     error

	mu      sync.Mutex // guards stopped, stopGen, life, faultyLinks, rng
	stopped map[int32]bool
	// stopGen counts each broker's kills and restarts: a kill's heal restarts the broker only
	// if nothing restarted or killed it since (a later fault owns it then).
	stopGen map[int32]uint64
	// life holds each broker's lifecycle lock (lifecycle).
	life        map[int32]*sync.Mutex
	faultyLinks [][2][]int32
	rng         *rand.Rand

	// Cumulative ISR counters across broker restarts (a restarted broker starts from 0).
	cntMu            sync.Mutex
	lastCnt          map[int32][2]int64 // broker -> last seen (shrinks, expands)
	shrinks, expands int64
}

// ClusterConfig maps the spec onto an embedded cluster configuration: the spec's settings
// go to the cluster unchanged (cluster.Config.UseSettings), so a setting needs no mapping of
// its own here; the topic's min.insync.replicas is every broker's, and topics are created
// by the harness only.
func ClusterConfig(s *spec.Spec) (cluster.Config, error) {
	cc := cluster.DefaultConfig()
	cc.Brokers = s.Brokers
	if err := cc.UseSettings(s.Settings); err != nil {
		return cc, err
	}
	for k, v := range map[string]string{
		"auto.create.topics.enable": "false",
		"min.insync.replicas":       strconv.Itoa(s.Topic.MinInsyncReplicas),
	} {
		if err := cc.Set(k, v); err != nil {
			return cc, err
		}
	}
	// broker.heartbeat.interval.ms: Kafka's 2000 against its 9000 ms session, scaled down for
	// shorter sessions (a heartbeat every session/3 would let one late tick fence a broker).
	cc.Broker.HeartbeatIntervalMs = min(2000, max(10, s.Settings.Int("broker.session.timeout.ms")/4))
	return cc, nil
}

func openEmbedded(ctx context.Context, s *spec.Spec, o TargetOptions) (Target, error) {
	cc, err := ClusterConfig(s)
	if err != nil {
		return nil, err
	}
	if mode := s.Settings.Text("isrbench.io"); o.Log != nil {
		if why := log.WriterFallbackReason(mode); why != "" {
			fmt.Fprintf(o.Log, "isrbench.io=%s: falling back to pwritev: %s\n", mode, why)
		}
	}
	if o.Log != nil && s.Settings.Bool("isrbench.replica.fetch.uring") {
		if why := netfetch.ReplicaFetchUringFallback(); why != "" {
			fmt.Fprintf(o.Log, "isrbench.replica.fetch.uring=true: the replica fetchers write and read their sockets: %s\n", why)
		}
	}
	if _, err := netfetch.EnsureOpenFiles(openFilesNeeded(s)); err != nil {
		return nil, fmt.Errorf("embedded cluster of %d brokers, topic %s with %d partitions x RF %d: %w",
			s.Brokers, s.Topic.Name, s.Topic.Partitions, s.Topic.ReplicationFactor, err)
	}
	dir, err := os.MkdirTemp("", "isrbench-run-")
	if err != nil {
		return nil, fmt.Errorf("embedded cluster data dir: %w", err)
	}
	cc.DataDir = dir
	cc.FS = o.FS
	cc.Broker.OnHWLag = o.OnHWLag
	cc.Broker.OnDamage = o.OnDamage
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	var logMu sync.Mutex // the cluster logs from many goroutines; o.Log need not be safe for that
	cc.Logf = func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(logw, format+"\n", args...)
	}
	clientListener, sec, err := embeddedSecurity(s, &cc, dir) // embedded_security.go
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded cluster: %w", err)
	}
	c, err := cluster.Start(ctx, cc)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded cluster: %w", err)
	}
	e := &embedded{c: c, dir: dir, seeds: spec.SplitList(c.Bootstrap()), minISR: s.Topic.MinInsyncReplicas,
		rng: rand.New(rand.NewPCG(o.Seed, 0x15b))}
	if err := e.secure(clientListener, sec); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// openFilesNeeded is the file limit an embedded run needs: the one under which the
// cluster's controller accepts its replicas (netfetch.FilesForReplicas: an active segment
// file per replica of the benchmark topic, and of __consumer_offsets when consumers use a
// group, besides the client connections and the headroom for sockets, checkpoints and the
// metadata log).
func openFilesNeeded(s *spec.Spec) uint64 {
	n := int64(s.Topic.Partitions) * int64(s.Topic.ReplicationFactor)
	if s.Consumers.GroupID != "" {
		n += s.Settings.Int("offsets.topic.num.partitions") * int64(min(s.Brokers, 3))
	}
	return netfetch.FilesForReplicas(n, int64(s.Brokers))
}

func (e *embedded) Name() string { return "embedded" }

// DataDir is the cluster's temporary data dir (the disk guard watches its filesystem).
func (e *embedded) DataDir() string { return e.dir }

// ApplyRetention runs log retention on every running broker now (as its
// log.retention.check.interval.ms timer would), so the read-back sees settled log starts.
func (e *embedded) ApplyRetention() {
	for _, id := range e.c.BrokerIDs() {
		if b := e.c.Broker(id); b != nil && !e.isStopped(id) {
			b.ApplyRetention()
		}
	}
}
func (e *embedded) Seeds() []string { return e.seeds }

// OfflineLogDir returns the first running broker whose log directory went offline (a write
// or fsync failed: KAFKA_STORAGE_ERROR), or ok false.
func (e *embedded) OfflineLogDir() (broker int32, err error, ok bool) {
	for _, id := range e.c.BrokerIDs() {
		if e.isStopped(id) {
			continue
		}
		if b := e.c.Broker(id); b != nil {
			if err := b.LogDirOffline(); err != nil {
				return id, err, true
			}
		}
	}
	return 0, nil, false
}
func (e *embedded) HasHWLag() bool { return true }

// Close stops the cluster and removes its data dir.
func (e *embedded) Close() error {
	e.closeMu.Do(func() {
		e.err = e.c.Close()
		if rerr := os.RemoveAll(e.dir); rerr != nil && e.err == nil {
			e.err = rerr
		}
	})
	return e.err
}

// Sample reads the leaders' view: ISR sizes of the topic's partitions as their leaders see
// them, and the cumulative ISR shrinks and expands: the brokers' IsrShrinks/IsrExpands
// counters plus the shrinks the controller made when it fenced a broker.
func (e *embedded) Sample(_ context.Context, topic string) (Sample, error) {
	var s Sample
	s.ISRMin = int(^uint(0) >> 1)
	n := 0
	st, _ := e.c.Controller().Partitions(topic)
	parts := len(st)
	for _, id := range e.c.BrokerIDs() {
		b := e.c.Broker(id)
		if b == nil {
			continue
		}
		m := b.Metrics()
		e.count(id, m.IsrShrinks, m.IsrExpands)
		s.MaxLag = max(s.MaxLag, m.MaxLag)
		// The topic's partitions by lookup (not Broker.Partitions, which copies every
		// replica's state and follower LEOs): a sample costs O(topic partitions).
		for p := range int32(parts) {
			r, ok := b.Replica(topic, p)
			if !ok || !r.IsLeader() {
				continue
			}
			n++
			s.HWTotal += r.HW()
			s.LEOTotal += r.LEO()
			isr := len(r.ISR())
			s.ISRMin = min(s.ISRMin, isr)
			s.ISRMax = max(s.ISRMax, isr)
			if isr < len(r.State().Replicas) {
				s.UnderReplicated++
			}
			if isr < e.minISR {
				s.UnderMinISR++
			}
		}
	}
	if n == 0 {
		s.ISRMin = 0
	}
	e.cntMu.Lock()
	s.Shrinks, s.Expands = e.shrinks, e.expands
	e.cntMu.Unlock()
	// A killed or fenced follower leaves the ISR through the controller, not through its
	// leader's IsrShrinksPerSec: both count.
	s.ControllerShrinks = e.c.Controller().Stats().ISRShrinks
	s.Shrinks += s.ControllerShrinks
	for _, p := range st {
		s.Leaders = append(s.Leaders, p.Leader)
	}
	return s, nil
}

// count folds one broker's counters into the cumulative totals; a counter that went down
// belongs to a restarted broker and counts from 0.
func (e *embedded) count(id int32, shrinks, expands int64) {
	e.cntMu.Lock()
	defer e.cntMu.Unlock()
	if e.lastCnt == nil {
		e.lastCnt = map[int32][2]int64{}
	}
	last := e.lastCnt[id]
	if shrinks < last[0] {
		last[0] = 0
	}
	if expands < last[1] {
		last[1] = 0
	}
	e.shrinks += shrinks - last[0]
	e.expands += expands - last[1]
	e.lastCnt[id] = [2]int64{shrinks, expands}
}

// ApplyFault resolves the target broker(s) and applies the fault; heal undoes it (nil for
// restart-broker, and for kill-broker / crash-broker with duration 0, which stay down until a
// restart-broker fault or HealAll).
func (e *embedded) ApplyFault(_ context.Context, topic string, f spec.Fault) (string, func() error, error) {
	pt, err := spec.ParseFaultTarget("target", f, len(e.c.BrokerIDs()), topic, int(^uint(0)>>1), int(^uint(0)>>1))
	if err != nil {
		return "", nil, err
	}
	if f.Kind == "partition" && pt.IsGroups() {
		return e.partition(pt.Groups[0], pt.Groups[1])
	}
	id, err := e.resolve(pt.Ref, f.Kind == "restart-broker")
	if err != nil {
		return "", nil, err
	}
	desc := "broker=" + strconv.Itoa(int(id))
	switch f.Kind {
	case "pause-broker":
		if err := e.c.PauseBroker(id); err != nil {
			return desc, nil, err
		}
		return desc, func() error { return e.c.ResumeBroker(id) }, nil
	case "kill-broker", "crash-broker":
		stop := e.c.KillBroker
		switch {
		case f.Kind == "crash-broker" && f.Fence == "session":
			stop = e.c.CrashBrokerAwaitSession
		case f.Kind == "crash-broker":
			stop = e.c.CrashBroker
		case f.Fence == "session":
			stop = e.c.KillBrokerAwaitSession
		}
		// Marked first: a fault due meanwhile (a second kill 200 ms later, while this one
		// waits for the controller to fence the broker) must not pick the same broker.
		gen := e.setStopped(id, true)
		life := e.lifecycle(id)
		life.Lock()
		if e.generation(id) != gen { // a restart that was under way ended meanwhile
			gen = e.setStopped(id, true)
		}
		err := stop(id)
		if err != nil {
			e.setStopped(id, false)
		}
		life.Unlock()
		if err != nil || f.Duration == 0 {
			return desc, nil, err
		}
		return desc, func() error {
			life.Lock()
			defer life.Unlock()
			if e.generation(id) != gen {
				return nil // a restart-broker fault restarted it already, or a later kill owns it
			}
			return e.restart(id)
		}, nil
	case "restart-broker":
		life := e.lifecycle(id)
		life.Lock()
		defer life.Unlock()
		return desc, nil, e.restart(id)
	case "slow-link":
		lf := netfetch.LinkFault{Latency: f.Latency, Jitter: f.Jitter, BandwidthBytesPerSec: f.Bandwidth}
		return e.setLinks([]int32{id}, e.others(id), lf)
	case "partition":
		return e.partition([]int32{id}, e.others(id))
	}
	return "", nil, fmt.Errorf("fault kind %q; allowed %s", f.Kind, strings.Join(spec.FaultKinds, "|"))
}

func (e *embedded) others(id int32) []int32 {
	var o []int32
	for _, b := range e.c.BrokerIDs() {
		if b != id {
			o = append(o, b)
		}
	}
	return o
}

// partition cuts every replica link between the groups a and b (both directions). The
// controller is in-process and still sees every broker (like a KRaft quorum reachable from
// both sides), and client connections are not cut: the followers cut off from their leader
// fall out of its ISR, and acks=all fails with NOT_ENOUGH_REPLICAS once the ISR is below
// min.insync.replicas.
func (e *embedded) partition(a, b []int32) (string, func() error, error) {
	return e.setLinks(a, b, netfetch.LinkFault{Down: true})
}

// setLinks applies lf to every replica link between a and b, both directions.
func (e *embedded) setLinks(a, b []int32, lf netfetch.LinkFault) (string, func() error, error) {
	for _, x := range a {
		for _, y := range b {
			e.c.SetLink(x, y, lf)
			e.c.SetLink(y, x, lf)
		}
	}
	e.mu.Lock()
	e.faultyLinks = append(e.faultyLinks, [2][]int32{a, b})
	e.mu.Unlock()
	desc := fmt.Sprintf("links=%v<->%v", a, b)
	return desc, func() error {
		for _, x := range a {
			for _, y := range b {
				e.c.SetLink(x, y, netfetch.LinkFault{})
				e.c.SetLink(y, x, netfetch.LinkFault{})
			}
		}
		return nil
	}, nil
}

// setStopped marks broker id stopped or running and returns its new stop generation.
func (e *embedded) setStopped(id int32, v bool) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped == nil {
		e.stopped, e.stopGen = map[int32]bool{}, map[int32]uint64{}
	}
	e.stopped[id] = v
	e.stopGen[id]++
	return e.stopGen[id]
}

func (e *embedded) generation(id int32) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopGen[id]
}

// lifecycle returns broker id's lifecycle lock: the kills and restarts of one broker (faults
// that overlap, their heals, HealAll) run one at a time, each from the state the previous one
// left, never a restart and a kill of the same broker at once.
func (e *embedded) lifecycle(id int32) *sync.Mutex {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.life == nil {
		e.life = map[int32]*sync.Mutex{}
	}
	m := e.life[id]
	if m == nil {
		m = new(sync.Mutex)
		e.life[id] = m
	}
	return m
}

func (e *embedded) isStopped(id int32) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopped[id]
}

// restart starts a stopped broker from its data dir, or restarts a running one cleanly.
func (e *embedded) restart(id int32) error {
	if err := e.c.RestartBroker(id); err != nil {
		return err
	}
	e.setStopped(id, false)
	return nil
}

// HealAll restarts every broker still stopped and heals every link fault; the runner calls it
// after the schedule, before the read-back. It returns the brokers it restarted.
func (e *embedded) HealAll() ([]int32, error) {
	var restarted []int32
	var firstErr error
	for _, id := range e.c.BrokerIDs() {
		life := e.lifecycle(id)
		life.Lock()
		if e.isStopped(id) {
			if err := e.restart(id); err != nil && firstErr == nil {
				firstErr = err
			} else {
				restarted = append(restarted, id)
			}
		}
		life.Unlock()
	}
	e.mu.Lock()
	links := e.faultyLinks
	e.faultyLinks = nil
	e.mu.Unlock()
	for _, g := range links {
		for _, x := range g[0] {
			for _, y := range g[1] {
				e.c.SetLink(x, y, netfetch.LinkFault{})
				e.c.SetLink(y, x, netfetch.LinkFault{})
			}
		}
	}
	return restarted, firstErr
}

// resolve finds the broker a target names at this moment. Roles pick among running brokers;
// stoppedOK allows a stopped broker named by id (restart-broker).
func (e *embedded) resolve(t spec.TargetRef, stoppedOK bool) (int32, error) {
	if t.Role == "id" {
		if e.isStopped(t.ID) && !stoppedOK {
			return 0, fmt.Errorf("fault target broker %d is stopped (kill-broker/crash-broker without a restart yet)", t.ID)
		}
		return t.ID, nil
	}
	st, ok := e.c.Controller().Partition(t.Topic, int32(t.Partition))
	if !ok {
		return 0, fmt.Errorf("fault target %s: no partition %s-%d", t, t.Topic, t.Partition)
	}
	if t.Role == "leader" {
		if st.Leader < 0 {
			return 0, fmt.Errorf("fault target %s: %s-%d has no leader", t, t.Topic, t.Partition)
		}
		return st.Leader, nil
	}
	// A running follower in the ISR (the interesting one: pausing it shrinks the ISR), else
	// any running follower.
	var cands []int32
	for _, set := range [][]int32{st.ISR, st.Replicas} {
		for _, r := range set {
			if r != st.Leader && !e.isStopped(r) && !slices.Contains(cands, r) {
				cands = append(cands, r)
			}
		}
		if len(cands) > 0 {
			break
		}
	}
	if len(cands) == 0 {
		return 0, fmt.Errorf("fault target %s: %s-%d has no running follower (leader %d, replicas %v)", t, t.Topic, t.Partition, st.Leader, st.Replicas)
	}
	if t.Role == "any-follower" {
		e.mu.Lock()
		defer e.mu.Unlock()
		return cands[e.rng.IntN(len(cands))], nil
	}
	return cands[0], nil
}
