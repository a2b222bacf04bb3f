package partition

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// These tests pin the rules behind "an acks=all acknowledged record survives", one per
// way the replica could break it.

// leaderWithISR is a leader on broker 0 of replicas 0..rf-1 with the given ISR.
func leaderWithISR(t *testing.T, rf int, isr []int32, cfg Config) (*Replica, *fakeClock) {
	t.Helper()
	clk := &fakeClock{ns: 1e12}
	cfg.Now = clk.Now
	r, err := newReplica("t", 0, 0, newMemLog(), "", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var reps []int32
	for i := 0; i < rf; i++ {
		reps = append(reps, int32(i))
	}
	if err := r.MakeLeader(controller.PartitionState{Topic: "t", Leader: 0, Replicas: reps, ISR: isr}); err != nil {
		t.Fatal(err)
	}
	return r, clk
}

func fetch(t *testing.T, r *Replica, f int32, off int64) bool {
	t.Helper()
	join, err := r.UpdateFollower(f, -1, off, 0)
	if err != nil {
		t.Fatalf("UpdateFollower(%d, %d): %v", f, off, err)
	}
	return join
}

// commit applies an accepted proposal as the controller's answer would.
func commit(r *Replica, p *ISRProposal) {
	st := p.Base
	st.ISR = slices.Clone(p.ISR)
	st.PartitionEpoch++
	r.ApplyISR(st)
}

// TestMaximalISRHoldsTheHW: a follower whose ISR expansion is in flight counts in the HW
// (KIP-497): the HW cannot pass its LEO before the controller commits the change, so when
// it does, the new member holds [log start, HW). Before, the HW used the committed ISR
// only and a joiner could enter the ISR with LEO < HW.
func TestMaximalISRHoldsTheHW(t *testing.T) {
	r, _ := leaderWithISR(t, 3, []int32{0, 1}, Config{MinInsyncReplicas: 1})
	r.AppendAsLeader(batches(5), -1)
	fetch(t, r, 1, 5)
	if !fetch(t, r, 2, 5) { // LEO 5 >= HW 5: may join
		t.Fatal("follower 2 at the HW may not join")
	}
	p := r.PrepareExpand(2)
	if p == nil || !slices.Equal(p.ISR, []int32{0, 1, 2}) || !slices.Equal(r.MaximalISR(), []int32{0, 1, 2}) {
		t.Fatalf("proposal %+v, maximal ISR %v", p, r.MaximalISR())
	}
	// Meanwhile more records; follower 1 has them, follower 2 not yet.
	r.AppendAsLeader(batches(5), -1)
	fetch(t, r, 1, 10)
	if r.HW() != 5 {
		t.Fatalf("HW %d while follower 2 (LEO 5) is joining; want 5", r.HW())
	}
	commit(r, p)
	if got := r.ISR(); !slices.Equal(got, []int32{0, 1, 2}) || r.HW() > 5 {
		t.Fatalf("after commit: ISR %v HW %d", got, r.HW())
	}
	fetch(t, r, 2, 10)
	if r.HW() != 10 {
		t.Fatalf("HW %d once follower 2 caught up, want 10", r.HW())
	}
}

// TestExpansionRechecksTheJoinRule: a join proposed on one fetch is checked again when it is
// sent: if the HW moved past the follower meanwhile, nothing is proposed.
func TestExpansionRechecksTheJoinRule(t *testing.T) {
	r, clk := leaderWithISR(t, 3, []int32{0, 1}, Config{MinInsyncReplicas: 1, ReplicaLagTimeMaxMs: 1000})
	r.AppendAsLeader(batches(5), -1)
	fetch(t, r, 1, 5)
	if !fetch(t, r, 2, 5) {
		t.Fatal("follower 2 may not join")
	}
	r.AppendAsLeader(batches(5), -1)
	clk.ns += 2e9      // follower 2 no longer caught up: it stops holding the HW back
	fetch(t, r, 1, 10) // HW 10, follower 2 still at 5
	if r.HW() != 10 {
		t.Fatalf("HW %d, want 10", r.HW())
	}
	if p := r.PrepareExpand(2); p != nil {
		t.Fatalf("follower 2 at LEO 5 < HW 10 proposed for the ISR: %+v", p)
	}
	if r.PendingISR() != nil || !slices.Equal(r.MaximalISR(), []int32{0, 1}) {
		t.Fatalf("withdrawn change left pending %v maximal %v", r.PendingISR(), r.MaximalISR())
	}
}

// TestISRChangeLinearizableWithHW races HW advances (a fast follower's fetches and
// appends) against expansions of a slow follower: whenever the slow follower is in the
// committed ISR, the HW is at most its LEO. Before the snapshot drain an HW computed from
// the ISR without the joiner could be published after it joined.
func TestISRChangeLinearizableWithHW(t *testing.T) {
	for _, mode := range []string{HWUpdateAtomic, HWUpdateMutex} {
		t.Run(mode, func(t *testing.T) {
			r, _ := leaderWithISR(t, 3, []int32{0, 1}, Config{MinInsyncReplicas: 1, HWUpdate: mode})
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // producer + fast follower
				defer wg.Done()
				for !stop.Load() {
					info, err := r.AppendAsLeader(batches(1), 1)
					if err != nil {
						t.Error(err)
						return
					}
					if _, err := r.UpdateFollower(1, -1, info.LastOffset+1, 0); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			for round := 0; round < 300 && !t.Failed(); round++ {
				leo := r.LEO()
				join, err := r.UpdateFollower(2, -1, leo, 0) // the slow follower reaches the LEO it read
				if err != nil {
					t.Fatal(err)
				}
				if !join {
					continue
				}
				p := r.PrepareExpand(2)
				if p == nil {
					continue // the HW passed it meanwhile: correctly refused
				}
				commit(r, p)
				if hw, f2 := r.HW(), r.FollowerLEO(2); slices.Contains(r.ISR(), int32(2)) && hw > f2 {
					t.Fatalf("round %d: follower 2 joined the ISR with LEO %d < HW %d", round, f2, hw)
				}
				// Take it out again for the next round.
				st := r.State()
				st.ISR = []int32{0, 1}
				st.PartitionEpoch++
				r.ApplyISR(st)
			}
			stop.Store(true)
			wg.Wait()
		})
	}
}

// TestAcksAllTiedToTheAppendEpoch: a batch appended in one leadership term and truncated
// away is not acknowledged because a later term's HW passes its offset.
func TestAcksAllTiedToTheAppendEpoch(t *testing.T) {
	r, _ := leaderWithISR(t, 2, []int32{0, 1}, Config{MinInsyncReplicas: 2})
	info, err := r.AppendAsLeader(batches(5), -1) // offsets 0..4, epoch 0, not committed
	if err != nil || info.LeaderEpoch != 0 {
		t.Fatalf("append %+v %v", info, err)
	}
	st := r.State()
	st.Leader, st.LeaderEpoch = 1, 1
	if err := r.MakeFollower(st); err != nil {
		t.Fatal(err)
	}
	if err := r.TruncateTo(0); err != nil { // the new leader never had them
		t.Fatal(err)
	}
	st.Leader, st.LeaderEpoch = 0, 2
	if err := r.MakeLeader(st); err != nil {
		t.Fatal(err)
	}
	r.AppendAsLeader(batches(10), -1)
	fetch(t, r, 1, 10)
	if r.HW() != 10 {
		t.Fatalf("HW %d, want 10", r.HW())
	}
	done, err := r.CheckHW(info.LastOffset, info.LeaderEpoch)
	if !done || !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("the epoch-0 batch after its term ended: done %v err %v, want NOT_LEADER_OR_FOLLOWER", done, err)
	}
	// A batch the old term committed before it ended is acknowledged.
	r2, _ := leaderWithISR(t, 2, []int32{0, 1}, Config{MinInsyncReplicas: 2})
	info2, _ := r2.AppendAsLeader(batches(3), -1)
	fetch(t, r2, 1, 3)
	st2 := r2.State()
	st2.Leader, st2.LeaderEpoch = 1, 1
	r2.MakeFollower(st2)
	if done, err := r2.CheckHW(info2.LastOffset, info2.LeaderEpoch); !done || err != nil {
		t.Fatalf("committed before the demotion: done %v err %v", done, err)
	}
	// ... even once the follower has truncated it (the new leader lost it in a failure
	// after the commit): the answer is the old term's, not the log's now.
	if err := r2.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	if done, err := r2.CheckHW(info2.LastOffset, info2.LeaderEpoch); !done || err != nil {
		t.Fatalf("committed before the demotion, truncated since: done %v err %v", done, err)
	}
}

// TestMakeFollowerDrainsFollowerUpdates: no leader-side HW advance lands after MakeFollower
// returns (the demotion waits for running UpdateFollower calls).
func TestMakeFollowerDrainsFollowerUpdates(t *testing.T) {
	for round := 0; round < 200; round++ {
		r, _ := leaderWithISR(t, 2, []int32{0, 1}, Config{MinInsyncReplicas: 1})
		r.AppendAsLeader(batches(1000), 1)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(1); off <= 1000; off++ {
				if _, err := r.UpdateFollower(1, -1, off, 0); err != nil {
					return // demoted
				}
			}
		}()
		st := r.State()
		st.Leader, st.LeaderEpoch = 1, 1
		if err := r.MakeFollower(st); err != nil {
			t.Fatal(err)
		}
		hw := r.HW()
		wg.Wait()
		if got := r.HW(); got != hw {
			t.Fatalf("round %d: HW moved from %d to %d after MakeFollower returned", round, hw, got)
		}
	}
}

// TestIdleCaughtUpFollowerStaysInISR: a follower at the leader's LEO is caught up however
// long ago it fetched (Kafka's isCaughtUp, KAFKA-7152); one behind it leaves after
// replica.lag.time.max.ms.
func TestIdleCaughtUpFollowerStaysInISR(t *testing.T) {
	r, clk := leaderWithISR(t, 3, []int32{0, 1, 2}, Config{MinInsyncReplicas: 1, ReplicaLagTimeMaxMs: 1000})
	r.AppendAsLeader(batches(5), 1)
	fetch(t, r, 1, 5)
	fetch(t, r, 2, 5)
	clk.ns += 60e9 // a minute without appends or fetches
	if out := r.OutOfSyncReplicas(); out != nil {
		t.Fatalf("idle followers at the leader's LEO out of sync: %v", out)
	}
	r.AppendAsLeader(batches(1), 1)
	fetch(t, r, 1, 6)
	clk.ns += 1e9 + 1
	if out := r.OutOfSyncReplicas(); !slices.Equal(out, []int32{2}) {
		t.Fatalf("out of sync %v, want [2] (behind the LEO for more than the lag time)", out)
	}
}

// TestCatchingUpFollowerIsNotStarved: under steady appends a follower outside the ISR whose
// fetches always trail the LEO by one still joins: while it is caught up by time and
// eligible, the HW waits for it (Kafka's shouldWaitForReplicaToJoinIsr). Before, the HW
// followed the ISR alone and raced ahead of it forever.
func TestCatchingUpFollowerIsNotStarved(t *testing.T) {
	r, clk := leaderWithISR(t, 3, []int32{0, 1}, Config{MinInsyncReplicas: 1, ReplicaLagTimeMaxMs: 10000})
	r.AppendAsLeader(batches(10), 1)
	fetch(t, r, 2, 0)
	joined := false
	for step := 0; step < 50 && !joined; step++ {
		clk.ns += 5e6
		off := r.LEO() // follower 2's fetch asks for what the leader had at its last response
		r.AppendAsLeader(batches(1), 1)
		fetch(t, r, 1, r.LEO()) // the ISR follower is always current
		if fetch(t, r, 2, off) {
			joined = r.PrepareExpand(2) != nil
		}
	}
	if !joined {
		t.Fatalf("follower 2 never joined: HW %d, its LEO %d, leader LEO %d", r.HW(), r.FollowerLEO(2), r.LEO())
	}
}

// TestEffectiveMinISR: min.insync.replicas above the replication factor is capped by it
// (Kafka >= 3.7): RF 2 with min.insync.replicas 3 still commits with both replicas.
func TestEffectiveMinISR(t *testing.T) {
	r, _ := leaderWithISR(t, 2, []int32{0, 1}, Config{MinInsyncReplicas: 3})
	info, err := r.AppendAsLeader(batches(2), -1)
	if err != nil {
		t.Fatalf("acks=all with ISR 2 = RF, min.insync.replicas 3: %v", err)
	}
	fetch(t, r, 1, 2)
	if done, err := r.CheckHW(info.LastOffset, info.LeaderEpoch); !done || err != nil || r.HW() != 2 {
		t.Fatalf("HW %d done %v err %v; want the HW to advance to 2", r.HW(), done, err)
	}
	r.SetMinInsyncReplicas(1)
	st := r.State()
	st.ISR = []int32{0}
	st.PartitionEpoch++
	r.ApplyISR(st)
	if _, err := r.AppendAsLeader(batches(1), -1); err != nil {
		t.Fatalf("min.insync.replicas lowered to 1 at run time: %v", err)
	}
}

// TestUnreadableEpochCheckpointIsRebuilt: a leader-epoch checkpoint that does not parse is
// rebuilt from the batches' partitionLeaderEpoch, and reported.
func TestUnreadableEpochCheckpointIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	l := newMemLog()
	r, err := newReplica("t", 0, 0, l, dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	r.MakeLeader(controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 2, Replicas: []int32{0}, ISR: []int32{0}})
	r.AppendAsLeader(batches(3), 1)
	st := r.State()
	st.LeaderEpoch = 5
	r.MakeLeader(st)
	r.AppendAsLeader(batches(2), 1)
	if err := os.WriteFile(filepath.Join(dir, EpochCheckpointFile), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r2, err := newReplica("t", 0, 0, l.reopen(), dir, Config{})
	if err != nil {
		t.Fatalf("a corrupt leader-epoch checkpoint stops the replica: %v", err)
	}
	if got := r2.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{2, 0}, {5, 3}}) || r2.EpochCacheRebuilt() == "" {
		t.Fatalf("rebuilt epochs %v (%q), want [{2 0} {5 3}]", got, r2.EpochCacheRebuilt())
	}
	if _, lines, err := log.ReadCheckpoint(nil, filepath.Join(dir, EpochCheckpointFile)); err != nil || len(lines) != 2 {
		t.Fatalf("rewritten checkpoint %v %v", lines, err)
	}
}

// TestIdempotentRetryWaitsForTheHW: a retried idempotent batch (a duplicate, not appended
// again) is acknowledged when this leader's HW passes the original, with the current term's
// epoch (a regression: it once carried epoch 0 and got NOT_LEADER_OR_FOLLOWER forever).
func TestIdempotentRetryWaitsForTheHW(t *testing.T) {
	r, _ := leaderWithISR(t, 2, []int32{0, 1}, Config{MinInsyncReplicas: 2})
	st := r.State()
	st.LeaderEpoch = 3
	if err := r.MakeLeader(st); err != nil {
		t.Fatal(err)
	}
	b := pidBatch(7, 0, 0, 3, "x")
	first, err := r.AppendAsLeader(slices.Clone(b), -1)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := r.AppendAsLeader(slices.Clone(b), -1)
	if err != nil || dup.Records != 0 || dup.LastOffset != first.LastOffset || dup.LeaderEpoch != 3 {
		t.Fatalf("retry: %+v %v; want the original offsets with epoch 3", dup, err)
	}
	if done, _ := r.CheckHW(dup.LastOffset, dup.LeaderEpoch); done {
		t.Fatal("retry acknowledged before the HW passed it")
	}
	fetch(t, r, 1, first.LastOffset+1)
	if done, err := r.CheckHW(dup.LastOffset, dup.LeaderEpoch); !done || err != nil {
		t.Fatalf("retry after the HW passed it: done %v err %v", done, err)
	}
}

// TestAcksAllThroughAnISRDip pins Kafka's DelayedProduce (Partition.checkEnoughReplicasReachOffset):
// an acks=all batch appended while the ISR met min.insync.replicas keeps waiting while the ISR
// dips below it (the HW is frozen, not the wait); when the follower rejoins and catches up, the
// HW passes the batch and the answer is success. Once the HW passed a batch, the answer is
// NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is below the minimum at that moment.
func TestAcksAllThroughAnISRDip(t *testing.T) {
	t.Run("dip then rejoin commits", func(t *testing.T) {
		r, clk := leaderWithISR(t, 3, []int32{0, 1, 2}, Config{MinInsyncReplicas: 2, ReplicaLagTimeMaxMs: 1000})
		info, err := r.AppendAsLeader(batches(2), -1)
		if err != nil {
			t.Fatal(err)
		}
		clk.ns += 2e9 // both followers lag past replica.lag.time.max.ms and fall out
		st := r.State()
		st.ISR, st.PartitionEpoch = []int32{0}, st.PartitionEpoch+1
		r.ApplyISR(st) // ISR 1 < min.insync.replicas 2
		if done, err := r.CheckHW(info.LastOffset, info.LeaderEpoch); done {
			t.Fatalf("the ISR dip answered the wait: %v; want it to go on while the HW is below the batch", err)
		}
		if _, err := r.AppendAsLeader(batches(1), -1); !errors.Is(err, kerr.NotEnoughReplicas) {
			t.Fatalf("a new acks=all append below min.insync.replicas: %v, want NOT_ENOUGH_REPLICAS", err)
		}
		if fetch(t, r, 1, info.LastOffset+1) { // caught up: may join
			commit(r, r.PrepareExpand(1))
		} else {
			t.Fatal("follower 1 caught up but may not join")
		}
		done, err := r.CheckHW(info.LastOffset, info.LeaderEpoch)
		if !done || err != nil || r.HW() != info.LastOffset+1 {
			t.Fatalf("after the rejoin: done %v err %v HW %d, want success with HW %d", done, err, r.HW(), info.LastOffset+1)
		}
	})
	t.Run("committed then ISR below min", func(t *testing.T) {
		r, _ := leaderWithISR(t, 3, []int32{0, 1, 2}, Config{MinInsyncReplicas: 2})
		info, err := r.AppendAsLeader(batches(2), -1)
		if err != nil {
			t.Fatal(err)
		}
		fetch(t, r, 1, info.LastOffset+1)
		fetch(t, r, 2, info.LastOffset+1)
		st := r.State()
		st.ISR, st.PartitionEpoch = []int32{0}, st.PartitionEpoch+1
		r.ApplyISR(st)
		done, err := r.CheckHW(info.LastOffset, info.LeaderEpoch)
		if !done || !errors.Is(err, kerr.NotEnoughReplicasAfterAppend) {
			t.Fatalf("HW passed, ISR now below min: done %v err %v, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", done, err)
		}
	})
}

// TestPendingExpansionDoesNotUnfreezeHW: the frozen HW (the committed ISR below the effective
// min.insync.replicas, KAFKA-15583) looks at the committed ISR, not the maximal one: while
// the expansion that brings the ISR back to min.insync.replicas is pending at the controller,
// the HW stays where it is; once the controller accepted it, the HW advances.
func TestPendingExpansionDoesNotUnfreezeHW(t *testing.T) {
	r, _ := leaderWithISR(t, 2, []int32{0}, Config{MinInsyncReplicas: 2})
	if _, err := r.AppendAsLeader(batches(3), 1); err != nil {
		t.Fatal(err)
	}
	if !fetch(t, r, 1, 3) {
		t.Fatal("follower 1 at the leader's LEO may not join")
	}
	p := r.PrepareExpand(1)
	if p == nil {
		t.Fatal("PrepareExpand(1) = nil")
	}
	fetch(t, r, 1, 3)
	if hw := r.HW(); hw != 0 {
		t.Fatalf("HW %d with the committed ISR %v below min.insync.replicas 2 (maximal %v): want 0", hw, r.ISR(), r.MaximalISR())
	}
	commit(r, p)
	fetch(t, r, 1, 3)
	if hw := r.HW(); hw != 3 {
		t.Fatalf("HW %d after the expansion was accepted (ISR %v): want 3", hw, r.ISR())
	}
}
