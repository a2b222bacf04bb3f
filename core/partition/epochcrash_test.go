package partition

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// TestEpochCheckpointLostInCrash: Assign writes the leader-epoch checkpoint without fsync, so a
// crash can lose the entry of an epoch whose batches did reach the disk. Broker B lags leader
// A (A holds offsets 0..5 of epoch 1, B only 0..2), is elected uncleanly in epoch 3 and
// appends 3..4; its log reaches the disk, its checkpoint write of 3@3 does not, and B
// crashes. A leads again in epoch 5. B must come back with the entry restored from its
// batches, so that its OffsetForLeaderEpoch truncation removes its epoch-3 batches (to 3):
// with the stale checkpoint alone (latest epoch 1, ending at its LEO 5) it would keep them and
// its log would diverge from A's. In a strict file system (directory entries durable only
// after a directory fsync) the crash leaves the old checkpoint and the replica repairs it
// from where the batches' epochs rise; in a journaling one the rename survives with no data,
// and the replica rebuilds the cache from the log.
func TestEpochCheckpointLostInCrash(t *testing.T) {
	for _, strict := range []bool{true, false} {
		name := "journaled"
		if strict {
			name = "strict"
		}
		t.Run(name, func(t *testing.T) { testEpochCheckpointLostInCrash(t, strict) })
	}
}

func testEpochCheckpointLostInCrash(t *testing.T, strict bool) {
	fsB := vfs.NewMemFS(nil)
	if strict {
		fsB = vfs.NewStrictMemFS(nil)
	}
	const dirB = "/b/t-0"
	if err := vfs.MkdirAllDurable(fsB, dirB); err != nil {
		t.Fatal(err)
	}
	openB := func(fs *vfs.MemFS) (*log.Log, *Replica) {
		t.Helper()
		cfg := log.DefaultConfig()
		cfg.FS = fs
		l, _, err := log.Open(dirB, cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReplica("t", 0, 1, l, dirB, Config{MinInsyncReplicas: 1, FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		return l, r
	}
	lA := newMemLog()
	rA, err := newReplica("t", 0, 0, lA, "", Config{MinInsyncReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rA.Close()
	lB, rB := openB(fsB)

	// fetch copies A's log to B up to A's LEO, as B's replica fetcher would.
	fetch := func(rB *Replica) {
		t.Helper()
		for rB.LEO() < rA.LEO() {
			off := rB.LEO()
			if _, err := rA.UpdateFollower(1, -1, off, rB.LogStart()); err != nil {
				t.Fatal(err)
			}
			sl, err := rA.Read(off, rA.LEO(), 1<<20, true)
			if err != nil {
				t.Fatal(err)
			}
			data, err := sl.ReadAll(nil)
			sl.Release()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rB.AppendAsFollower(data, rA.HW()); err != nil {
				t.Fatal(err)
			}
		}
	}

	st1 := controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 1, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}
	if err := rA.MakeLeader(st1); err != nil {
		t.Fatal(err)
	}
	if err := rB.MakeFollower(st1); err != nil {
		t.Fatal(err)
	}
	if _, err := rA.AppendAsLeader(batches(3), 1); err != nil {
		t.Fatal(err)
	}
	fetch(rB)
	if err := fsB.SyncFS(dirB); err != nil { // B's state so far is on disk: checkpoint 1@0
		t.Fatal(err)
	}
	if _, err := rA.AppendAsLeader(batches(3), 1); err != nil { // 3..5, which B never fetches
		t.Fatal(err)
	}

	// B is elected uncleanly in epoch 3 and appends 3..4.
	stB := controller.PartitionState{Topic: "t", Leader: 1, LeaderEpoch: 3, Replicas: []int32{0, 1}, ISR: []int32{1}}
	if err := rB.MakeLeader(stB); err != nil {
		t.Fatal(err)
	}
	if _, err := rB.AppendAsLeader(batches(2), 1); err != nil {
		t.Fatal(err)
	}
	if got := rB.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{1, 0}, {3, 3}}) {
		t.Fatalf("B's epochs before the crash %v", got)
	}
	// Its segment reaches the disk (an fsync of the file alone), its checkpoint does not.
	seg, err := fsB.OpenFile(filepath.Join(dirB, "00000000000000000000.log"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := seg.Sync(); err != nil {
		t.Fatal(err)
	}
	seg.Close()
	crashed := fsB.CrashClone()
	rB.Close()
	_ = lB

	// The premise: the crash lost the checkpoint write of 3@3.
	stale, err := LoadEpochCache(crashed, dirB)
	if strict {
		if err != nil || !slices.Equal(stale.Entries(), []EpochEntry{{1, 0}}) {
			t.Fatalf("strict crash: checkpoint %v (err %v), want the old 1@0", stale, err)
		}
	} else if err == nil {
		t.Fatalf("journaled crash: checkpoint %v readable, want the renamed file without its data", stale.Entries())
	}

	lB2, rB2 := openB(crashed)
	defer rB2.Close()
	if rB2.LEO() != 5 {
		t.Fatalf("B's LEO after the crash %d, want 5 (its segment was fsynced)", rB2.LEO())
	}
	if got := rB2.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{1, 0}, {3, 3}}) {
		t.Fatalf("B's epochs after the crash %v, want [{1 0} {3 3}] restored from the log", got)
	}
	want := "restored"
	if !strict {
		want = "unreadable"
	}
	if why := rB2.EpochCacheRebuilt(); !strings.Contains(why, want) {
		t.Fatalf("EpochCacheRebuilt %q, want it to say %q", why, want)
	}
	// The repaired checkpoint is on disk for the next open.
	if c, err := LoadEpochCache(crashed, dirB); err != nil || !slices.Equal(c.Entries(), []EpochEntry{{1, 0}, {3, 3}}) {
		t.Fatalf("checkpoint after the repair: %v (err %v)", c, err)
	}

	// A leads again in epoch 5 and appends offset 6; B follows and truncates by epoch.
	st5 := controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: 5, Replicas: []int32{0, 1}, ISR: []int32{0}}
	if err := rA.MakeLeader(st5); err != nil {
		t.Fatal(err)
	}
	if _, err := rA.AppendAsLeader(batches(1), 1); err != nil {
		t.Fatal(err)
	}
	if err := rB2.MakeFollower(st5); err != nil {
		t.Fatal(err)
	}
	le, lend := rA.EndOffsetForEpoch(rB2.Epochs().Latest())
	if le != 1 || lend != 6 {
		t.Fatalf("A answers epoch %d: (%d, %d), want (1, 6)", rB2.Epochs().Latest(), le, lend)
	}
	tr := rB2.TruncationFor(le, lend)
	if tr.Offset != 3 {
		t.Fatalf("B truncates to %d, want 3 (below its epoch-3 batches)", tr.Offset)
	}
	// Without the repair, B would ask for epoch 1 and keep its divergent batches.
	if strict {
		if bad := TruncationOffset(1, 6, 5, 3, func(e int32) (int32, int64) { return stale.EndOffsetFor(e, 5) }); bad.Offset != 5 {
			t.Fatalf("with the stale checkpoint the truncation would be %d; the test expects 5 (it no longer shows the loss)", bad.Offset)
		}
	}
	if err := rB2.TruncateTo(tr.Offset); err != nil {
		t.Fatal(err)
	}
	fetch(rB2)
	a, err := lA.Bytes(0, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lB2.Bytes(0, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("B's log differs from A's after the truncation and the fetch")
	}
	if got := rB2.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{1, 0}, {5, 6}}) {
		t.Fatalf("B's epochs at the end %v, want A's [{1 0} {5 6}]", got)
	}
}
