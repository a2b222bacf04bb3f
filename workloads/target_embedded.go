package workloads

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/netfetch"
)

func init() { embeddedTarget = openEmbedded }

// embedded is the in-process netfetch cluster in a temporary data dir under os.TempDir(),
// removed by Close (which the runner defers, so also on error and cancellation).
type embedded struct {
	c       *netfetch.Cluster
	dir     string
	seeds   []string
	minISR  int
	closeMu sync.Once
	err     error

	// Cumulative ISR counters across broker restarts (a restarted broker starts from 0).
	cntMu            sync.Mutex
	lastCnt          map[int32][2]int64 // broker -> last seen (shrinks, expands)
	shrinks, expands int64
}

// ClusterConfig maps the spec onto an embedded cluster configuration.
func (s *Spec) ClusterConfig() (netfetch.ClusterConfig, error) {
	cc := netfetch.DefaultClusterConfig()
	cc.Brokers = s.Brokers
	cc.AutoCreateTopics = false
	cc.ZeroCopy = s.Broker.ZeroCopy
	b := &cc.Broker
	b.NumReplicaFetchers = s.Broker.NumReplicaFetchers
	b.ReplicaFetchWaitMaxMs = int32(s.Broker.ReplicaFetchWaitMaxMs)
	b.ReplicaFetchMinBytes = int32(s.Broker.ReplicaFetchMinBytes)
	b.ReplicaFetchMaxBytes = int32(s.Broker.ReplicaFetchMaxBytes)
	b.ReplicaFetchResponseMaxBytes = int32(s.Broker.ReplicaFetchResponseMaxBytes)
	b.ReplicaLagTimeMaxMs = s.Broker.ReplicaLagTimeMaxMs
	b.MinInsyncReplicas = s.Topic.MinInsyncReplicas
	b.Log.SegmentBytes = s.Broker.LogSegmentBytes
	b.Log.FlushMessages = s.Broker.FlushMessages
	b.Log.FlushMs = s.Broker.FlushMs
	b.HWUpdate = s.Broker.HWUpdate
	b.TruncateMode = s.Broker.TruncateMode
	b.ProduceDelay = s.Broker.ProduceDelay
	w, err := log.NewWriter(s.Broker.IO)
	if err != nil {
		return cc, fmt.Errorf("isrbench.io: %w", err)
	}
	b.Log.Writer = w
	cc.Controller.UncleanLeaderElectionEnable = s.Broker.UncleanLeaderElectionEnable
	cc.Controller.BrokerSessionTimeoutMs = s.Broker.BrokerSessionTimeoutMs
	return cc, nil
}

func openEmbedded(ctx context.Context, s *Spec, o TargetOptions) (Target, error) {
	cc, err := s.ClusterConfig()
	if err != nil {
		return nil, err
	}
	if why := log.WriterFallbackReason(s.Broker.IO); why != "" && o.Log != nil {
		fmt.Fprintf(o.Log, "isrbench.io=%s: falling back to pwritev: %s\n", s.Broker.IO, why)
	}
	dir, err := os.MkdirTemp("", "isrbench-run-")
	if err != nil {
		return nil, fmt.Errorf("embedded cluster data dir: %w", err)
	}
	cc.DataDir = dir
	cc.Broker.OnHWLag = o.OnHWLag
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	cc.Logf = func(format string, args ...any) { fmt.Fprintf(logw, format+"\n", args...) }
	c, err := netfetch.StartCluster(ctx, cc)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded cluster: %w", err)
	}
	return &embedded{c: c, dir: dir, seeds: splitList(c.Bootstrap()), minISR: s.Topic.MinInsyncReplicas}, nil
}

func (e *embedded) Name() string    { return "embedded" }
func (e *embedded) Seeds() []string { return e.seeds }
func (e *embedded) HasHWLag() bool  { return true }

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
// them, and the brokers' cumulative IsrShrinks/IsrExpands counters.
func (e *embedded) Sample(_ context.Context, topic string) (Sample, error) {
	var s Sample
	s.ISRMin = int(^uint(0) >> 1)
	n := 0
	for _, id := range e.c.BrokerIDs() {
		b := e.c.Broker(id)
		if b == nil {
			continue
		}
		m := b.Metrics()
		e.count(id, m.IsrShrinks, m.IsrExpands)
		s.MaxLag = max(s.MaxLag, m.MaxLag)
		for _, p := range b.Partitions() {
			if p.Topic != topic || !p.IsLeader {
				continue
			}
			n++
			s.HWTotal += p.HW
			s.LEOTotal += p.LEO
			isr := len(p.ISR)
			s.ISRMin = min(s.ISRMin, isr)
			s.ISRMax = max(s.ISRMax, isr)
			if isr < len(p.Replicas) {
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
	if st, ok := e.c.Controller().Partitions(topic); ok {
		for _, p := range st {
			s.Leaders = append(s.Leaders, p.Leader)
		}
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

// ApplyFault resolves the target broker and applies the fault; heal undoes it.
func (e *embedded) ApplyFault(_ context.Context, topic string, f Fault) (string, func() error, error) {
	id, err := e.resolve(topic, f)
	if err != nil {
		return "", nil, err
	}
	desc := "broker=" + strconv.Itoa(int(id))
	switch f.Kind {
	case "pause":
		if err := e.c.PauseBroker(id); err != nil {
			return desc, nil, err
		}
		return desc, func() error { return e.c.ResumeBroker(id) }, nil
	case "kill":
		if err := e.c.KillBroker(id); err != nil {
			return desc, nil, err
		}
		return desc, func() error { return e.c.RestartBroker(id) }, nil
	case "crash":
		if err := e.c.CrashBroker(id); err != nil {
			return desc, nil, err
		}
		return desc, func() error { return e.c.RestartBroker(id) }, nil
	case "slow-link", "partition":
		lf := netfetch.LinkFault{Latency: f.Latency, Jitter: f.Jitter, BandwidthBytesPerSec: f.Bandwidth, Down: f.Kind == "partition"}
		var others []int32
		for _, o := range e.c.BrokerIDs() {
			if o != id {
				others = append(others, o)
				e.c.SetLink(id, o, lf)
				e.c.SetLink(o, id, lf)
			}
		}
		desc = fmt.Sprintf("links=%d<->%v", id, others)
		return desc, func() error {
			for _, o := range others {
				e.c.SetLink(id, o, netfetch.LinkFault{})
				e.c.SetLink(o, id, netfetch.LinkFault{})
			}
			return nil
		}, nil
	}
	return "", nil, fmt.Errorf("fault kind %q; allowed %s", f.Kind, strings.Join(FaultKinds, "|"))
}

func (e *embedded) resolve(topic string, f Fault) (int32, error) {
	switch f.Target {
	case "leader", "follower":
		st, ok := e.c.Controller().Partition(topic, int32(f.Partition))
		if !ok {
			return 0, fmt.Errorf("fault target %s: no partition %s-%d", f.Target, topic, f.Partition)
		}
		if f.Target == "leader" {
			if st.Leader < 0 {
				return 0, fmt.Errorf("fault target leader: %s-%d has no leader", topic, f.Partition)
			}
			return st.Leader, nil
		}
		// A follower in the ISR (the interesting one: pausing it shrinks the ISR).
		for _, r := range st.ISR {
			if r != st.Leader {
				return r, nil
			}
		}
		for _, r := range st.Replicas {
			if r != st.Leader {
				return r, nil
			}
		}
		return 0, fmt.Errorf("fault target follower: %s-%d has no follower (replicas %v)", topic, f.Partition, st.Replicas)
	}
	id, err := strconv.Atoi(f.Target)
	if err != nil || !slices.Contains(e.c.BrokerIDs(), int32(id)) {
		return 0, fmt.Errorf("fault target %q: allowed leader, follower or a broker id %v", f.Target, e.c.BrokerIDs())
	}
	return int32(id), nil
}

// ReplicasIdentical compares, for every partition of topic, the bytes of each ISR member's log
// with the leader's over [leader log start, leader HW) (start inclusive, HW exclusive); it
// returns false and the first difference when they are not byte-identical.
func (e *embedded) ReplicasIdentical(topic string) (bool, string, error) {
	st, ok := e.c.Controller().Partitions(topic)
	if !ok {
		return false, "", fmt.Errorf("replica check: no topic %s", topic)
	}
	for _, ps := range st {
		if ps.Leader < 0 {
			return false, fmt.Sprintf("partition %d has no leader", ps.Partition), nil
		}
		lb := e.c.Broker(ps.Leader)
		if lb == nil {
			return false, "", fmt.Errorf("replica check: leader %d of partition %d not running", ps.Leader, ps.Partition)
		}
		lr, ok := lb.Replica(topic, ps.Partition)
		if !ok {
			return false, "", fmt.Errorf("replica check: leader %d does not host partition %d", ps.Leader, ps.Partition)
		}
		from, hw := lr.LogStart(), lr.HW()
		var followers []*partition.Replica
		var fids []int32
		for _, id := range ps.ISR {
			if id == ps.Leader {
				continue
			}
			b := e.c.Broker(id)
			if b == nil {
				continue
			}
			fr, ok := b.Replica(topic, ps.Partition)
			if !ok {
				return false, fmt.Sprintf("partition %d: ISR member %d does not host it", ps.Partition, id), nil
			}
			followers = append(followers, fr)
			fids = append(fids, id)
		}
		// Chunk by chunk (1 MiB of whole batches) so memory stays bounded.
		var want, got []byte
		for off := from; off < hw; {
			next, err := readChunk(lr, off, hw, &want)
			if err != nil {
				return false, "", fmt.Errorf("replica check: leader %d partition %d: %w", ps.Leader, ps.Partition, err)
			}
			for i, fr := range followers {
				fnext, err := readChunk(fr, off, next, &got)
				if err != nil || fnext != next || !bytes.Equal(got, want) {
					return false, fmt.Sprintf("partition %d: ISR member %d differs from leader %d in [%d, %d) (err %v)",
						ps.Partition, fids[i], ps.Leader, off, next, err), nil
				}
			}
			off = next
		}
	}
	return true, "", nil
}

// readChunk reads the batches from off (inclusive) up to at most to (exclusive), 1 MiB or one
// batch, into *buf; it returns the offset after the last batch read.
func readChunk(r *partition.Replica, off, to int64, buf *[]byte) (int64, error) {
	sl, err := r.Read(off, to, 1<<20, true)
	if err != nil {
		return 0, err
	}
	defer sl.Release()
	if sl.Size == 0 || sl.NextOffset <= off {
		return 0, fmt.Errorf("read at %d returned no progress", off)
	}
	*buf, err = sl.ReadAll((*buf)[:0])
	return sl.NextOffset, err
}
