package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/core/controller"
)

// Start starts a cluster of brokers in t's temp dir (fetch backoff 50 ms, logs to t until
// cleanup) after mutate changed the config (nil: none); it is closed at cleanup.
func Start(t testing.TB, brokers int, mutate func(*cluster.Config)) *cluster.Cluster {
	t.Helper()
	cfg := cluster.DefaultConfig()
	cfg.Brokers = brokers
	cfg.DataDir = t.TempDir()
	cfg.Broker.ReplicaFetchBackoffMs = 50
	var done atomic.Bool
	cfg.Logf = func(format string, args ...any) {
		if !done.Load() {
			t.Logf(format, args...)
		}
	}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
		done.Store(true)
	})
	return c
}

// NewClient returns a kgo client seeded with every broker of c (short retry backoff and
// metadata age), closed at cleanup.
func NewClient(t testing.TB, c *cluster.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.MetadataMinAge(10 * time.Millisecond),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Ack is one acknowledged record (a value).
type Ack struct {
	Partition int32
	Offset    int64
	Value     string
}

// Produce sends n records (values prefix-i) with acks=all and returns the acks.
func Produce(t testing.TB, cl *kgo.Client, topic, prefix string, n int) []Ack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var acks []Ack
	var wg sync.WaitGroup
	var firstErr error
	for i := 0; i < n; i++ {
		wg.Add(1)
		v := fmt.Sprintf("%s-%05d", prefix, i)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 7)), Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("Produce %s: %w", r.Value, err)
				}
				return
			}
			acks = append(acks, Ack{r.Partition, r.Offset, string(r.Value)})
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	return acks
}

// ConsumeAll reads every partition of topic from the start until each
// partition reached its HW (end offset), and returns the records by partition.
func ConsumeAll(t testing.TB, c *cluster.Cluster, topic string) map[int32][]Ack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(NewClient(t, c))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets: %v %v", err, ends.Error())
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want[o.Partition] = o.Offset
		parts[o.Partition] = kgo.NewOffset().AtStart()
	})
	cl := NewClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}), kgo.FetchMaxWait(100*time.Millisecond))
	got := map[int32][]Ack{}
	done := func() bool {
		for p, end := range want {
			n := len(got[p])
			if end > 0 && (n == 0 || got[p][n-1].Offset < end-1) {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %v; got %d partitions, want ends %v", topic, err, len(got), want)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], Ack{r.Partition, r.Offset, string(r.Value)})
		})
	}
	return got
}

// CheckNoLoss verifies every acked record is present at its acked offset and
// that each partition's offsets are dense and increasing.
func CheckNoLoss(t *testing.T, acks []Ack, got map[int32][]Ack) {
	t.Helper()
	byOff := map[int32]map[int64]string{}
	for p, recs := range got {
		byOff[p] = map[int64]string{}
		for i, r := range recs {
			if i > 0 && r.Offset != recs[i-1].Offset+1 {
				t.Errorf("partition %d: offset %d follows %d", p, r.Offset, recs[i-1].Offset)
			}
			byOff[p][r.Offset] = r.Value
		}
	}
	lost := 0
	for _, a := range acks {
		if v, ok := byOff[a.Partition][a.Offset]; !ok || v != a.Value {
			lost++
			if lost < 5 {
				t.Errorf("acked record %q at %d-%d: read back %q (present %v)", a.Value, a.Partition, a.Offset, v, ok)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acks=all acknowledged records lost", lost, len(acks))
	}
}

// FollowedTopic creates topic with one partition, RF 3 and min.insync.replicas 2, and
// returns its state and one follower of its leader.
func FollowedTopic(t *testing.T, c *cluster.Cluster, topic string) (controller.PartitionState, int32) {
	t.Helper()
	if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition(topic, 0)
	follower := st.Replicas[0]
	if follower == st.Leader {
		follower = st.Replicas[1]
	}
	return st, follower
}

// WatchPartition subscribes to partition state changes (as broker `as`
// sees them) and returns a function waiting for a state matching cond.
func WatchPartition(t *testing.T, c *cluster.Cluster, as int32, topic string, p int32) func(what string, cond func(controller.PartitionState) bool) controller.PartitionState {
	ch := make(chan controller.PartitionState, 1024)
	cancel := c.Controller().Subscribe(as, func(u controller.Update) {
		if u.Partition == nil {
			return
		}
		if st := *u.Partition; st.Topic == topic && st.Partition == p {
			select {
			case ch <- st:
			default:
			}
		}
	})
	t.Cleanup(cancel)
	return func(what string, cond func(controller.PartitionState) bool) controller.PartitionState {
		t.Helper()
		if st, _ := c.Controller().Partition(topic, p); cond(st) {
			return st
		}
		deadline := time.NewTimer(20 * time.Second)
		defer deadline.Stop()
		for {
			select {
			case st := <-ch:
				if cond(st) {
					return st
				}
			case <-deadline.C:
				st, _ := c.Controller().Partition(topic, p)
				t.Fatalf("timed out waiting for %s; state %v", what, st)
			}
		}
	}
}

// CheckReplicasIdentical compares every replica's bytes [0, HW) with the leader's.
func CheckReplicasIdentical(t *testing.T, c *cluster.Cluster, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for p := int32(0); p < partitions; p++ {
		st, _ := c.Controller().Partition(topic, p)
		leader, _ := c.Broker(st.Leader).Replica(topic, p)
		hw := leader.HW()
		// Followers must have fetched up to the HW (they are in the ISR).
		for _, id := range st.ISR {
			r, ok := c.Broker(id).Replica(topic, p)
			if !ok {
				t.Fatalf("broker %d has no replica of %s-%d", id, topic, p)
			}
			for r.LEO() < hw {
				select {
				case <-r.LEOChanged():
				case <-ctx.Done():
					t.Fatalf("broker %d %s-%d LEO %d < HW %d", id, topic, p, r.LEO(), hw)
				}
			}
		}
		read := func(id int32) []byte {
			r, _ := c.Broker(id).Replica(topic, p)
			if hw == 0 {
				return nil
			}
			s, err := r.Read(0, hw, math.MaxInt32, true)
			if err != nil {
				t.Fatalf("broker %d %s-%d read [0,%d): %v", id, topic, p, hw, err)
			}
			defer s.Release()
			b, err := s.ReadAll(nil)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		want := read(st.Leader)
		if hw > 0 && len(want) == 0 {
			t.Fatalf("%s-%d: leader has no bytes below HW %d", topic, p, hw)
		}
		for _, id := range st.ISR {
			if got := read(id); !bytes.Equal(got, want) {
				t.Errorf("%s-%d: broker %d bytes [0,%d) differ from leader %d (%d vs %d bytes)", topic, p, id, hw, st.Leader, len(got), len(want))
			}
		}
	}
}

// Context returns a context that ends after 30 s or at t's cleanup.
func Context(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ConfigOf returns the config key of a described resource.
func ConfigOf(t *testing.T, rcs kadm.ResourceConfigs, resource, key string) kadm.Config {
	t.Helper()
	rc, err := rcs.On(resource, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %q: %v %v", resource, err, rc.Err)
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == key {
			return cfg
		}
	}
	t.Fatalf("%q has no config %s", resource, key)
	return kadm.Config{}
}

// WaitReplicasHW waits until every running replica of topic-p has its HW at hw (the
// followers learn the leader's HW a fetch later), woken by the replicas' HW changes, or fails
// the test after 10 s.
func WaitReplicasHW(t testing.TB, c *cluster.Cluster, topic string, p int32, hw int64) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		var chs []<-chan struct{}
		done := true
		for _, id := range c.BrokerIDs() {
			b := c.Broker(id)
			if b == nil {
				done = false
				continue
			}
			r, ok := b.Replica(topic, p)
			if !ok {
				done = false
				continue
			}
			chs = append(chs, r.HWChanged()) // taken before the check: no lost wake-up
			if _, got, ok := c.ReplicaOffsets(id, topic, p); !ok || got != hw {
				done = false
			}
		}
		if done {
			return
		}
		wake := make(chan struct{}, 1)
		stop := make(chan struct{})
		for _, ch := range chs {
			go func() {
				select {
				case <-ch:
					select {
					case wake <- struct{}{}:
					default:
					}
				case <-stop:
				}
			}()
		}
		select {
		case <-wake:
			close(stop)
		case <-deadline.C:
			close(stop)
			t.Fatalf("timed out waiting for every replica of %s-%d at HW %d", topic, p, hw)
		}
	}
}
