package partition

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func leoMap(m map[int32]int64) func(int32) int64 {
	return func(id int32) int64 {
		if v, ok := m[id]; ok {
			return v
		}
		return -1
	}
}

// TestHighWatermark: the leader's HW rule, which Replica.computeHW applies to its snapshot.
// The first cases are the worked examples of the seed articles.
func TestHighWatermark(t *testing.T) {
	type follower struct {
		leo int64
		// inMaximal: in the committed ISR or being added; joining: caught up and eligible.
		inMaximal, joining bool
	}
	isr := func(leos ...int64) []follower {
		out := make([]follower, len(leos))
		for i, l := range leos {
			out[i] = follower{leo: l, inMaximal: true}
		}
		return out
	}
	tests := []struct {
		name      string
		leaderLEO int64
		isrSize   int
		followers []follower
		minISR    int
		wantHW    int64
		wantOK    bool
	}{
		// 002: Leader LEO 10, Follower-1 9, Follower-2 7 -> HW = min(10, 9, 7) = 7.
		{"doc 10/9/7", 10, 3, isr(9, 7), 1, 7, true},
		// 003: Leader 5, Follower1 4, Follower2 3 -> HW 3.
		{"doc 5/4/3", 5, 3, isr(4, 3), 1, 3, true},
		// 000: leader 10, A 9, B 5 -> HW 5 (consumers read up to offset 4).
		{"doc 10/9/5", 10, 3, isr(9, 5), 2, 5, true},
		{"out-of-ISR follower ignored", 10, 2, append(isr(9), follower{leo: 1}), 2, 9, true},
		{"leader alone", 10, 1, nil, 1, 10, true},
		{"leader is the minimum", 4, 2, isr(9), 1, 4, true},
		{"unknown follower LEO", 10, 2, isr(-1), 1, -1, true},
		{"strict min ISR", 10, 1, nil, 2, 0, false},
		{"min ISR met exactly", 10, 2, isr(10), 2, 10, true},
		// KIP-497: an expansion in flight counts before the controller accepted it.
		{"maximal ISR member holds it back", 10, 2, []follower{{leo: 10, inMaximal: true}, {leo: 6, inMaximal: true}}, 2, 6, true},
		// shouldWaitForReplicaToJoinIsr: a caught-up follower about to join holds it back.
		{"joining follower holds it back", 10, 2, []follower{{leo: 10, inMaximal: true}, {leo: 8, joining: true}}, 2, 8, true},
		{"out-of-sync follower does not", 10, 2, []follower{{leo: 10, inMaximal: true}, {leo: 3}}, 2, 10, true},
		// The frozen HW looks at the committed ISR only, not the maximal one.
		{"pending expansion does not unfreeze", 10, 1, []follower{{leo: 10, inMaximal: true}}, 2, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hw, ok := HighWatermark(tc.leaderLEO, tc.isrSize, tc.minISR, len(tc.followers),
				func(i int) int64 { return tc.followers[i].leo },
				func(i int) bool {
					if tc.followers[i].leo >= tc.leaderLEO {
						t.Errorf("holdsBack asked about follower %d, which is not behind", i)
					}
					return tc.followers[i].inMaximal || tc.followers[i].joining
				})
			if ok != tc.wantOK || (ok && hw != tc.wantHW) {
				t.Fatalf("HighWatermark = (%d, %v), want (%d, %v)", hw, ok, tc.wantHW, tc.wantOK)
			}
		})
	}
}

func TestCaughtUpUpdate(t *testing.T) {
	s := int64(time.Second)
	tests := []struct {
		name                                  string
		fetch, leoNow, lastLEO, lastT, caught int64
		now, want                             int64
	}{
		{"fetch reaches LEO now", 100, 100, 90, 1 * s, 0, 2 * s, 2 * s},
		{"fetch reaches previous LEO", 90, 100, 90, 1 * s, 0, 2 * s, 1 * s},
		{"behind both", 80, 100, 90, 1 * s, 0, 2 * s, 0},
		{"never moves back", 100, 100, 90, 1 * s, 5 * s, 2 * s, 5 * s},
		{"no previous fetch", 80, 100, -1, 0, 0, 2 * s, 0},
		// 002: t=30s follower LEO 100, leader LEO 100500, zero fetches: the
		// last caught-up time stays at t=0.
		{"doc 100 vs 100500", 100, 100500, 100500, 29 * s, 0, 30 * s, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := CaughtUpUpdate(tc.fetch, tc.leoNow, tc.lastLEO, tc.lastT, tc.caught, tc.now)
			if got != tc.want {
				t.Fatalf("CaughtUpUpdate = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestCaughtUp: Kafka's isCaughtUp, the rule ISR expiration (shrinkISR) and the HW's
// joining-follower hold-back apply.
func TestCaughtUp(t *testing.T) {
	lag := int64(30 * time.Second)
	for _, tc := range []struct {
		leo, leaderLEO, caught, now int64
		want                        bool
	}{
		{5, 10, 0, lag - 1, true},
		{5, 10, 0, lag, true}, // exactly the limit is still in sync
		{5, 10, 0, lag + 1, false},
		{5, 10, int64(time.Second), lag + int64(time.Second), true},
		{10, 10, 0, 10 * lag, true}, // at the leader's LEO: caught up whatever the time (KAFKA-7152)
		{-1, 10, 0, lag + 1, false},
	} {
		if got := CaughtUp(tc.leo, tc.leaderLEO, tc.caught, tc.now, lag); got != tc.want {
			t.Errorf("CaughtUp(leo %d, leader %d, caught %d, now %d) = %v, want %v", tc.leo, tc.leaderLEO, tc.caught, tc.now, got, tc.want)
		}
	}
}

func TestShrinkISR(t *testing.T) {
	for _, tc := range []struct {
		isr, behind, keep, out []int32
		self                   int32
	}{
		{isr: []int32{0, 1, 2}, self: 0, keep: []int32{0, 1, 2}},
		{isr: []int32{0, 1, 2}, self: 0, behind: []int32{2}, keep: []int32{0, 1}, out: []int32{2}},
		{isr: []int32{2, 0, 1}, self: 1, behind: []int32{2, 0}, keep: []int32{1}, out: []int32{2, 0}},
		// The leader never leaves, even if the callback would say so.
		{isr: []int32{0, 1}, self: 0, behind: []int32{0}, keep: []int32{0, 1}},
	} {
		asked := []int32{}
		keep, out := ShrinkISR(tc.isr, tc.self, func(id int32) bool {
			asked = append(asked, id)
			return !slices.Contains(tc.behind, id)
		})
		if !slices.Equal(keep, tc.keep) || !slices.Equal(out, tc.out) {
			t.Errorf("ShrinkISR(%v, self %d, behind %v) = (%v, %v), want (%v, %v)", tc.isr, tc.self, tc.behind, keep, out, tc.keep, tc.out)
		}
		if slices.Contains(asked, tc.self) {
			t.Errorf("ShrinkISR asked about the leader %d", tc.self)
		}
	}
}

func TestEffectiveMinISRRule(t *testing.T) {
	for _, tc := range []struct{ minISR, rf, want int }{
		{2, 3, 2}, {3, 3, 3}, {3, 2, 2}, {1, 1, 1}, {2, 0, 2},
	} {
		if got := EffectiveMinISR(tc.minISR, tc.rf); got != tc.want {
			t.Errorf("EffectiveMinISR(%d, rf %d) = %d, want %d", tc.minISR, tc.rf, got, tc.want)
		}
	}
}

func TestFollowerHW(t *testing.T) {
	for _, tc := range []struct{ leaderHW, leo, logStart, want int64 }{
		{7, 10, 0, 7}, // the leader's HW
		{10, 9, 0, 9}, // capped by the follower's LEO
		{3, 10, 5, 5}, // raised to the log start
		{0, 0, 0, 0},  // empty log
		{12, 12, 12, 12},
	} {
		if got := FollowerHW(tc.leaderHW, tc.leo, tc.logStart); got != tc.want {
			t.Errorf("FollowerHW(leader HW %d, LEO %d, log start %d) = %d, want %d", tc.leaderHW, tc.leo, tc.logStart, got, tc.want)
		}
	}
}

func TestFetchEnd(t *testing.T) {
	if got := FetchEnd(false, false, 7, 5, 10); got != 7 {
		t.Errorf("read_uncommitted consumer FetchEnd = %d, want the HW 7", got)
	}
	if got := FetchEnd(false, true, 7, 5, 10); got != 5 {
		t.Errorf("read_committed consumer FetchEnd = %d, want the LSO 5", got)
	}
	if got := FetchEnd(true, true, 7, 5, 10); got != 10 {
		t.Errorf("replica FetchEnd = %d, want the LEO 10", got)
	}
}

func TestCanJoinISR(t *testing.T) {
	for _, tc := range []struct {
		leo, hw, start int64
		want           bool
	}{
		{10, 10, 5, true},
		{9, 10, 5, false},  // below HW
		{10, 7, 12, false}, // below the current epoch's start
		{12, 7, 12, true},
		{10, 7, -1, false}, // unknown epoch start
	} {
		if got := CanJoinISR(tc.leo, tc.hw, tc.start); got != tc.want {
			t.Errorf("CanJoinISR(%d, %d, %d) = %v, want %v", tc.leo, tc.hw, tc.start, got, tc.want)
		}
	}
}

func TestTruncationOffset(t *testing.T) {
	// Follower cache: epoch 0 at 0, epoch 2 at 50, epoch 4 at 80; LEO 100, HW 60.
	c := NewEpochCache()
	for _, e := range []EpochEntry{{0, 0}, {2, 50}, {4, 80}} {
		c.Assign(e.Epoch, e.StartOffset)
	}
	end := func(e int32) (int32, int64) { return c.EndOffsetFor(e, 100) }
	tests := []struct {
		name     string
		le       int32
		lend     int64
		want     Truncation
		followHW int64
	}{
		{"same epoch, leader shorter", 4, 90, Truncation{Offset: 90, Done: true}, 60},
		{"same epoch, leader longer", 4, 150, Truncation{Offset: 100, Done: true}, 60},
		{"leader never had 4, has 2 up to 70", 2, 70, Truncation{Offset: 70, Done: true}, 60},
		{"leader's epoch 2 longer than ours", 2, 95, Truncation{Offset: 80, Done: true}, 60},
		{"leader answers 3 which we lack", 3, 85, Truncation{Offset: 80, Done: false}, 60},
		{"leader answers 1 which we lack", 1, 40, Truncation{Offset: 50, Done: false}, 60},
		{"undefined -> HW", -1, -1, Truncation{Offset: 60, Done: true, Fallback: true}, 60},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := TruncationOffset(tc.le, tc.lend, 100, tc.followHW, end)
			if got != tc.want {
				t.Fatalf("TruncationOffset = %+v, want %+v", got, tc.want)
			}
		})
	}
	// A follower with no epoch <= the answer truncates to min(end, LEO).
	c2 := NewEpochCache()
	c2.Assign(5, 10)
	got := TruncationOffset(3, 7, 20, 0, func(e int32) (int32, int64) { return c2.EndOffsetFor(e, 20) })
	if want := (Truncation{Offset: 7, Done: true}); got != want {
		t.Fatalf("older-than-cache answer: got %+v, want %+v", got, want)
	}
}

// TestLeaderBehindRetriesSoon: a follower told UNKNOWN_LEADER_EPOCH (the leader has not applied
// the epoch the controller committed) asks again after LeaderBehindRetryNs, not the whole
// replica.fetch.backoff.ms; every other error waits the backoff, and a backoff shorter than
// LeaderBehindRetryNs is kept.
func TestLeaderBehindRetriesSoon(t *testing.T) {
	const now, backoff = int64(1e9), int64(1e9)
	for _, tc := range []struct {
		name string
		err  error
		wait int64
	}{
		{"unknown leader epoch", kerr.UnknownLeaderEpoch, LeaderBehindRetryNs},
		{"wrapped", fmt.Errorf("partition t-0: %w", kerr.UnknownLeaderEpoch), LeaderBehindRetryNs},
		{"not leader", kerr.NotLeaderForPartition, backoff},
		{"unknown partition", kerr.UnknownTopicOrPartition, backoff},
	} {
		var fs FetchState
		fs.OnFetchError(tc.err, now, backoff)
		var es FetchState
		es.OnEpochAnswer(nil, 3, -1, -1, tc.err, now, backoff)
		if fs.DelayedUntil != now+tc.wait || es.DelayedUntil != now+tc.wait {
			t.Errorf("%s: fetch error delays %d ns, epoch answer %d ns; want %d", tc.name, fs.DelayedUntil-now, es.DelayedUntil-now, tc.wait)
		}
	}
	var fs FetchState
	fs.OnFetchError(kerr.UnknownLeaderEpoch, now, 5e6)
	if fs.DelayedUntil != now+5e6 {
		t.Errorf("a 5 ms backoff became %d ns", fs.DelayedUntil-now)
	}
}
