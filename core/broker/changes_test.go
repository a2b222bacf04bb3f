package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// These tests pin Kafka's ISR expiry (isCaughtUp: a follower at the leader's LEO is caught up
// whatever the time; one behind is caught up until replica.lag.time.max.ms after it last was)
// and the HW checkpoint in both modes of isrbench.housekeeping.changed.only: the passes that
// visit only the partitions that changed must shrink and write exactly what the passes over
// every partition do.

func forHousekeepingModes(t *testing.T, run func(t *testing.T, set func(*Config))) {
	for _, changedOnly := range []bool{true, false} {
		t.Run(fmt.Sprintf("changed.only=%v", changedOnly), func(t *testing.T) {
			run(t, func(c *Config) { c.HousekeepingChangedOnly = changedOnly })
		})
	}
}

func wantISR(t *testing.T, b *Broker, want []int32, when string) {
	t.Helper()
	r, _ := b.Replica("t", 0)
	if got := r.ISR(); !slices.Equal(got, want) {
		t.Fatalf("%s: ISR %v, want %v", when, got, want)
	}
}

// TestISRExpiryShrinksLaggingFollower: a follower that stops fetching after an append stays
// in the ISR for replica.lag.time.max.ms (passes run meanwhile, and no append follows) and
// is removed by the first pass after it; an idle follower at the leader's LEO is never
// removed, however long nothing happens.
func TestISRExpiryShrinksLaggingFollower(t *testing.T) {
	forHousekeepingModes(t, func(t *testing.T, set func(*Config)) {
		_, _, now, _, l, f := manualPairWith(t, set)
		lag := l.cfg.ReplicaLagTimeMaxMs * int64(time.Millisecond)
		both := []int32{l.ID(), f.ID()}
		if err := produce(t, l, 1, "t", 0, batch("a", 1)).Err; err != nil {
			t.Fatal(err)
		}
		fetchRound(t, f, l) // the record
		fetchRound(t, f, l) // at the leader's LEO
		for k := 0; k < 4; k++ {
			*now += 2 * lag
			l.MaybeShrinkISRs()
		}
		wantISR(t, l, both, "follower at the LEO, idle for 8 x replica.lag.time.max.ms")

		fetchRound(t, f, l) // caught up now
		if err := produce(t, l, 1, "t", 0, batch("b", 1)).Err; err != nil {
			t.Fatal(err)
		}
		l.MaybeShrinkISRs()
		*now += lag / 2
		l.MaybeShrinkISRs()
		*now += lag - lag/2
		l.MaybeShrinkISRs()
		wantISR(t, l, both, "follower behind for exactly replica.lag.time.max.ms")
		*now += int64(time.Millisecond)
		l.MaybeShrinkISRs()
		wantISR(t, l, []int32{l.ID()}, "follower behind for longer than replica.lag.time.max.ms")
	})
}

// TestISRExpiryFollowerMovingBack: a follower at the leader's LEO whose next fetch offset is
// lower (it truncated) is behind from then on, without any append or ISR change, and is
// removed once replica.lag.time.max.ms passed since it was last caught up.
func TestISRExpiryFollowerMovingBack(t *testing.T) {
	forHousekeepingModes(t, func(t *testing.T, set func(*Config)) {
		_, _, now, _, l, f := manualPairWith(t, set)
		lag := l.cfg.ReplicaLagTimeMaxMs * int64(time.Millisecond)
		if err := produce(t, l, 1, "t", 0, batch("a", 2)).Err; err != nil {
			t.Fatal(err)
		}
		fetchRound(t, f, l)
		fetchRound(t, f, l)
		r, _ := l.Replica("t", 0)
		if got := r.FollowerLEO(f.ID()); got != r.LEO() {
			t.Fatalf("follower LEO %d, want the leader's %d", got, r.LEO())
		}
		l.MaybeShrinkISRs() // visits the appended partition: nothing behind
		req := &FetchRequest{ReplicaID: f.ID(), ReplicaEpoch: -1, MaxBytes: 1 << 20, Partitions: []FetchPartition{{
			Topic: "t", Partition: 0, FetchOffset: r.LEO() - 1, CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20,
		}}}
		l.Fetch(context.Background(), req)
		for i := range req.Partitions {
			if err := req.Partitions[i].Err; err != nil {
				t.Fatal(err)
			}
			req.Partitions[i].Records.Release()
		}
		*now += lag
		l.MaybeShrinkISRs()
		wantISR(t, l, []int32{l.ID(), f.ID()}, "follower moved back, replica.lag.time.max.ms ago")
		*now += int64(time.Millisecond)
		l.MaybeShrinkISRs()
		wantISR(t, l, []int32{l.ID()}, "follower moved back, longer than replica.lag.time.max.ms ago")
	})
}

// TestHousekeepingVisitsOnlyChanged: with changed.only, a pass after nothing changed visits no
// partition, and an append marks its partition for both passes.
func TestHousekeepingVisitsOnlyChanged(t *testing.T) {
	_, _, now, _, l, f := manualPairWith(t, func(c *Config) { c.HousekeepingChangedOnly = true })
	if err := produce(t, l, 1, "t", 0, batch("a", 1)).Err; err != nil {
		t.Fatal(err)
	}
	fetchRound(t, f, l)
	fetchRound(t, f, l)
	l.MaybeShrinkISRs()
	if err := l.WriteHWCheckpoint(); err != nil {
		t.Fatal(err)
	}
	*now += int64(time.Hour)
	if got := l.isrSet.take(nil); len(got) != 0 {
		t.Fatalf("ISR expiry would visit %d partitions after nothing changed, want 0", len(got))
	}
	if got := l.ckptSet.take(nil); len(got) != 0 {
		t.Fatalf("HW checkpoint would visit %d partitions after nothing changed, want 0", len(got))
	}
	if err := produce(t, l, 1, "t", 0, batch("b", 1)).Err; err != nil {
		t.Fatal(err)
	}
	if got := l.isrSet.take(nil); len(got) != 1 {
		t.Fatalf("ISR expiry would visit %d partitions after an append, want 1", len(got))
	}
}

// TestHWCheckpointFollowsChanges: the checkpoint file holds each replica's current HW after
// every write, on the leader and the follower, and loses a deleted topic's entries.
func TestHWCheckpointFollowsChanges(t *testing.T) {
	forHousekeepingModes(t, func(t *testing.T, set func(*Config)) {
		ctrl, _, _, deliver, l, f := manualPairWith(t, set)
		check := func(when string) {
			t.Helper()
			for _, b := range []*Broker{l, f} {
				if err := b.WriteHWCheckpoint(); err != nil {
					t.Fatal(err)
				}
				hws, _, err := readHWCheckpoint(b.fs, filepath.Join(b.cfg.DataDir, HWCheckpointFile))
				if err != nil {
					t.Fatal(err)
				}
				want := map[tp]int64{}
				for _, h := range b.allReplicas() {
					want[h.key] = h.r.HW()
				}
				if fmt.Sprint(hws) != fmt.Sprint(want) {
					t.Fatalf("%s: broker %d checkpoint %v, want %v", when, b.ID(), hws, want)
				}
			}
		}
		check("created")
		if _, err := ctrl.CreateTopic("u", 2, 2, nil); err != nil {
			t.Fatal(err)
		}
		deliver()
		check("second topic")
		for k := 0; k < 3; k++ {
			if err := produce(t, l, 1, "t", 0, batch("a", 1+k)).Err; err != nil {
				t.Fatal(err)
			}
			fetchRound(t, f, l)
			fetchRound(t, f, l)
			check(fmt.Sprintf("after append %d", k))
			check(fmt.Sprintf("after append %d, idle", k))
		}
		if r, _ := f.Replica("t", 0); r.HW() == 0 {
			t.Fatal("the follower's HW did not advance")
		}
		if err := ctrl.DeleteTopic("u"); err != nil {
			t.Fatal(err)
		}
		deliver()
		check("topic u deleted")
	})
}
