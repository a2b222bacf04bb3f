package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/partition"
)

// TestProduceWakeLater: an acks=0/1 ProduceWakeLater appends (the LEO moves, a follower
// fetching now reads the records) but does not wake the fetches parked on the LEO until
// FollowerWakes.Wake, which wakes them once per replica and empties the list; Produce wakes
// them at once. A failed append owes nothing, and acks=all is Produce: it owes nothing and
// returns once the HW passed its batch. The followers end identical to the leader.
func TestProduceWakeLater(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	l := c.leader("t", 0)
	r, _ := l.Replica("t", 0)
	w := partition.NewWaiter()
	w.Reset(1)
	r.WatchLEO(w, 0, r.LEOSeq())
	defer w.Unwatch()
	woken := func() bool {
		select {
		case <-w.C:
			w.Dirty(nil)
			return true
		default:
			return false
		}
	}
	var later FollowerWakes
	for i, acks := range []int16{1, 0, 1} {
		leo := r.LEO()
		parts := []ProducePartition{{Topic: "t", Partition: 0, Records: batch("a", 2)}}
		l.ProduceWakeLater(context.Background(), acks, time.Second, parts, &later)
		if parts[0].Err != nil || parts[0].BaseOffset != leo || r.LEO() != leo+2 {
			t.Fatalf("produce %d acks=%d: %+v, LEO %d -> %d", i, acks, parts[0], leo, r.LEO())
		}
		if woken() || later.Pending() != 1 {
			t.Fatalf("produce %d acks=%d: parked fetches woken before Wake (%d pending)", i, acks, later.Pending())
		}
		later.Wake()
		if !woken() || later.Pending() != 0 {
			t.Fatalf("produce %d acks=%d: Wake did not wake the parked fetches (%d pending)", i, acks, later.Pending())
		}
	}
	// The classic order: Produce wakes them itself.
	if res := produce(t, l, 1, "t", 0, batch("b", 1)); res.Err != nil || !woken() {
		t.Fatalf("Produce: %+v, woken %v", res, woken())
	}
	// A failed append owes no wake-up.
	parts := []ProducePartition{{Topic: "t", Partition: 7, Records: batch("c", 1)}}
	l.ProduceWakeLater(context.Background(), 1, time.Second, parts, &later)
	if !errors.Is(parts[0].Err, kerr.UnknownTopicOrPartition) || later.Pending() != 0 || woken() {
		t.Fatalf("unknown partition: %v, %d pending", parts[0].Err, later.Pending())
	}
	// acks=all waits for the followers: woken at once, answered past the HW.
	parts = []ProducePartition{{Topic: "t", Partition: 0, Records: batch("d", 1)}}
	l.ProduceWakeLater(context.Background(), -1, 10*time.Second, parts, &later)
	if parts[0].Err != nil || later.Pending() != 0 || r.HW() <= parts[0].BaseOffset {
		t.Fatalf("acks=all: %+v, %d pending, HW %d", parts[0], later.Pending(), r.HW())
	}
	c.waitFor("followers at the HW", 10*time.Second, func() bool {
		for _, id := range c.ids() {
			if f, _ := c.broker(id).Replica("t", 0); f.LEO() != r.LEO() {
				return false
			}
		}
		return true
	})
	c.assertReplicasIdentical("t", 0)
}
