package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestLongPollWokenByAppend(t *testing.T) {
	cfg := testConfig()
	c := newTestCluster(t, 1, cfg)
	c.createTopic("t", 1, 1, nil)
	l := c.leader("t", 0)
	r, _ := l.Replica("t", 0)
	hwCh := r.HWChanged()

	done := make(chan *FetchRequest, 1)
	req := &FetchRequest{ReplicaID: -1, MaxWait: time.Minute, MinBytes: 1, MaxBytes: 1 << 20,
		Partitions: []FetchPartition{{Topic: "t", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20}}}
	start := time.Now()
	go func() {
		l.Fetch(context.Background(), req)
		done <- req
	}()
	select {
	case <-done:
		t.Fatal("fetch returned before any data with MaxWait 1m")
	default:
	}
	if res := produce(t, l, 1, "t", 0, batch("x", 4)); res.Err != nil {
		t.Fatal(res.Err)
	}
	<-hwCh // RF 1: the HW advances with the append
	select {
	case got := <-done:
		p := got.Partitions[0]
		defer p.Records.Release()
		if p.Err != nil || p.Records.Size == 0 || p.HighWatermark != 4 || p.Records.NextOffset != 4 {
			t.Fatalf("woken fetch: err %v size %d hw %d next %d", p.Err, p.Records.Size, p.HighWatermark, p.Records.NextOffset)
		}
		if p.LastStableOffset != 4 || p.LogStartOffsetOut != 0 || p.DivergingEpoch != -1 {
			t.Errorf("LSO %d logStart %d diverging %d", p.LastStableOffset, p.LogStartOffsetOut, p.DivergingEpoch)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll not woken by the append")
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Fatalf("took %v", el)
	}
}

// TestLongPollManyPartitionsWokenByAppend: a fetch parked in the purgatory over few or many
// partitions is woken by an append to the last one.
func TestLongPollManyPartitionsWokenByAppend(t *testing.T) {
	for _, n := range []int{2, 8, 40} {
		t.Run(fmt.Sprintf("partitions=%d", n), func(t *testing.T) {
			c := newTestCluster(t, 1, testConfig())
			c.createTopic("t", int32(n), 1, nil)
			l := c.leader("t", 0)
			req := &FetchRequest{ReplicaID: -1, MaxWait: time.Minute, MinBytes: 1, MaxBytes: 1 << 20}
			for p := 0; p < n; p++ {
				req.Partitions = append(req.Partitions, FetchPartition{Topic: "t", Partition: int32(p), CurrentLeaderEpoch: -1, MaxBytes: 1 << 20})
			}
			done := make(chan struct{})
			go func() {
				l.Fetch(context.Background(), req)
				close(done)
			}()
			last := int32(n - 1)
			if res := produce(t, l, 1, "t", last, batch("x", 3)); res.Err != nil {
				t.Fatal(res.Err)
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("long poll not woken by the append")
			}
			for i := range req.Partitions {
				p := &req.Partitions[i]
				want := int64(0)
				if p.Partition == last {
					want = 3
				}
				// The fetch may have read before the append landed on the
				// last partition only if it then parked and was woken: the
				// final read must see it.
				if p.Err != nil || p.Records.NextOffset != want && p.Partition == last {
					t.Errorf("partition %d: err %v next %d, want %d", p.Partition, p.Err, p.Records.NextOffset, want)
				}
				p.Records.Release()
			}
		})
	}
}

// TestLongPollMinBytesAcrossPartitions: min.bytes is summed across partitions (Kafka's
// DelayedFetch): a first append to one partition wakes the parked fetch without completing it,
// a second append to another completes it, and the response holds both partitions' records
// (the wake-up re-read only what changed; the response is read in full).
func TestLongPollMinBytesAcrossPartitions(t *testing.T) {
	const n = 50
	c := newTestCluster(t, 1, testConfig())
	c.createTopic("t", n, 1, nil)
	l := c.leader("t", 0)
	one := batch("m", 3)
	req := &FetchRequest{ReplicaID: -1, MaxWait: time.Minute, MinBytes: int32(len(one) + 1), MaxBytes: 1 << 20}
	for p := 0; p < n; p++ {
		req.Partitions = append(req.Partitions, FetchPartition{Topic: "t", Partition: int32(p), CurrentLeaderEpoch: -1, MaxBytes: 1 << 20})
	}
	done := make(chan struct{})
	go func() {
		l.Fetch(context.Background(), req)
		close(done)
	}()
	if res := produce(t, l, 1, "t", 7, batch("m", 3)); res.Err != nil {
		t.Fatal(res.Err)
	}
	// The first append alone is below min.bytes: the fetch must still be parked.
	select {
	case <-done:
		t.Fatal("fetch completed with one batch below min.bytes")
	default:
	}
	if res := produce(t, l, 1, "t", 42, batch("m", 3)); res.Err != nil {
		t.Fatal(res.Err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("fetch not completed once min.bytes were available across partitions")
	}
	for i := range req.Partitions {
		p := &req.Partitions[i]
		want := int64(0)
		if p.Partition == 7 || p.Partition == 42 {
			want = 3
		}
		if p.Err != nil || p.Records.NextOffset != want || p.HighWatermark != want {
			t.Errorf("partition %d: err %v next %d HW %d, want %d", p.Partition, p.Err, p.Records.NextOffset, p.HighWatermark, want)
		}
		p.Records.Release()
	}
}

func TestLongPollReturnsAfterMaxWait(t *testing.T) {
	c := newTestCluster(t, 1, testConfig())
	c.createTopic("t", 1, 1, nil)
	l := c.leader("t", 0)
	req := &FetchRequest{ReplicaID: -1, MaxWait: 50 * time.Millisecond, MinBytes: 1, MaxBytes: 1 << 20,
		Partitions: []FetchPartition{{Topic: "t", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: -1, MaxBytes: 1 << 20}}}
	start := time.Now()
	l.Fetch(context.Background(), req)
	el := time.Since(start)
	p := req.Partitions[0]
	if p.Err != nil || p.Records.Size != 0 {
		t.Fatalf("empty fetch: %v size %d", p.Err, p.Records.Size)
	}
	if el < 50*time.Millisecond {
		t.Fatalf("returned after %v < MaxWait 50ms", el)
	}
	// ctx cancellation ends the wait too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req.MaxWait = time.Hour
	l.Fetch(ctx, req)
}

func TestFetchErrorsAndLimits(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 1, 3, nil)
	// Move leadership once so that the leader epoch is > 0 (to test fencing).
	first := c.leader("t", 0).ID()
	c.ctrl.BrokerDown(first)
	c.ctrl.BrokerUp(first)
	c.waitFor("new leader at epoch 1", 10*time.Second, func() bool {
		st, _ := c.ctrl.Partition("t", 0)
		if st.LeaderEpoch < 1 || st.Leader < 0 {
			return false
		}
		r, ok := c.broker(st.Leader).Replica("t", 0)
		return ok && r.IsLeader() && r.LeaderEpoch() == st.LeaderEpoch
	})
	l := c.leader("t", 0)
	for i := 0; i < 5; i++ {
		if res := produce(t, l, -1, "t", 0, batch("v", 10)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	r, _ := l.Replica("t", 0)
	epoch := r.LeaderEpoch()
	st, _ := c.ctrl.Partition("t", 0)
	var follower *Broker
	for _, id := range st.Replicas {
		if id != st.Leader {
			follower = c.broker(id)
			break
		}
	}
	// The former leader learns of the new epoch asynchronously: wait until the follower's
	// replica is a follower of this epoch, or a loaded machine finds it still leading epoch 0.
	c.waitFor("the follower applied the new epoch", 10*time.Second, func() bool {
		fr, ok := follower.Replica("t", 0)
		return ok && !fr.IsLeader() && fr.LeaderEpoch() == st.LeaderEpoch
	})
	one := func(b *Broker, replicaID int32, fp FetchPartition, maxBytes int32) FetchPartition {
		if fp.MaxBytes == 0 {
			fp.MaxBytes = 1 << 20
		}
		req := &FetchRequest{ReplicaID: replicaID, MaxBytes: maxBytes, Partitions: []FetchPartition{fp}}
		b.Fetch(context.Background(), req)
		req.Partitions[0].Records.Release()
		return req.Partitions[0]
	}
	for _, tc := range []struct {
		name string
		b    *Broker
		fp   FetchPartition
		want error
	}{
		{"fenced epoch", l, FetchPartition{Topic: "t", FetchOffset: 0, CurrentLeaderEpoch: epoch - 1}, kerr.FencedLeaderEpoch},
		{"unknown epoch", l, FetchPartition{Topic: "t", FetchOffset: 0, CurrentLeaderEpoch: epoch + 1}, kerr.UnknownLeaderEpoch},
		{"follower", follower, FetchPartition{Topic: "t", FetchOffset: 0, CurrentLeaderEpoch: -1}, kerr.NotLeaderForPartition},
		{"unknown partition", l, FetchPartition{Topic: "t", Partition: 9, CurrentLeaderEpoch: -1}, kerr.UnknownTopicOrPartition},
		{"beyond LEO", l, FetchPartition{Topic: "t", FetchOffset: 51, CurrentLeaderEpoch: -1}, kerr.OffsetOutOfRange},
		{"negative", l, FetchPartition{Topic: "t", FetchOffset: -1, CurrentLeaderEpoch: -1}, kerr.OffsetOutOfRange},
	} {
		if got := one(tc.b, -1, tc.fp, 1<<20); !errors.Is(got.Err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, got.Err, tc.want)
		}
	}
	// KIP-74: a tiny MaxBytes still returns the first batch, and only it.
	got := one(l, -1, FetchPartition{Topic: "t", FetchOffset: 0, CurrentLeaderEpoch: epoch, MaxBytes: 1}, 1)
	if got.Err != nil || got.Records.Size == 0 || got.Records.NextOffset != 10 {
		t.Errorf("MaxBytes 1: err %v size %d next %d", got.Err, got.Records.Size, got.Records.NextOffset)
	}
	// Consumer fetch at HW: empty, no error.
	got = one(l, -1, FetchPartition{Topic: "t", FetchOffset: 50, CurrentLeaderEpoch: -1}, 1<<20)
	if got.Err != nil || got.Records.Size != 0 || got.HighWatermark != 50 {
		t.Errorf("fetch at HW: %v size %d hw %d", got.Err, got.Records.Size, got.HighWatermark)
	}
	// ListOffset / EndOffsetForEpoch.
	if off, err := l.ListOffset("t", 0, -2, 0); err != nil || off != 0 {
		t.Errorf("earliest: %d %v", off, err)
	}
	if off, err := l.ListOffset("t", 0, -1, 0); err != nil || off != 50 {
		t.Errorf("latest: %d %v", off, err)
	}
	if off, err := l.ListOffset("t", 0, 0, 0); err != nil || off != 0 {
		t.Errorf("by timestamp 0: %d %v", off, err)
	}
	if off, err := l.ListOffset("t", 0, time.Now().Add(time.Hour).UnixMilli(), 0); err != nil || off != -1 {
		t.Errorf("by future timestamp: %d %v, want -1 (no such record, as Kafka answers)", off, err)
	}
	if _, err := follower.ListOffset("t", 0, -1, 0); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("ListOffset on follower: %v", err)
	}
	if e, end, err := l.EndOffsetForEpoch("t", 0, epoch, epoch); err != nil || e != epoch || end != 50 {
		t.Errorf("EndOffsetForEpoch: %d %d %v", e, end, err)
	}
}

// ListOffset answers ListOffsets for a consumer (see ListOffsetFor).
func (b *Broker) ListOffset(topic string, p int32, timestamp int64, isolation int8) (int64, error) {
	off, _, err := b.ListOffsetFor(-1, -1, topic, p, timestamp, isolation)
	return off, err
}

// TestParkedFetchWakeDoesNotAllocate: a consumer fetch parked over many partitions, woken by
// an append that leaves it below min.bytes, re-checks and parks again without allocating (the
// purgatory's registrations and scratch are reused in steady state).
func TestParkedFetchWakeDoesNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	const n = 20
	c := newTestCluster(t, 1, testConfig())
	c.createTopic("t", n, 1, nil)
	l := c.leader("t", 0)
	tmpl := batch("a", 1)
	blob := make([]byte, len(tmpl))
	req := &FetchRequest{ReplicaID: -1, MaxWait: time.Minute, MinBytes: 1 << 30, MaxBytes: 1 << 20}
	for p := 0; p < n; p++ {
		req.Partitions = append(req.Partitions, FetchPartition{Topic: "t", Partition: int32(p), CurrentLeaderEpoch: -1, MaxBytes: 1 << 20})
	}
	parked := make(chan struct{}, 1)
	l.parkedHook = func() {
		select {
		case parked <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		l.Fetch(ctx, req)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
		for i := range req.Partitions {
			req.Partitions[i].Records.Release()
		}
	}()
	<-parked
	pp := []ProducePartition{{Topic: "t"}}
	i := 0
	deadline := time.NewTimer(time.Minute) // one timer for the whole test: time.After allocates
	defer deadline.Stop()
	wake := func() {
		copy(blob, tmpl)
		pp[0].Partition, pp[0].Records = int32(i%n), blob
		i++
		l.Produce(context.Background(), 1, time.Second, pp)
		if pp[0].Err != nil {
			t.Fatal(pp[0].Err)
		}
		select {
		case <-parked:
		case <-deadline.C:
			t.Fatal("the parked fetch did not park again after its wake-up")
		}
	}
	for range 2 * n { // warm up: every partition's registration and log grown once
		wake()
	}
	if allocs := testing.AllocsPerRun(100, wake); allocs > 0 {
		t.Errorf("a parked fetch's wake-up allocates %.1f times per append", allocs)
	}
}
