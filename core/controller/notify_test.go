package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder collects the states delivered to one subscriber.
type recorder struct {
	mu  sync.Mutex
	got []PartitionState
}

func (r *recorder) fn(st PartitionState) {
	r.mu.Lock()
	r.got = append(r.got, st)
	r.mu.Unlock()
}

func (r *recorder) states() []PartitionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func syncCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSubscribeDeliversInOrder(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "a", 3, 2, nil) // a-0 [1 2], a-1 [2 3], a-2 [3 1]
	var r3 recorder
	cancel := c.Subscribe(3, onPartition(r3.fn))
	defer cancel()
	mustCreate(t, c, "b", 1, 3, nil) // b-0 [2 3 1]
	c.BrokerDown(2)                  // a-0 shrink, a-1 -> leader 3, b-0 -> leader 3
	c.BrokerUp(2)
	cur := mustPart(t, c, "a", 1)
	if _, err := alterISR(c, "a", 1, 3, cur.LeaderEpoch, cur.PartitionEpoch, []int32{3, 2}); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(syncCtx(t), 3); err != nil {
		t.Fatal(err)
	}
	type ev struct {
		topic     string
		p, leader int32
		le, pe    int32
		isr       []int32
	}
	want := []ev{
		{"a", 1, 2, 0, 0, []int32{2, 3}}, // initial state, sorted
		{"a", 2, 3, 0, 0, []int32{3, 1}},
		{"b", 0, 2, 0, 0, []int32{2, 3, 1}}, // creation
		{"a", 1, 3, 1, 1, []int32{3}},       // BrokerDown(2), topic order a, b
		{"b", 0, 3, 1, 1, []int32{3, 1}},
		{"a", 1, 3, 1, 2, []int32{3, 2}}, // AlterPartition
	}
	got := r3.states()
	if len(got) != len(want) {
		t.Fatalf("got %d states, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Topic != w.topic || g.Partition != w.p || g.Leader != w.leader || g.LeaderEpoch != w.le ||
			g.PartitionEpoch != w.pe || !slices.Equal(g.ISR, w.isr) {
			t.Errorf("state %d = %v, want %+v", i, g, w)
		}
	}
	// Delivered states are private copies.
	got[len(got)-1].ISR[0] = 99
	got[len(got)-1].Replicas[0] = 99
	if st := mustPart(t, c, "a", 1); st.ISR[0] == 99 || st.Replicas[0] == 99 {
		t.Fatal("delivered state shares slices")
	}
}

// TestSubscribeReentrant: callbacks call back into the controller (reads,
// AlterPartition, even cancel) without deadlock, and the per-partition epochs
// each subscriber sees only increase.
func TestSubscribeReentrant(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	mustCreate(t, c, "t", 6, 3, nil)
	var mu sync.Mutex
	last := map[int32]map[int32]int32{} // broker -> partition -> partition epoch
	var cancels []func()
	for id := int32(1); id <= 3; id++ {
		last[id] = map[int32]int32{}
	}
	for id := int32(1); id <= 3; id++ {
		cancels = append(cancels, c.Subscribe(id, onPartition(func(st PartitionState) {
			// Reads under a held lock would deadlock here.
			if _, ok := c.Partition(st.Topic, st.Partition); !ok {
				t.Errorf("partition vanished")
			}
			_ = c.Stats()
			mu.Lock()
			prev, seen := last[id][st.Partition]
			if seen && st.PartitionEpoch <= prev {
				t.Errorf("broker %d saw %s-%d partition epoch %d after %d", id, st.Topic, st.Partition, st.PartitionEpoch, prev)
			}
			last[id][st.Partition] = st.PartitionEpoch
			mu.Unlock()
			// The leader re-proposes the full replica set when it is
			// shrunk, from inside the callback (stale proposals fail).
			if st.Leader == id && len(st.ISR) < 3 {
				full := slices.DeleteFunc(slices.Clone(st.Replicas), func(r int32) bool {
					b, _ := c.Broker(r)
					return !b.Alive
				})
				_, _ = alterISR(c, st.Topic, st.Partition, id, st.LeaderEpoch, st.PartitionEpoch, full)
			}
		})))
	}
	for round := 0; round < 20; round++ {
		down := int32(round%3) + 1
		c.BrokerDown(down)
		c.BrokerUp(down)
	}
	for id := int32(1); id <= 3; id++ {
		if err := c.Sync(syncCtx(t), id); err != nil {
			t.Fatal(err)
		}
	}
	checkInvariants(t, c)
	// A callback that cancels its own subscription.
	var once sync.Once
	var n int
	var cancelSelf func()
	ready := make(chan struct{})
	cancelSelf = c.Subscribe(1, onPartition(func(PartitionState) {
		<-ready
		n++
		once.Do(func() { cancelSelf() })
	}))
	close(ready)
	if err := c.Sync(syncCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("self-cancelled subscriber called %d times, want 1", n)
	}
	for _, cancel := range cancels {
		cancel()
		cancel() // idempotent
	}
}

func TestCancelStopsDelivery(t *testing.T) {
	c, _ := newTestController(t, 2, Config{})
	mustCreate(t, c, "t", 1, 2, nil)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var r recorder
	cancel := c.Subscribe(1, onPartition(func(st PartitionState) {
		r.fn(st)
		entered <- struct{}{}
		<-release
	}))
	<-entered // blocked in the callback with the initial state
	c.BrokerDown(2)
	c.BrokerUp(2) // queued behind the blocked callback
	cancel()
	ctx, stop := context.WithTimeout(context.Background(), time.Millisecond)
	defer stop()
	if err := c.Sync(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sync returned %v while a callback is running", err)
	}
	close(release)
	if err := c.Sync(syncCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	if got := r.states(); len(got) != 1 {
		t.Fatalf("delivered %d states after cancel, want only the initial one", len(got))
	}
	// After Close, Subscribe delivers nothing.
	c.Close()
	var r2 recorder
	c.Subscribe(1, onPartition(r2.fn))()
	if err := c.Sync(syncCtx(t), 1); err != nil || len(r2.states()) != 0 {
		t.Fatalf("subscribe after Close: %v %v", err, r2.states())
	}
}

// TestConcurrentStress runs every kind of call at once (-race) and checks the
// invariants and that each subscriber saw the final state last.
func TestConcurrentStress(t *testing.T) {
	c, _ := newTestController(t, 5, Config{UncleanLeaderElectionEnable: true})
	c.SetOffsets(&fakeOffsets{c: c, offs: map[int32][2]int64{1: {10, 10}, 2: {8, 8}, 3: {9, 9}, 4: {10, 10}, 5: {3, 3}}})
	mustCreate(t, c, "s", 12, 3, nil)
	recs := make([]*recorder, 6)
	for id := int32(1); id <= 5; id++ {
		recs[id] = &recorder{}
		defer c.Subscribe(id, onPartition(recs[id].fn))()
	}
	var wg sync.WaitGroup
	for g := int32(1); g <= 5; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				switch i % 4 {
				case 0:
					c.BrokerDown(g)
				case 1:
					c.BrokerUp(g)
				case 2:
					c.Heartbeat(g, -1)
					c.CheckSessions()
				case 3:
					sts, _ := c.Partitions("s")
					for _, st := range sts {
						if st.Leader == g {
							_, _ = alterISR(c, "s", st.Partition, g, st.LeaderEpoch, st.PartitionEpoch, []int32{g})
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	for id := int32(1); id <= 5; id++ {
		c.BrokerUp(id)
	}
	checkInvariants(t, c)
	final := mustPartitions(t, c, "s")
	for id := int32(1); id <= 5; id++ {
		if err := c.Sync(syncCtx(t), id); err != nil {
			t.Fatal(err)
		}
		lastSeen := map[int32]PartitionState{}
		for _, st := range recs[id].states() {
			if prev, ok := lastSeen[st.Partition]; ok && (st.PartitionEpoch <= prev.PartitionEpoch || st.LeaderEpoch < prev.LeaderEpoch) {
				t.Fatalf("broker %d: %v after %v", id, st, prev)
			}
			lastSeen[st.Partition] = st
		}
		for _, st := range final {
			if !slices.Contains(st.Replicas, id) {
				continue
			}
			if got := lastSeen[st.Partition]; got.PartitionEpoch != st.PartitionEpoch || got.Leader != st.Leader {
				t.Errorf("broker %d last saw %v, final %v", id, got, st)
			}
		}
	}
}
