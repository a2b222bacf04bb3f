package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

func TestConfigValidation(t *testing.T) {
	ctrl := controller.New(controller.DefaultConfig())
	tr := NewLocalTransport(func(int32) *Broker { return nil })
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no dir", func(c *Config) { c.DataDir = "" }, "log.dirs"},
		{"neg id", func(c *Config) { c.ID = -1 }, "broker.id"},
		{"fetchers", func(c *Config) { c.NumReplicaFetchers = 0 }, "num.replica.fetchers"},
		{"max bytes", func(c *Config) { c.ReplicaFetchMaxBytes = 0 }, "replica.fetch.max.bytes"},
		{"lag", func(c *Config) { c.ReplicaLagTimeMaxMs = 0 }, "replica.lag.time.max.ms"},
		{"min isr", func(c *Config) { c.MinInsyncReplicas = 0 }, "min.insync.replicas"},
		{"hw update", func(c *Config) { c.HWUpdate = "cas" }, "isrbench.hw.update"},
		{"truncate", func(c *Config) { c.TruncateMode = "leo" }, "truncate mode"},
		{"delay", func(c *Config) { c.ProduceDelay = -time.Second }, "isrbench.produce.delay"},
	} {
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		tc.mod(&cfg)
		_, err := New(cfg, ctrl, tr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one naming %q", tc.name, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Addr = "no-port"
	b, err := New(cfg, ctrl, tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err == nil || !strings.Contains(err.Error(), "Addr") {
		t.Errorf("bad Addr: %v", err)
	}
	b.Close()
}

// TestManyFetchersAndConcurrentProducers: num.replica.fetchers=2, six
// partitions, concurrent acks=all producers; partitions are spread over
// both fetchers per source and every replica ends identical.
func TestManyFetchersAndConcurrentProducers(t *testing.T) {
	cfg := testConfig()
	cfg.NumReplicaFetchers = 2
	c := newTestCluster(t, 3, cfg)
	const parts = 6
	c.createTopic("m", parts, 3, nil)
	var wg sync.WaitGroup
	errs := make(chan error, parts*2)
	for p := int32(0); p < parts; p++ {
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := c.leader("m", p)
				for i := 0; i < 15; i++ {
					pp := []ProducePartition{{Topic: "m", Partition: p, Records: batch(fmt.Sprintf("w%d-%d", w, i), 3)}}
					l.Produce(context.Background(), -1, 5*time.Second, pp)
					if pp[0].Err != nil {
						errs <- pp[0].Err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.waitFor("all replicas at 90", 10*time.Second, func() bool {
		for _, id := range c.ids() {
			for _, pi := range c.broker(id).Partitions() {
				if pi.LEO != 90 || pi.HW != 90 {
					return false
				}
			}
		}
		return true
	})
	for p := int32(0); p < parts; p++ {
		c.assertReplicasIdentical("m", p)
	}
	// Fetcher assignment: each follower's fetchers per source follow FetcherFor.
	for _, id := range c.ids() {
		b := c.broker(id)
		for _, f := range b.Fetchers() {
			for _, k := range f.Partitions() {
				if want := FetcherFor(k.Topic, k.Partition, 2); want != f.Index() {
					t.Errorf("broker %d: %s-%d on fetcher %d, want %d", id, k.Topic, k.Partition, f.Index(), want)
				}
			}
		}
		pis := b.Partitions()
		if len(pis) != parts {
			t.Fatalf("broker %d Partitions: %d", id, len(pis))
		}
		for _, pi := range pis {
			if pi.IsLeader {
				if len(pi.FollowerLEOs) != 2 || len(pi.ISR) != 3 {
					t.Errorf("leader snapshot %+v", pi)
				}
				for fid, leo := range pi.FollowerLEOs {
					if leo != 90 {
						t.Errorf("%s-%d follower %d LEO %d", pi.Topic, pi.Partition, fid, leo)
					}
				}
			} else if pi.FollowerLEOs != nil {
				t.Errorf("follower snapshot has FollowerLEOs: %+v", pi)
			}
		}
		if m := b.Metrics(); m.MaxLag != 0 || m.UnderReplicatedPartitions != 0 || m.AtMinIsrPartitionCount != 0 {
			t.Errorf("broker %d metrics %+v", id, m)
		}
	}
	// Both fetcher indexes are in use for some source (6 partitions, 2 fetchers).
	used := map[int]bool{}
	for _, id := range c.ids() {
		b := c.broker(id)
		for _, f := range b.Fetchers() {
			if len(f.Partitions()) > 0 {
				used[f.Index()] = true
			}
		}
	}
	if !used[0] || !used[1] {
		t.Errorf("fetcher indexes in use: %v", used)
	}
}

func TestProduceDelay(t *testing.T) {
	cfg := testConfig()
	cfg.ProduceDelay = 30 * time.Millisecond
	c := newTestCluster(t, 1, cfg)
	c.createTopic("t", 1, 1, nil)
	start := time.Now()
	if res := produce(t, c.leader("t", 0), 1, "t", 0, batch("d", 1)); res.Err != nil {
		t.Fatal(res.Err)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("produce with a 30ms delay took %v", el)
	}
}

// TestProduceAcks1DoesNotAllocate: the broker's produce path (RF 1,
// acks=1) allocates nothing per request in steady state.
func TestProduceAcks1DoesNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	c := newTestCluster(t, 1, testConfig())
	c.createTopic("t", 1, 1, nil)
	l := c.leader("t", 0)
	tmpl := batch("z", 5)
	blob := make([]byte, len(tmpl))
	parts := []ProducePartition{{Topic: "t", Partition: 0}}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		copy(blob, tmpl)
		parts[0].Records = blob
		l.Produce(ctx, 1, time.Second, parts)
		if parts[0].Err != nil {
			t.Fatal(parts[0].Err)
		}
	})
	if allocs > 0 {
		t.Errorf("Produce acks=1 allocates %.1f times per call", allocs)
	}
}

// TestPausedBrokerStopsHeartbeating: a paused broker's session expires at
// the controller (fake controller clock); after Resume its heartbeat
// unfences it and it leads its partition again.
func TestPausedBrokerStopsHeartbeating(t *testing.T) {
	var nowNs atomic.Int64
	nowNs.Store(1)
	ctrl := controller.New(controller.Config{BrokerSessionTimeoutMs: 1000, Now: nowNs.Load})
	c := &testCluster{t: t, ctrl: ctrl, cfg: testConfig(), dirs: map[int32]string{0: t.TempDir()},
		brokers: map[int32]*Broker{}, ctrlCh: make(chan struct{})}
	c.cfg.HeartbeatIntervalMs = 5
	c.transport = NewLocalTransport(c.broker)
	ctrl.Subscribe(0, func(controller.Update) { c.notify() })
	b := c.start(0)
	t.Cleanup(func() { b.Close() })
	c.createTopic("t", 1, 1, nil)

	b.Pause()
	nowNs.Add(int64(2 * time.Second))
	ctrl.CheckSessions()
	if info, _ := ctrl.Broker(0); info.Alive {
		t.Fatal("paused broker still alive after its session expired")
	}
	c.waitFor("partition offline", 5*time.Second, func() bool {
		r, _ := b.Replica("t", 0)
		return !r.IsLeader()
	})
	b.Resume()
	c.waitFor("broker unfenced by its heartbeat and leading again", 5*time.Second, func() bool {
		r, _ := b.Replica("t", 0)
		info, _ := ctrl.Broker(0)
		return info.Alive && r.IsLeader()
	})
}

func TestRetentionAdvancesLogStart(t *testing.T) {
	cfg := testConfig()
	cfg.Log.SegmentBytes = 1024
	cfg.Log.RetentionBytes = 2048
	c := newTestCluster(t, 3, cfg)
	c.createTopic("t", 1, 3, nil)
	l := c.leader("t", 0)
	for i := 0; i < 40; i++ {
		if res := produce(t, l, -1, "t", 0, batch(fmt.Sprintf("r%d", i), 5)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if n := l.ApplyRetention(); n == 0 {
		t.Fatal("retention deleted nothing")
	}
	start, err := l.ListOffset("t", 0, -2, 0)
	if err != nil || start <= 0 {
		t.Fatalf("earliest after retention: %d %v", start, err)
	}
	// The leader epoch cache follows the log start (Kafka's truncateFromStart).
	if r, _ := l.Replica("t", 0); r.Epochs().Entries()[0].StartOffset != start {
		t.Fatalf("epoch cache after retention: %v, want the first entry to start at log start %d", r.Epochs().Entries(), start)
	}
	req := &FetchRequest{ReplicaID: -1, MaxBytes: 1 << 20, Partitions: []FetchPartition{{Topic: "t", FetchOffset: 0, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20}}}
	l.Fetch(context.Background(), req)
	req.Partitions[0].Records.Release()
	if p := req.Partitions[0]; !errors.Is(p.Err, kerr.OffsetOutOfRange) || p.LogStartOffsetOut != start {
		t.Fatalf("fetch below log start: %v (log start %d, want %d)", p.Err, p.LogStartOffsetOut, start)
	}
	vals, hw := consume(t, l, "t", 0, start)
	if hw != 200 || int64(len(vals)) != 200-start {
		t.Fatalf("read %d values from %d to HW %d", len(vals), start, hw)
	}
	// Replication continues after retention.
	if res := produce(t, l, -1, "t", 0, batch("after", 1)); res.Err != nil {
		t.Fatal(res.Err)
	}
}

// Kill releases the segment files (without flushing them), so repeated
// kill/restart faults do not pile up descriptors until a GC runs.
func TestKillClosesLogFiles(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 1, 3, nil)
	l := c.leader("t", 0)
	if res := produce(t, l, -1, "t", 0, batch("k", 3)); res.Err != nil {
		t.Fatal(res.Err)
	}
	h := l.lookup("t", 0)
	l.Kill()
	if n := h.l.Segments(); n != 0 {
		t.Fatalf("after Kill the log still holds %d open segments", n)
	}
	if _, err := h.l.Read(0, h.l.LEO(), 1<<20, true); !errors.Is(err, log.ErrClosed) {
		t.Fatalf("read after Kill: %v, want log.ErrClosed", err)
	}
}

// The gate's CPU cost is per record: recordsIn counts every batch's records, in every partition,
// and a malformed batch as one.
func TestProduceSpinCountsRecords(t *testing.T) {
	two := append(batch("a", 3), batch("b", 4)...)
	parts := []ProducePartition{{Records: two}, {Records: batch("c", 5)}, {Records: []byte("garbage")}, {}}
	if got := recordsIn(parts); got != 3+4+5+1 {
		t.Fatalf("recordsIn = %d, want 13", got)
	}
}
