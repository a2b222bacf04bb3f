package partition

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// smallSegReplica is realReplica with segments of about one batch, so that moving the log
// start deletes whole segments.
func smallSegReplica(t *testing.T, dir string, id int32) *Replica {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 100
	return realReplicaWith(t, dir, id, cfg)
}

// crashCopy copies the files of dir as they are now (no Close: no Close snapshot) to a new
// directory, as a crash leaves them with the page cache kept.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// wantEpoch checks the epoch r's producer state holds for pid (-1: none), a producer seen
// in a marker only included (Producer does not show those).
func wantEpoch(t *testing.T, what string, r *Replica, pid int64, want int16) {
	t.Helper()
	r.producers.mu.Lock()
	got := int16(-1)
	if e := r.producers.producers[pid]; e != nil {
		got = e.epoch
	}
	r.producers.mu.Unlock()
	if got != want {
		t.Fatalf("%s: broker %d: producer %d at epoch %d, want %d (-1: unknown)", what, r.BrokerID(), pid, got, want)
	}
}

// replicateAll is replicate for small segments (a read returns one segment's batches).
func replicateAll(t *testing.T, leader, follower *Replica) {
	t.Helper()
	for follower.LEO() < leader.LEO() {
		copyToFollower(t, leader, follower)
	}
	replicate(t, leader, follower)
}

// TestLogStartSnapshot: a transactional producer whose batch and ABORT marker (the marker
// carrying a bumped epoch, as the coordinator writes it when a new process takes the
// transactional id over) lay below a log start moved by DeleteRecords on the leader and by
// the follower following it is still known after a restart without Close and after a
// truncation, so a batch its fenced old process retries is refused with
// INVALID_PRODUCER_EPOCH instead of opening a transaction no coordinator knows of (the
// LSO would stay on it for good). A producer active again past the log start is rebuilt
// from the log; an emptied log forgets it.
func TestLogStartSnapshot(t *testing.T) {
	dir0, dir1 := t.TempDir(), t.TempDir()
	r0, r1 := smallSegReplica(t, dir0, 0), smallSegReplica(t, dir1, 1)
	if err := r0.MakeLeader(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := r1.MakeFollower(pstate(0, 0)); err != nil {
		t.Fatal(err)
	}
	const zombie, other = 7, 8
	mustAppend(t, r0, txnBatch(zombie, 0, 0, 1, "z")) // 0: the old process's transaction
	mustMarker(t, r0, zombie, 1, false)               // 1: aborted by the new process's InitProducerId
	mustAppend(t, r0, pidBatch(other, 0, 0, 1, "o"))  // 2
	for range 3 {
		mustAppend(t, r0, oneBatch(1)) // 3, 4, 5
	}
	replicateAll(t, r0, r1)
	wantEpoch(t, "before", r0, zombie, 1)
	wantEpoch(t, "before, follower", r1, zombie, 1)

	if _, err := r0.DeleteRecordsOnLeader(4); err != nil {
		t.Fatal(err)
	}
	if _, err := r1.FollowLeaderLogStart(4); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Replica{r0, r1} {
		if r.LogStart() != 4 {
			t.Fatalf("broker %d: log start %d, want 4", r.BrokerID(), r.LogStart())
		}
		if _, err := os.Stat(filepath.Join(r.dir, logStartSnapName)); err != nil {
			t.Fatalf("broker %d: no %s after the log start moved past producers: %v", r.BrokerID(), logStartSnapName, err)
		}
	}

	// A restart without Close: the state comes from the log-start snapshot and the log.
	c := smallSegReplica(t, crashCopy(t, dir0), 0)
	wantEpoch(t, "restarted without Close", c, zombie, 1)
	wantEpoch(t, "restarted without Close", c, other, 0)
	if err := c.MakeLeader(pstate(0, 1)); err != nil {
		t.Fatal(err)
	}
	_, err := c.AppendAsLeader(txnBatch(zombie, 0, 1, 1, "late"), 1)
	if !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("restarted without Close: the fenced process's batch: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if open := c.OpenTxns(); len(open) != 0 {
		t.Fatalf("restarted without Close: open transactions %v", open)
	}

	// A truncation on the follower rebuilds the state from the log: the snapshot is its base.
	mustAppend(t, r0, oneBatch(1)) // 6, not replicated
	copyToFollower(t, r0, r1)
	if r1.LEO() != 7 || r1.HW() != 6 {
		t.Fatalf("follower: LEO %d HW %d, want 7 and 6", r1.LEO(), r1.HW())
	}
	if err := r1.TruncateTo(r1.HW()); err != nil {
		t.Fatal(err)
	}
	wantEpoch(t, "follower after a truncation", r1, zombie, 1)
	wantEpoch(t, "follower after a truncation", r1, other, 0)

	// Active again past the log start: left to the log. Moving the log start past the other
	// producer's batch keeps both (the zombie's epoch 2 batch comes later).
	mustAppend(t, r0, txnBatch(zombie, 2, 0, 1, "new")) // 7
	replicateAll(t, r0, r1)
	if _, err := r0.DeleteRecordsOnLeader(7); err != nil {
		t.Fatal(err)
	}
	c = smallSegReplica(t, crashCopy(t, dir0), 0)
	wantEpoch(t, "restarted after the producer wrote again", c, zombie, 2)
	wantEpoch(t, "restarted after the producer wrote again", c, other, 0)
	if open := c.OpenTxns(); len(open) != 1 || open[zombie] != 7 {
		t.Fatalf("restarted after the producer wrote again: open transactions %v, want producer %d's at 7", open, zombie)
	}

	// An emptied log (the follower behind the leader's log start) forgets them all.
	if err := r1.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir1, logStartSnapName)); !os.IsNotExist(err) {
		t.Fatalf("%s after the log was emptied: %v", logStartSnapName, err)
	}
	wantEpoch(t, "follower after its log was emptied", r1, zombie, -1)
	wantEpoch(t, "follower after its log was emptied", r1, other, -1)
}

// TestLogStartSnapshotStale: each move of the log start rewrites the snapshot at the new
// log start; a snapshot below the log start (left by a build without it) is not used, and
// it and one that does not decode are removed at open.
func TestLogStartSnapshotStale(t *testing.T) {
	dir := t.TempDir()
	r := smallSegReplica(t, dir, 0)
	if err := r.MakeLeader(controller.PartitionState{Topic: "t", Leader: 0, Replicas: []int32{0}, ISR: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r, pidBatch(9, 3, 0, 1, "a")) // 0
	mustAppend(t, r, oneBatch(1))               // 1
	mustAppend(t, r, oneBatch(1))               // 2
	if _, err := r.DeleteRecordsOnLeader(1); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, logStartSnapName)
	at1, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.DeleteRecordsOnLeader(2); err != nil {
		t.Fatal(err)
	}
	wantEpoch(t, "restarted at log start 2", smallSegReplica(t, crashCopy(t, dir), 0), 9, 3)

	for what, b := range map[string][]byte{"stale": at1, "damaged": append(at1[:len(at1)-1:len(at1)-1], at1[len(at1)-1]^0xff)} {
		cp := crashCopy(t, dir)
		if err := os.WriteFile(filepath.Join(cp, logStartSnapName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		wantEpoch(t, what+" snapshot", smallSegReplica(t, cp, 0), 9, -1)
		if _, err := os.Stat(filepath.Join(cp, logStartSnapName)); !os.IsNotExist(err) {
			t.Fatalf("a %s %s kept at open: %v", what, logStartSnapName, err)
		}
	}
}

// TestLogStartSnapshotCrashBetween: a crash after the snapshot was written and before the
// segments below the new log start were deleted leaves a log that starts below the
// snapshot's offset. The state is then the snapshot's plus the whole log, the snapshot's
// producers' records below its offset not applied twice.
func TestLogStartSnapshotCrashBetween(t *testing.T) {
	dir := t.TempDir()
	r := smallSegReplica(t, dir, 0)
	if err := r.MakeLeader(controller.PartitionState{Topic: "t", Leader: 0, Replicas: []int32{0}, ISR: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, r, pidBatch(9, 3, 0, 1, "a"))  // 0
	mustAppend(t, r, pidBatch(10, 0, 0, 1, "b")) // 1
	mustAppend(t, r, pidBatch(9, 3, 1, 1, "c"))  // 2
	mustAppend(t, r, pidBatch(10, 0, 1, 1, "d")) // 3: producer 10 is left to the log
	mustAppend(t, r, oneBatch(1))                // 4
	want, _ := r.Producer(9)
	want10, _ := r.Producer(10)
	var cp string
	r.log.(*log.Log).SetBeforeLogStart(func(newStart int64) error {
		err := r.beforeLogStart(newStart)
		cp = crashCopy(t, dir) // the snapshot written, every segment still there
		return err
	})
	if _, err := r.DeleteRecordsOnLeader(3); err != nil {
		t.Fatal(err)
	}
	c := smallSegReplica(t, cp, 0)
	if c.LogStart() != 0 {
		t.Fatalf("the copy's log starts at %d, want 0", c.LogStart())
	}
	got, ok := c.Producer(9)
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("producer 9 after the crash: %+v, want %+v", got, want)
	}
	if got, ok := c.Producer(10); !ok || !reflect.DeepEqual(got, want10) {
		t.Fatalf("producer 10 (not in the snapshot: replayed) after the crash: %+v, want %+v", got, want10)
	}
}
