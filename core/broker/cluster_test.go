package broker

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// testCluster is n brokers over a LocalTransport with a real controller.
type testCluster struct {
	t         testing.TB
	ctrl      *controller.Controller
	transport *LocalTransport
	cfg       Config
	dirs      map[int32]string

	mu      sync.Mutex
	brokers map[int32]*Broker
	fss     map[int32]*vfs.PowerLossFS // one per broker, so a crash loses that broker's unsynced bytes
	bases   map[int32]vfs.FS           // what a broker's PowerLossFS wraps (nil: the OS)
	ctrlCh  chan struct{}              // closed on the next controller change (any broker's subscription)
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.ReplicaFetchWaitMaxMs = 50
	cfg.ReplicaFetchBackoffMs = 20
	cfg.ReplicaLagTimeMaxMs = 10000
	cfg.Log.SegmentBytes = 1 << 20
	if !testing.Verbose() {
		cfg.Logf = func(string, ...any) {} // expected noise (fetchers of killed brokers)
	}
	return cfg
}

func newTestCluster(t testing.TB, n int, cfg Config) *testCluster {
	t.Helper()
	c := &testCluster{
		t:       t,
		ctrl:    controller.New(controller.Config{BrokerSessionTimeoutMs: 60000}),
		cfg:     cfg,
		dirs:    map[int32]string{},
		brokers: map[int32]*Broker{},
		ctrlCh:  make(chan struct{}),
	}
	c.transport = NewLocalTransport(c.broker)
	for id := int32(0); id < int32(n); id++ {
		c.dirs[id] = t.TempDir()
		// The test's own subscription: wakes waitFor on every change.
		c.ctrl.Subscribe(id, func(controller.Update) { c.notify() })
		c.start(id)
	}
	t.Cleanup(func() {
		for _, id := range c.ids() {
			if b := c.broker(id); b != nil {
				_ = b.Close()
			}
		}
	})
	return c
}

// addBroker starts broker id on a new temporary directory, for tests that build their
// cluster by hand (newTestCluster with n = 0). Its Close is registered after the directory,
// so it runs first: the directory is removed only once the broker stopped writing to it.
func (c *testCluster) addBroker(id int32) {
	c.dirs[id] = c.t.TempDir()
	// The test's own subscription: wakes waitFor on every change.
	c.ctrl.Subscribe(id, func(controller.Update) { c.notify() })
	c.start(id)
	c.t.Cleanup(func() {
		if b := c.broker(id); b != nil {
			_ = b.Close()
		}
	})
}

func (c *testCluster) notify() {
	c.mu.Lock()
	close(c.ctrlCh)
	c.ctrlCh = make(chan struct{})
	c.mu.Unlock()
}

func (c *testCluster) ids() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []int32
	for id := range c.dirs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// fs returns broker id's file system (the OS one, tracking what was fsynced).
func (c *testCluster) fs(id int32) *vfs.PowerLossFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fss == nil {
		c.fss = map[int32]*vfs.PowerLossFS{}
	}
	if c.fss[id] == nil {
		c.fss[id] = vfs.NewPowerLossFS(c.bases[id])
	}
	return c.fss[id]
}

func (c *testCluster) broker(id int32) *Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[id]
}

// start builds and starts a (new) broker id on its data dir.
func (c *testCluster) start(id int32) *Broker {
	c.t.Helper()
	cfg := c.cfg
	cfg.ID = id
	cfg.DataDir = c.dirs[id]
	cfg.Addr = fmt.Sprintf("127.0.0.1:%d", 9092+id) // Start registers the broker
	cfg.FS = c.fs(id)
	b, err := New(cfg, c.ctrl, c.transport)
	if err != nil {
		c.t.Fatalf("New broker %d: %v", id, err)
	}
	c.mu.Lock()
	c.brokers[id] = b
	c.mu.Unlock()
	if err := b.Start(); err != nil {
		c.t.Fatalf("Start broker %d: %v", id, err)
	}
	c.notify()
	return b
}

func (c *testCluster) createTopic(name string, parts int32, rf int16, configs map[string]string) {
	c.t.Helper()
	c.createTopicWithin(name, parts, rf, configs, 10*time.Second)
}

// createTopicWithin is createTopic with its own deadline (thousands of partitions).
func (c *testCluster) createTopicWithin(name string, parts int32, rf int16, configs map[string]string, timeout time.Duration) {
	c.t.Helper()
	if _, err := c.ctrl.CreateTopic(name, parts, rf, configs); err != nil {
		c.t.Fatalf("CreateTopic %s: %v", name, err)
	}
	// Wait until every replica exists and the leader serves.
	c.waitFor(fmt.Sprintf("topic %s ready", name), timeout, func() bool {
		for p := int32(0); p < parts; p++ {
			st, ok := c.ctrl.Partition(name, p)
			if !ok {
				return false
			}
			for _, id := range st.Replicas {
				b := c.broker(id)
				if b == nil {
					return false
				}
				r, ok := b.Replica(name, p)
				if !ok || r.LeaderEpoch() != st.LeaderEpoch {
					return false
				}
				if id == st.Leader && !r.IsLeader() {
					return false
				}
			}
		}
		return true
	})
}

func (c *testCluster) leader(topic string, p int32) *Broker {
	c.t.Helper()
	st, ok := c.ctrl.Partition(topic, p)
	if !ok || st.Leader < 0 {
		c.t.Fatalf("%s-%d has no leader (%v)", topic, p, st)
	}
	return c.broker(st.Leader)
}

// waitChans returns every signal that can make a waitFor condition true:
// controller changes, broker state changes, every replica's HW/LEO change.
func (c *testCluster) waitChans() []<-chan struct{} {
	c.mu.Lock()
	chs := []<-chan struct{}{c.ctrlCh}
	bs := make([]*Broker, 0, len(c.brokers))
	for _, b := range c.brokers {
		bs = append(bs, b)
	}
	c.mu.Unlock()
	for _, b := range bs {
		chs = append(chs, b.Changed())
		for _, h := range b.allReplicas() {
			chs = append(chs, h.r.HWChanged(), h.r.LEOChanged())
		}
	}
	return chs
}

// waitFor blocks until cond is true, re-checking it on every signal of
// waitChans (no sleeping, no polling), or fails the test after timeout.
func (c *testCluster) waitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		chs := c.waitChans() // taken before checking: no lost wake-up
		if cond() {
			return
		}
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)}}
		for _, ch := range chs {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			c.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// batch builds one uncompressed batch of n records "prefix-i".
func batch(prefix string, n int) []byte {
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return records.AppendBatch(nil, 0, 0, time.Now().UnixMilli(), recs)
}

func produce(t testing.TB, b *Broker, acks int16, topic string, p int32, blob []byte) ProducePartition {
	t.Helper()
	parts := []ProducePartition{{Topic: topic, Partition: p, Records: blob}}
	b.Produce(context.Background(), acks, 5*time.Second, parts)
	return parts[0]
}

// consume reads [from, HW) of topic-p from b as a consumer and returns the values.
func consume(t testing.TB, b *Broker, topic string, p int32, from int64) (values []string, hw int64) {
	t.Helper()
	for {
		req := &FetchRequest{ReplicaID: -1, MaxBytes: 1 << 20, Partitions: []FetchPartition{{
			Topic: topic, Partition: p, FetchOffset: from, CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20,
		}}}
		b.Fetch(context.Background(), req)
		fp := req.Partitions[0]
		if fp.Err != nil {
			t.Fatalf("consumer fetch %s-%d at %d from broker %d: %v", topic, p, from, b.ID(), fp.Err)
		}
		data, err := fp.Records.ReadAll(nil)
		fp.Records.Release()
		if err != nil {
			t.Fatal(err)
		}
		hw = fp.HighWatermark
		if len(data) == 0 {
			return values, hw
		}
		err = records.Split(data, func(bb []byte, h records.Header) error {
			return records.ForEachRecord(bb, func(off, _ int64, _, v []byte) error {
				if off >= from {
					values = append(values, string(v))
					from = off + 1
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if from >= hw {
			return values, hw
		}
	}
}

// logBytes returns topic-p's raw log bytes [0, to) on broker b.
func logBytes(t testing.TB, b *Broker, topic string, p int32, to int64) []byte {
	t.Helper()
	h := b.lookup(topic, p)
	if h == nil {
		t.Fatalf("broker %d does not host %s-%d", b.ID(), topic, p)
	}
	data, err := h.l.Bytes(0, to)
	if err != nil {
		t.Fatalf("broker %d %s-%d Bytes(0,%d): %v", b.ID(), topic, p, to, err)
	}
	return data
}

// assertReplicasIdentical checks every replica holds the same bytes up to the leader HW.
func (c *testCluster) assertReplicasIdentical(topic string, p int32) {
	c.t.Helper()
	st, _ := c.ctrl.Partition(topic, p)
	lr, _ := c.broker(st.Leader).Replica(topic, p)
	hw := lr.HW()
	want := logBytes(c.t, c.broker(st.Leader), topic, p, hw)
	for _, id := range st.ISR {
		if id == st.Leader {
			continue
		}
		got := logBytes(c.t, c.broker(id), topic, p, hw)
		if !bytes.Equal(got, want) {
			c.t.Errorf("%s-%d: broker %d log [0,%d) differs from leader %d (%d vs %d bytes)", topic, p, id, hw, st.Leader, len(got), len(want))
		}
	}
}
