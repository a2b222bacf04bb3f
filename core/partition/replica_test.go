package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

func oneBatch(n int) []byte {
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{Value: []byte("v")}
	}
	return records.AppendBatch(nil, 0, 0, 0, recs)
}

func FuzzAppendAsFollower(f *testing.F) {
	f.Add(oneBatch(2))
	f.Add(append(oneBatch(1), 0xff, 0x00))
	f.Add(records.AppendBatch(nil, 0, 5, 0, []records.Record{{Key: []byte("k"), Value: []byte("v")}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, blob []byte) {
		l := newMemLog()
		r, err := newReplica("t", 0, 1, l, "", Config{})
		if err != nil {
			t.Fatal(err)
		}
		r.MakeFollower(controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 0, Replicas: []int32{0, 1}, ISR: []int32{0, 1}})
		_, err = r.AppendAsFollower(blob, 1<<40)
		if err != nil && l.LEO() != 0 {
			t.Fatalf("failed append left LEO %d", l.LEO())
		}
		if r.HW() > r.LEO() {
			t.Fatalf("HW %d > LEO %d", r.HW(), r.LEO())
		}
		for _, e := range r.Epochs().Entries() {
			if e.StartOffset >= r.LEO() {
				t.Fatalf("epoch entry %v at or past LEO %d", e, r.LEO())
			}
		}
	})
}

func batches(n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = records.AppendBatch(b, 0, 0, 0, []records.Record{{Value: []byte("v")}})
	}
	return b
}

// newLeader returns a leader replica on broker 0 of replicas 0..rf-1, all in
// the ISR, over an in-memory log.
func newLeader(t testing.TB, rf int, cfg Config) (*Replica, *memLog, *fakeClock) {
	t.Helper()
	clk := &fakeClock{}
	if cfg.Now == nil {
		cfg.Now = clk.Now
	}
	l := newMemLog()
	r, err := newReplica("t", 0, 0, l, "", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var reps []int32
	for i := 0; i < rf; i++ {
		reps = append(reps, int32(i))
	}
	st := controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 0, Replicas: reps, ISR: slices.Clone(reps)}
	if err := r.MakeLeader(st); err != nil {
		t.Fatal(err)
	}
	return r, l, clk
}

func wantCode(t *testing.T, err error, want *kerr.Error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %s", err, want.Message)
	}
}

// armed waits (with a deadline) until a waiter armed n's signal: an
// explicit signal that the waiting goroutine is parked on its channel path.
func waitArmed(t *testing.T, n *notifier) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !n.armed.Load() {
		if time.Now().After(deadline) {
			t.Fatal("waiter never armed the HW signal")
		}
		runtime.Gosched()
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{HWUpdate: "lockfree"}, "isrbench.hw.update"},
		{Config{TruncateMode: "log"}, "truncate mode"},
		{Config{MinInsyncReplicas: -1}, "min.insync.replicas"},
		{Config{ReplicaLagTimeMaxMs: -5}, "replica.lag.time.max.ms"},
	} {
		_, err := newReplica("t", 0, 0, newMemLog(), "", tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want mention of %q", tc.cfg, err, tc.want)
		}
	}
	r, err := newReplica("t", 0, 0, newMemLog(), "", Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Config()
	if c.MinInsyncReplicas != 1 || c.ReplicaLagTimeMaxMs != 30000 || c.HWUpdate != "atomic" || c.TruncateMode != "epoch" {
		t.Fatalf("defaults %+v", c)
	}
	if _, err := NewReplica("t", 0, 0, nil, "", Config{}); err == nil {
		t.Fatal("NewReplica(nil log) succeeded")
	}
}

func TestAppendAsLeaderErrors(t *testing.T) {
	r, l, _ := newLeader(t, 3, Config{MinInsyncReplicas: 2})
	if err := r.MakeFollower(controller.PartitionState{Topic: "t", Leader: 1, LeaderEpoch: 1, Replicas: []int32{0, 1, 2}, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	_, err := r.AppendAsLeader(oneBatch(1), 1)
	wantCode(t, err, kerr.NotLeaderForPartition)
	if err := r.MakeLeader(controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 0, Replicas: []int32{0, 1, 2}, ISR: []int32{0}}); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("stale MakeLeader: %v", err)
	}
	if err := r.MakeLeader(controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 2, Replicas: []int32{0, 1, 2}, ISR: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	_, err = r.AppendAsLeader(oneBatch(1), -1)
	wantCode(t, err, kerr.NotEnoughReplicas)
	if l.LEO() != 0 {
		t.Fatalf("rejected acks=all append wrote: LEO %d", l.LEO())
	}
	info, err := r.AppendAsLeader(oneBatch(3), 1)
	if err != nil || info.FirstOffset != 0 || info.LastOffset != 2 || info.Records != 3 {
		t.Fatalf("acks=1 append: %+v %v", info, err)
	}
	data, _ := l.Bytes(0, 3)
	h, _ := records.ParseHeader(data)
	if h.PartitionLeaderEpoch != 2 {
		t.Fatalf("batch stamped with epoch %d, want 2", h.PartitionLeaderEpoch)
	}
	if _, err := r.UpdateFollower(7, -1, 0, 0); !errors.Is(err, kerr.ReplicaNotAvailable) {
		t.Fatalf("unknown follower: %v", err)
	}
	if _, err := r.UpdateFollower(1, -1, 4, 0); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("fetch past LEO: %v", err)
	}
	if err := r.TruncateTo(0); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("TruncateTo on the leader: %v", err)
	}
	if _, err := r.AppendAsFollower(nil, 0); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("AppendAsFollower on the leader: %v", err)
	}
}

func TestWaitForHW(t *testing.T) {
	ctx := context.Background()
	t.Run("completes on HW advance", func(t *testing.T) {
		r, _, _ := newLeader(t, 3, Config{MinInsyncReplicas: 2})
		info, err := r.AppendAsLeader(oneBatch(5), -1)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.WaitForHW(ctx, info.LastOffset, r.LeaderEpoch()) }()
		waitArmed(t, &r.hwSig)
		r.UpdateFollower(1, -1, 5, 0)
		select {
		case err := <-done:
			t.Fatalf("returned with one follower of two: %v", err)
		default:
		}
		r.UpdateFollower(2, -1, 5, 0)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("WaitForHW did not return after the HW passed the offset")
		}
	})
	t.Run("timeout", func(t *testing.T) {
		r, _, _ := newLeader(t, 3, Config{})
		r.AppendAsLeader(oneBatch(1), -1)
		cctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		wantCode(t, r.WaitForHW(cctx, 0, r.LeaderEpoch()), kerr.RequestTimedOut)
	})
	t.Run("ISR below min keeps waiting until the timeout", func(t *testing.T) {
		r, _, _ := newLeader(t, 3, Config{MinInsyncReplicas: 2})
		r.AppendAsLeader(oneBatch(1), -1)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.WaitForHW(cctx, 0, r.LeaderEpoch()) }()
		waitArmed(t, &r.hwSig)
		st := r.State()
		st.ISR, st.PartitionEpoch = []int32{0}, st.PartitionEpoch+1
		r.ApplyISR(st) // wakes the waiter: it looks again and goes on waiting
		waitArmed(t, &r.hwSig)
		select {
		case err := <-done:
			t.Fatalf("the ISR dip ended the wait: %v (Kafka's DelayedProduce waits for the HW)", err)
		default:
		}
		cancel()
		select {
		case err := <-done:
			wantCode(t, err, kerr.RequestTimedOut)
		case <-time.After(10 * time.Second):
			t.Fatal("WaitForHW did not return when its request timed out")
		}
	})
	t.Run("leadership lost", func(t *testing.T) {
		r, _, _ := newLeader(t, 3, Config{})
		r.AppendAsLeader(oneBatch(1), -1)
		done := make(chan error, 1)
		go func() { done <- r.WaitForHW(ctx, 0, r.LeaderEpoch()) }()
		waitArmed(t, &r.hwSig)
		r.MakeFollower(controller.PartitionState{Topic: "t", Leader: 1, LeaderEpoch: 1, Replicas: []int32{0, 1, 2}, ISR: []int32{1, 2}})
		select {
		case err := <-done:
			wantCode(t, err, kerr.NotLeaderForPartition)
		case <-time.After(10 * time.Second):
			t.Fatal("WaitForHW did not notice the leader change")
		}
	})
	t.Run("single replica commits on append", func(t *testing.T) {
		r, _, _ := newLeader(t, 1, Config{})
		info, _ := r.AppendAsLeader(oneBatch(2), -1)
		if err := r.WaitForHW(ctx, info.LastOffset, r.LeaderEpoch()); err != nil || r.HW() != 2 {
			t.Fatalf("HW %d err %v", r.HW(), err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		r, _, _ := newLeader(t, 1, Config{})
		r.Close()
		wantCode(t, r.WaitForHW(ctx, 0, r.LeaderEpoch()), kerr.NotLeaderForPartition)
	})
}

func TestHWChangedAndLEOChanged(t *testing.T) {
	r, _, _ := newLeader(t, 2, Config{})
	hwc, leoc := r.HWChanged(), r.LEOChanged()
	r.AppendAsLeader(oneBatch(1), 1)
	select {
	case <-leoc:
	default:
		t.Fatal("LEOChanged not closed by an append")
	}
	select {
	case <-hwc:
		t.Fatal("HWChanged closed without an HW advance")
	default:
	}
	r.UpdateFollower(1, -1, 1, 0)
	select {
	case <-hwc:
	default:
		t.Fatal("HWChanged not closed by the HW advance")
	}
}

func TestHWLag(t *testing.T) {
	type sample struct{ lag, recs int64 }
	var got []sample
	cfg := Config{OnHWLag: func(lag, recs int64) { got = append(got, sample{lag, recs}) }}
	r, _, clk := newLeader(t, 2, cfg)
	clk.ns = 1_000_000
	r.AppendAsLeader(oneBatch(5), -1) // offsets 0..4 at 1 ms
	clk.ns = 2_000_000
	r.AppendAsLeader(oneBatch(3), -1) // offsets 5..7 at 2 ms
	clk.ns = 5_000_000
	r.UpdateFollower(1, -1, 5, 0) // HW 5 at 5 ms: first batch, 4 ms
	clk.ns = 9_000_000
	r.UpdateFollower(1, -1, 7, 0) // HW 7: second batch not passed yet
	r.UpdateFollower(1, -1, 8, 0) // HW 8 at 9 ms: 7 ms
	want := []sample{{4_000_000, 5}, {7_000_000, 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("HW lag samples %v, want %v", got, want)
	}
}

func TestAppendAsFollower(t *testing.T) {
	dir := t.TempDir()
	l := newMemLog()
	r, err := newReplica("t", 0, 1, l, dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.MakeFollower(controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 3, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}); err != nil {
		t.Fatal(err)
	}
	var blob []byte
	blob = records.AppendBatch(blob, 0, 1, 0, []records.Record{{Value: []byte("a")}, {Value: []byte("b")}})
	blob = records.AppendBatch(blob, 2, 3, 0, []records.Record{{Value: []byte("c")}})
	info, err := r.AppendAsFollower(blob, 10)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 2 || r.LEO() != 3 {
		t.Fatalf("info %+v LEO %d", info, r.LEO())
	}
	if r.HW() != 3 {
		t.Fatalf("follower HW = %d, want min(leader HW 10, LEO 3) = 3", r.HW())
	}
	if got := r.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{1, 0}, {3, 2}}) {
		t.Fatalf("epochs %v", got)
	}
	// Persisted: a restart reloads them.
	r2, err := newReplica("t", 0, 1, l.reopen(), dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r2.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{1, 0}, {3, 2}}) {
		t.Fatalf("reloaded epochs %v", got)
	}
	// An entry past the LEO (log lost in a crash after the checkpoint was
	// written) is dropped on open.
	short := l.reopen()
	short.TruncateTo(2)
	r3, err := newReplica("t", 0, 1, short, dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r3.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{1, 0}}) {
		t.Fatalf("epochs after crash %v", got)
	}
	// Bad input: torn and corrupt batches are errors, nothing appended.
	next := records.AppendBatch(nil, 3, 3, 0, []records.Record{{Value: []byte("d")}})
	for name, b := range map[string][]byte{
		"torn":    next[:len(next)-3],
		"garbage": []byte("not a record batch at all, no sir, not one bit of it......................"),
		"gap":     records.AppendBatch(nil, 7, 3, 0, []records.Record{{Value: []byte("x")}}),
	} {
		if _, err := r.AppendAsFollower(b, 10); err == nil {
			t.Errorf("%s: AppendAsFollower accepted it", name)
		}
		if r.LEO() != 3 {
			t.Fatalf("%s: LEO moved to %d", name, r.LEO())
		}
	}
	if got := r.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{1, 0}, {3, 2}}) {
		t.Fatalf("epochs after rejected appends %v", got)
	}
	// The leader HW may be behind a new follower's: min(leaderHW, LEO) is applied.
	if _, err := r.AppendAsFollower(nil, 1); err != nil || r.HW() != 1 {
		t.Fatalf("HW %d err %v", r.HW(), err)
	}
	if err := r.TruncateTo(2); err != nil || r.LEO() != 2 {
		t.Fatalf("TruncateTo: LEO %d err %v", r.LEO(), err)
	}
	if got := r.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{1, 0}}) {
		t.Fatalf("epochs after truncation %v", got)
	}
	if err := r.TruncateFullyAndStartAt(50); err != nil || r.LEO() != 50 || r.HW() != 50 || r.LatestEpoch() != -1 {
		t.Fatalf("TruncateFullyAndStartAt: LEO %d HW %d epoch %d err %v", r.LEO(), r.HW(), r.LatestEpoch(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, EpochCheckpointFile)); err != nil {
		t.Fatal(err)
	}
}

func TestApplyRetention(t *testing.T) {
	cfg := log.DefaultConfig()
	cfg.SegmentBytes, cfg.RetentionBytes = int64(len(batches(1))), 0 // a segment per batch; keep only the active one
	l := newMemLogWith(cfg)
	r, err := newReplica("t", 0, 0, l, "", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.MakeLeader(controller.PartitionState{Topic: "t", Leader: 0, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}); err != nil {
		t.Fatal(err)
	}
	r.AppendAsLeader(batches(5), 1)
	st := r.State()
	st.LeaderEpoch++
	r.MakeLeader(st) // epoch 1 starts at 5
	r.AppendAsLeader(batches(5), 1)
	r.UpdateFollower(1, -1, 7, 0) // HW 7
	n, err := r.ApplyRetention(0)
	if err != nil || n != 7 || l.LogStart() != 7 {
		t.Fatalf("retention deleted %d (err %v), log start %d; want the 7 batches below the HW, start 7", n, err, l.LogStart())
	}
	if got := r.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{1, 7}}) {
		t.Fatalf("epochs after retention %v, want [{1 7}]", got)
	}
}

// TestFollowLeaderLogStart: a follower's log start follows the leader's from a fetch
// response, bounded by its HW (Kafka refuses a log start past the HW), dropping the epoch
// cache entries below it; a lower or unknown leader log start changes nothing; a leader HW
// below the log start does not take the HW under it; the leader refuses.
func TestFollowLeaderLogStart(t *testing.T) {
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 3 * int64(len(batches(1))) // three one-record batches per segment
	l := newMemLogWith(cfg)
	r, err := newReplica("t", 0, 1, l, "", Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 1, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}
	if err := r.MakeFollower(st); err != nil {
		t.Fatal(err)
	}
	var blob []byte
	for off := int64(0); off < 8; off++ {
		epoch := int32(0)
		if off >= 4 {
			epoch = 1
		}
		blob = records.AppendBatch(blob, off, epoch, 0, []records.Record{{Value: []byte("v")}})
	}
	if _, err := r.AppendAsFollower(blob, 6); err != nil || r.HW() != 6 {
		t.Fatalf("follower append: HW %d, %v", r.HW(), err)
	}
	n, err := r.FollowLeaderLogStart(7) // the leader's log start passed this follower's HW 6
	if err != nil || r.LogStart() != 6 || n != 2 {
		t.Fatalf("FollowLeaderLogStart(7) with HW 6: log start %d, %d segments deleted, %v; want 6 (the HW), 2 deleted", r.LogStart(), n, err)
	}
	if got := r.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{1, 6}}) {
		t.Fatalf("epochs after the log start moved to 6: %v, want [{1 6}]", got)
	}
	if _, err := r.Read(5, 8, 1<<20, true); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("read below the new log start: %v", err)
	}
	for _, ls := range []int64{3, -1} {
		if n, err := r.FollowLeaderLogStart(ls); n != 0 || err != nil || r.LogStart() != 6 {
			t.Fatalf("FollowLeaderLogStart(%d) below the log start 6: %d deleted, %v, log start %d", ls, n, err, r.LogStart())
		}
	}
	// A leader whose HW lags behind this follower's log start: the HW is raised to the log
	// start (Kafka's updateHighWatermark), never below it.
	if _, err := r.AppendAsFollower(nil, 4); err != nil || r.HW() != 6 {
		t.Fatalf("leader HW 4 below the log start 6: follower HW %d, %v; want 6", r.HW(), err)
	}
	st.Leader, st.LeaderEpoch = 1, 2
	if err := r.MakeLeader(st); err != nil {
		t.Fatal(err)
	}
	if _, err := r.FollowLeaderLogStart(7); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("FollowLeaderLogStart on the leader: %v", err)
	}
}

func TestMakeLeaderResetsFollowers(t *testing.T) {
	r, _, clk := newLeader(t, 3, Config{ReplicaLagTimeMaxMs: 1000})
	r.AppendAsLeader(batches(10), 1)
	r.UpdateFollower(1, -1, 10, 0)
	r.UpdateFollower(2, -1, 10, 0)
	if r.HW() != 10 {
		t.Fatalf("HW %d", r.HW())
	}
	r.MakeFollower(controller.PartitionState{Topic: "t", Leader: 1, LeaderEpoch: 1, Replicas: []int32{0, 1, 2}, ISR: []int32{0, 1, 2}})
	clk.ns = 5e9
	if err := r.MakeLeader(controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 2, Replicas: []int32{0, 1, 2}, ISR: []int32{0, 1}}); err != nil {
		t.Fatal(err)
	}
	if r.HW() != 10 {
		t.Fatalf("HW changed by MakeLeader: %d", r.HW())
	}
	if r.FollowerLEO(1) != -1 || r.FollowerLastCaughtUp(1) != 5e9 || r.FollowerLastCaughtUp(2) != neverCaughtUp {
		t.Fatalf("follower progress not reset: leo %d caught %d/%d", r.FollowerLEO(1), r.FollowerLastCaughtUp(1), r.FollowerLastCaughtUp(2))
	}
	if r.Epochs().StartOffsetOf(2) != 10 {
		t.Fatalf("epoch 2 start %d, want LEO 10", r.Epochs().StartOffsetOf(2))
	}
	// Follower 2 (outside the ISR) at LEO 10 >= HW and >= epoch start: join.
	join, err := r.UpdateFollower(2, -1, 10, 0)
	if err != nil || !join {
		t.Fatalf("may join %v err %v", join, err)
	}
	if p := r.PrepareExpand(2); p == nil || !slices.Equal(p.ISR, []int32{0, 1, 2}) {
		t.Fatalf("proposed ISR %v", p)
	}
	r.AbortISRChange(r.pendingProposal())
	if r.MaxLag() != 10 {
		t.Fatalf("MaxLag %d, want 10 (follower 1 unknown)", r.MaxLag())
	}
	if out := r.OutOfSyncReplicas(); out != nil {
		t.Fatalf("out of sync %v right after MakeLeader", out)
	}
	clk.ns += 1e9 + 1
	if got := r.PrepareShrink(); got == nil || !slices.Equal(got.ISR, []int32{0}) {
		t.Fatalf("shrink %v", got)
	}
}

// TestHWUpdateRace drives the atomic and the mutex HW update with random
// interleavings of follower fetches, producers and acks=all waits (run it
// with -race). Both must end at the same HW (the minimum final LEO of the
// ISR) and no observer may ever see the HW decrease.
func TestHWUpdateRace(t *testing.T) {
	const (
		rf        = 5
		producers = 4
		perProd   = 200
	)
	final := map[string]int64{}
	for _, mode := range []string{HWUpdateAtomic, HWUpdateMutex} {
		t.Run(mode, func(t *testing.T) {
			r, l, _ := newLeader(t, rf, Config{HWUpdate: mode, MinInsyncReplicas: 2, Now: func() int64 { return time.Now().UnixNano() }})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var (
				wg       sync.WaitGroup
				stop     atomic.Bool
				failures atomic.Int64
			)
			fail := func(format string, args ...any) {
				failures.Add(1)
				t.Errorf(format, args...)
			}
			// Observer: the HW never decreases.
			wg.Add(1)
			go func() {
				defer wg.Done()
				last := int64(0)
				for !stop.Load() {
					hw := r.HW()
					if hw < last {
						fail("HW decreased %d -> %d", last, hw)
						return
					}
					last = hw
					runtime.Gosched()
				}
			}()
			// Producers: acks=all appends that must all be acknowledged.
			var pwg sync.WaitGroup
			for p := 0; p < producers; p++ {
				pwg.Add(1)
				go func() {
					defer pwg.Done()
					blob := oneBatch(1)
					for i := 0; i < perProd; i++ {
						info, err := r.AppendAsLeader(blob, -1)
						if err != nil {
							fail("append: %v", err)
							return
						}
						if err := r.WaitForHW(ctx, info.LastOffset, r.LeaderEpoch()); err != nil {
							fail("WaitForHW(%d): %v (HW %d)", info.LastOffset, err, r.HW())
							return
						}
					}
				}()
			}
			// ISR churn: copy-on-write snapshots swapped under the
			// followers' feet (never below min.insync.replicas), ending
			// with the full ISR.
			wg.Add(1)
			go func() {
				defer wg.Done()
				full := r.State()
				for i := 0; !stop.Load(); i++ {
					st := r.State()
					st.PartitionEpoch++
					if i%2 == 0 {
						st.ISR = []int32{0, 1, 2}
					} else {
						st.ISR = slices.Clone(full.ISR)
					}
					r.ApplyISR(st)
					runtime.Gosched()
				}
				st := r.State()
				st.PartitionEpoch++
				st.ISR = full.ISR
				r.ApplyISR(st)
			}()
			// Followers: fetch at random offsets up to the leader LEO,
			// non-decreasing per follower; end at the final LEO.
			want := int64(producers * perProd)
			for f := int32(1); f < rf; f++ {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 7))
					var off int64
					for off < want {
						leo := l.LEO()
						if leo > off {
							off += 1 + rng.Int64N(leo-off)
						}
						before := r.HW()
						if _, err := r.UpdateFollower(f, -1, off, 0); err != nil {
							fail("UpdateFollower(%d, %d): %v", f, off, err)
							return
						}
						if after := r.HW(); after < before {
							fail("HW decreased %d -> %d", before, after)
						}
						if rng.IntN(4) == 0 {
							runtime.Gosched()
						}
					}
				}(uint64(f))
			}
			pwg.Wait()
			stop.Store(true)
			wg.Wait()
			// The final full ISR is in place; one more round of fetches at
			// the final offsets settles the HW the churn may have held back.
			for f := int32(1); f < rf; f++ {
				r.UpdateFollower(f, -1, want, 0)
			}
			if failures.Load() > 0 {
				return
			}
			if r.HW() != want || r.LEO() != want {
				t.Fatalf("final HW %d LEO %d, want %d", r.HW(), r.LEO(), want)
			}
			final[mode] = r.HW()
		})
	}
	if final[HWUpdateAtomic] != final[HWUpdateMutex] {
		t.Fatalf("final HW atomic %d != mutex %d", final[HWUpdateAtomic], final[HWUpdateMutex])
	}
}

// TestHWSameAsMutexReference replays identical random follower update
// sequences on both implementations, sequentially interleaved by the same
// seed, and compares the HW after every step.
func TestHWSameAsMutexReference(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		a, la, _ := newLeader(t, 5, Config{HWUpdate: HWUpdateAtomic, MinInsyncReplicas: 3})
		m, lm, _ := newLeader(t, 5, Config{HWUpdate: HWUpdateMutex, MinInsyncReplicas: 3})
		rng := rand.New(rand.NewPCG(seed, 1))
		for step := 0; step < 300; step++ {
			switch rng.IntN(4) {
			case 0:
				n := 1 + rng.IntN(3)
				a.AppendAsLeader(batches(n), 1)
				m.AppendAsLeader(batches(n), 1)
			default:
				f := int32(1 + rng.IntN(4))
				off := rng.Int64N(la.LEO() + 1)
				_, e1 := a.UpdateFollower(f, -1, off, 0)
				_, e2 := m.UpdateFollower(f, -1, off, 0)
				if (e1 == nil) != (e2 == nil) {
					t.Fatalf("seed %d step %d: errors differ: %v / %v", seed, step, e1, e2)
				}
			}
			if a.HW() != m.HW() || la.LEO() != lm.LEO() {
				t.Fatalf("seed %d step %d: atomic HW %d, mutex HW %d", seed, step, a.HW(), m.HW())
			}
		}
	}
}

func TestUpdateFollowerAllocs(t *testing.T) {
	for _, mode := range []string{HWUpdateAtomic, HWUpdateMutex} {
		t.Run(mode, func(t *testing.T) {
			r, _, _ := newLeader(t, 3, Config{HWUpdate: mode})
			r.AppendAsLeader(batches(5000), 1)
			var off int64
			allocs := testing.AllocsPerRun(2000, func() {
				off++
				r.UpdateFollower(1, -1, off, 0)
				r.UpdateFollower(2, -1, off, 0)
			})
			if allocs != 0 {
				t.Fatalf("UpdateFollower + HW advance allocates %.1f per run with no waiter", allocs)
			}
			if r.HW() != off {
				t.Fatalf("HW %d, want %d: the benchmark did not advance it", r.HW(), off)
			}
		})
	}
}

func ExampleHighWatermark() {
	// Leader LEO 10, two in-sync followers at 9 and 7, min.insync.replicas 2.
	followers := []int64{9, 7}
	hw, ok := HighWatermark(10, 3, 2, len(followers),
		func(i int) int64 { return followers[i] },
		func(int) bool { return true })
	fmt.Println(hw, ok)
	// Output: 7 true
}

// TestNewReplicaRealLog runs a leader and a follower over core/log logs in
// temp dirs: the follower copies through Replica.Read slices, the logs end
// byte-identical and a restart reloads the epoch cache and the HW.
func TestNewReplicaRealLog(t *testing.T) {
	open := func(dir string) *log.Log {
		l, _, err := log.Open(dir, log.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	d0, d1 := t.TempDir(), t.TempDir()
	l0, l1 := open(d0), open(d1)
	r0, err := NewReplica("t", 0, 0, l0, d0, Config{MinInsyncReplicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := NewReplica("t", 0, 1, l1, d1, Config{MinInsyncReplicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	st := controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 4, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}
	if err := r0.MakeLeader(st); err != nil {
		t.Fatal(err)
	}
	if err := r1.MakeFollower(st); err != nil {
		t.Fatal(err)
	}
	fetch := func() {
		t.Helper()
		off := r1.LEO()
		if _, err := r0.UpdateFollower(1, -1, off, r1.LogStart()); err != nil {
			t.Fatal(err)
		}
		sl, err := r0.Read(off, r0.LEO(), 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		data, err := sl.ReadAll(nil)
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r1.AppendAsFollower(data, r0.HW()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := r0.AppendAsLeader(oneBatch(3), -1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r0.WaitForHW(ctx, info.LastOffset, r0.LeaderEpoch()) }()
	fetch()
	fetch()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r0.HW() != 3 || r1.HW() != 3 {
		t.Fatalf("HW leader %d follower %d, want 3", r0.HW(), r1.HW())
	}
	b0, _ := l0.Bytes(0, 3)
	b1, _ := l1.Bytes(0, 3)
	if !bytes.Equal(b0, b1) {
		t.Fatal("replica logs differ")
	}
	if got := r1.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{4, 0}}) {
		t.Fatalf("follower epochs %v", got)
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	r1b, err := NewReplica("t", 0, 1, open(d1), d1, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r1b.Close()
	if err := r1b.RestoreHW(99); err != nil || r1b.HW() != 3 {
		t.Fatalf("RestoreHW clamps to the LEO: HW %d err %v", r1b.HW(), err)
	}
	if got := r1b.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{4, 0}}) {
		t.Fatalf("reloaded follower epochs %v", got)
	}
	if e, end := r0.EndOffsetForEpoch(4); e != 4 || end != 3 {
		t.Fatalf("EndOffsetForEpoch(4) = (%d, %d)", e, end)
	}
	r0.Close()
}

// TestNoLeaderAppendAfterDemotion: appends racing MakeFollower (and a re-election with a new
// epoch) either finish before the role change returns or fail; none lands after it, where it
// would sit at the follower's LEO under the old epoch, above the truncation point the fetcher
// is about to compute.
func TestNoLeaderAppendAfterDemotion(t *testing.T) {
	for round := 0; round < 20; round++ {
		dir := t.TempDir()
		l, _, err := log.Open(dir, log.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReplica("t", 0, 0, l, dir, Config{MinInsyncReplicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		st := controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 1, Replicas: []int32{0, 1}, ISR: []int32{0}}
		if err := r.MakeLeader(st); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		started := make(chan struct{}, 4)
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if i == 1 {
						started <- struct{}{}
					}
					select {
					case <-stop:
						return
					default:
					}
					_, _ = r.AppendAsLeader(oneBatch(2), 1) // errors once demoted
				}
			}()
		}
		for g := 0; g < 4; g++ {
			<-started
		}
		if round%2 == 1 { // re-elected with a new epoch: no epoch-1 batch above epoch 2's start
			st.LeaderEpoch = 2
			if err := r.MakeLeader(st); err != nil {
				t.Fatal(err)
			}
			start := r.Epochs().StartOffsetOf(2)
			close(stop)
			wg.Wait()
			if err := l.ForEachBatchHeader(start, func(h records.Header) error {
				if h.BaseOffset >= start && h.PartitionLeaderEpoch != 2 {
					return fmt.Errorf("batch at %d has epoch %d above epoch 2's start %d", h.BaseOffset, h.PartitionLeaderEpoch, start)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		} else {
			fst := st
			fst.Leader, fst.LeaderEpoch = 1, 2
			if err := r.MakeFollower(fst); err != nil {
				t.Fatal(err)
			}
			leo := r.LEO()
			close(stop)
			wg.Wait()
			if got := r.LEO(); got != leo {
				t.Fatalf("round %d: LEO %d after MakeFollower returned, %d once appenders stopped: a leader append landed after demotion", round, leo, got)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShrinkBelowMinISRFlushesFirst: a shrink that leaves the ISR below min.insync.replicas
// asks its caller to flush the log first (the leader alone is then electable cleanly, and
// what it acknowledged must survive its power loss), and until it is applied or withdrawn
// the HW does not pass the LEO it was proposed at, whatever the removed follower fetches: no
// acknowledgement the flush does not cover. A shrink that keeps min.insync.replicas members
// asks for nothing.
func TestShrinkBelowMinISRFlushesFirst(t *testing.T) {
	r, _, clk := newLeader(t, 2, Config{ReplicaLagTimeMaxMs: 1000, MinInsyncReplicas: 2})
	r.AppendAsLeader(batches(10), -1)
	r.UpdateFollower(1, -1, 10, 0)
	r.AppendAsLeader(batches(5), -1) // LEO 15, the follower at 10
	clk.ns += 1e9 + 1
	p := r.PrepareShrink()
	if p == nil || !slices.Equal(p.ISR, []int32{0}) || !p.FlushFirst {
		t.Fatalf("proposal %+v, want ISR [0] with FlushFirst", p)
	}
	r.AppendAsLeader(batches(5), -1) // LEO 20
	r.UpdateFollower(1, -1, 20, 0)
	if r.HW() != 15 {
		t.Fatalf("HW %d while the shrink is pending, want 15 (the LEO it was proposed at)", r.HW())
	}
	r.AbortISRChange(p)
	if r.HW() != 20 {
		t.Fatalf("HW %d after the shrink was withdrawn, want 20", r.HW())
	}

	r3, _, clk3 := newLeader(t, 3, Config{ReplicaLagTimeMaxMs: 1000, MinInsyncReplicas: 2})
	r3.AppendAsLeader(batches(10), -1)
	r3.UpdateFollower(1, -1, 10, 0)
	r3.UpdateFollower(2, -1, 5, 0)
	clk3.ns += 1e9 + 1
	r3.UpdateFollower(1, -1, 10, 0)
	if p := r3.PrepareShrink(); p == nil || !slices.Equal(p.ISR, []int32{0, 1}) || p.FlushFirst {
		t.Fatalf("proposal %+v, want ISR [0 1] without FlushFirst", p)
	}
}
