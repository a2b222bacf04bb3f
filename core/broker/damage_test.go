package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

// damageCluster is 3 brokers with small segments, a topic "d" (1 partition, RF 3, min ISR 2)
// holding 40 acknowledged batches of 10 records, and every damage report collected.
type damageCluster struct {
	*testCluster
	mu      sync.Mutex
	reports []DamageReport
}

func newDamageCluster(t *testing.T) *damageCluster {
	dc := &damageCluster{}
	cfg := testConfig()
	cfg.Log.SegmentBytes = 2048
	cfg.ScrubEnable = false // the tests call Scrub themselves
	// The tests damage segment files behind the brokers' backs; a leader's in-memory tail
	// (isrbench.log.tail.bytes) would serve the bytes it wrote instead of the damaged ones.
	cfg.Log.TailBytes = 0
	cfg.ReplicaHighWatermarkCheckpointIntervalMs = 50
	cfg.OnDamage = func(r DamageReport) {
		dc.mu.Lock()
		dc.reports = append(dc.reports, r)
		dc.mu.Unlock()
	}
	dc.testCluster = newTestCluster(t, 3, cfg)
	dc.createTopic("d", 1, 3, map[string]string{"min.insync.replicas": "2"})
	for i := 0; i < 40; i++ {
		if res := produce(t, dc.leader("d", 0), -1, "d", 0, batch("v", 10)); res.Err != nil {
			t.Fatalf("produce %d: %v", i, res.Err)
		}
	}
	return dc
}

func (dc *damageCluster) damageReports() []DamageReport {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	return slices.Clone(dc.reports)
}

// segments returns broker id's segment files of d-0, oldest first.
func (dc *damageCluster) segments(id int32) []string {
	dc.t.Helper()
	files, err := filepath.Glob(filepath.Join(dc.dirs[id], "d-0", "*.log"))
	if err != nil || len(files) < 3 {
		dc.t.Fatalf("broker %d has segments %v (%v), want at least 3", id, files, err)
	}
	sort.Strings(files)
	return files
}

// flipBatch inverts a byte in the records of the k-th batch of file (k < 0: from the end)
// and returns that batch's base offset.
func flipBatch(t *testing.T, file string, k int) int64 {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	w := log.NewSegmentWalker(f, file, st.Size(), -1)
	var bs []log.SegmentBatch
	for w.Next() {
		bs = append(bs, w.Batch())
	}
	if k < 0 {
		k += len(bs)
	}
	if k < 0 || k >= len(bs) {
		t.Fatalf("%s has %d batches, no batch %d", file, len(bs), k)
	}
	at := bs[k].Position + records.HeaderSize + 2
	b := []byte{0}
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	return bs[k].Header.BaseOffset
}

// restartDamaged stops broker id cleanly, lets damage do its work on its files and starts it
// again; it then waits until the new incarnation is back in the ISR.
func (dc *damageCluster) restartDamaged(id int32, damage func()) *Broker {
	dc.t.Helper()
	if err := dc.broker(id).Close(); err != nil {
		dc.t.Fatal(err)
	}
	dc.ctrl.BrokerDown(id)
	damage()
	b := dc.start(id)
	dc.waitInISR(id)
	return b
}

func (dc *damageCluster) waitInISR(id int32) {
	dc.t.Helper()
	dc.waitFor("broker in the ISR, undamaged", 20*time.Second, func() bool {
		st, _ := dc.ctrl.Partition("d", 0)
		return slices.Contains(st.ISR, id) && len(dc.ctrl.Damaged("d", 0)) == 0
	})
}

// TestDamagedLeaderHealed: a batch flipped on disk in the leader's replica, in its newest or
// its oldest segment, is never served: the fetch that reaches it fails with
// KAFKA_STORAGE_ERROR, the damage is reported with its file and offset, the leadership moves
// to an intact replica, the damaged one truncates below the damage, re-replicates and
// rejoins the ISR, and a consumer reads every acknowledged record.
func TestDamagedLeaderHealed(t *testing.T) {
	for _, tc := range []struct {
		name string
		seg  func(files []string) string
	}{
		{"newest segment", func(f []string) string { return f[len(f)-1] }},
		{"oldest segment", func(f []string) string { return f[0] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dc := newDamageCluster(t)
			st, _ := dc.ctrl.Partition("d", 0)
			id := st.Leader
			hw := dc.leader("d", 0).lookup("d", 0).r.HW()
			var bad int64
			var file string
			b := dc.restartDamaged(id, func() {
				file = tc.seg(dc.segments(id))
				bad = flipBatch(t, file, -1)
			})
			// Leadership back to the damaged replica (as a preferred election would).
			st, _ = dc.ctrl.Partition("d", 0)
			if st.Leader != id {
				if _, err := dc.ctrl.TransferLeader("d", 0, id); err != nil {
					t.Fatal(err)
				}
			}
			dc.waitFor("the damaged replica leads", 10*time.Second, func() bool { return b.lookup("d", 0).r.IsLeader() })
			req := &FetchRequest{ReplicaID: -1, MaxBytes: 1 << 20, Partitions: []FetchPartition{{
				Topic: "d", Partition: 0, FetchOffset: bad, CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}}}
			b.Fetch(context.Background(), req)
			if err := req.Partitions[0].Err; !errors.Is(err, kerr.KafkaStorageError) {
				t.Fatalf("a fetch at the damaged batch %d: %v, want KAFKA_STORAGE_ERROR", bad, err)
			}
			req.Partitions[0].Records.Release()
			if b.LogDirOffline() != nil {
				t.Fatalf("a damaged batch took the log directory offline: %v", b.LogDirOffline())
			}
			reps := dc.damageReports()
			if len(reps) == 0 || reps[0].Broker != id || reps[0].Offset != bad || reps[0].File != file {
				t.Fatalf("damage reports %v, want broker %d offset %d in %s", reps, id, bad, file)
			}
			dc.waitFor("leadership moved away from the damaged replica", 10*time.Second, func() bool {
				st, _ := dc.ctrl.Partition("d", 0)
				return st.Leader != id && st.Leader != controller.NoLeader
			})
			dc.waitInISR(id)
			if s := b.DamageStats(); s.Found != 1 || s.Truncated != 1 {
				t.Fatalf("DamageStats %+v, want 1 found and 1 truncated", s)
			}
			dc.waitFor("the new leader's HW back at the acknowledged end", 10*time.Second, func() bool {
				return dc.leader("d", 0).lookup("d", 0).r.HW() >= hw
			})
			values, _ := consume(t, dc.leader("d", 0), "d", 0, 0)
			if int64(len(values)) < hw {
				t.Fatalf("a consumer read %d records, %d were acknowledged", len(values), hw)
			}
			dc.waitFor("the healed replica caught up", 10*time.Second, func() bool {
				return b.lookup("d", 0).r.LEO() == dc.leader("d", 0).lookup("d", 0).r.LEO()
			})
			dc.assertReplicasIdentical("d", 0)
		})
	}
}

// TestScrubHealsFollower: the scrub finds a batch flipped in a follower's sealed segment (no
// reader would: followers serve no reads); the follower leaves the ISR, truncates below the
// damage, re-replicates and rejoins.
func TestScrubHealsFollower(t *testing.T) {
	dc := newDamageCluster(t)
	st, _ := dc.ctrl.Partition("d", 0)
	id := st.Replicas[0]
	if id == st.Leader {
		id = st.Replicas[1]
	}
	var bad int64
	b := dc.restartDamaged(id, func() { bad = flipBatch(t, dc.segments(id)[1], 0) })
	if n := b.Scrub(context.Background()); n == 0 {
		t.Fatal("Scrub checked nothing")
	}
	reps := dc.damageReports()
	if len(reps) != 1 || reps[0].Offset != bad || reps[0].Broker != id {
		t.Fatalf("damage reports %v, want broker %d offset %d", reps, id, bad)
	}
	dc.waitFor("the damaged follower truncated", 10*time.Second, func() bool { return b.DamageStats().Truncated == 1 })
	dc.waitInISR(id)
	dc.waitFor("the healed follower caught up", 10*time.Second, func() bool {
		return b.lookup("d", 0).r.LEO() == dc.leader("d", 0).lookup("d", 0).r.LEO()
	})
	dc.assertReplicasIdentical("d", 0)
	if n := b.Scrub(context.Background()); n == 0 || len(dc.damageReports()) != 1 {
		t.Fatalf("a second scrub after healing: %d bytes, reports %v", n, dc.damageReports())
	}
}

// TestFollowerRefusesCorruptBatch: a leader that serves a batch failing its CRC (bytes it
// wrote itself, damaged behind its back) does not get it appended by its follower: the
// follower counts and reports it and stays below it.
func TestFollowerRefusesCorruptBatch(t *testing.T) {
	dc := newDamageCluster(t)
	st, _ := dc.ctrl.Partition("d", 0)
	leader := dc.broker(st.Leader)
	follower := st.Replicas[0]
	if follower == st.Leader {
		follower = st.Replicas[1]
	}
	if err := dc.broker(follower).Close(); err != nil {
		t.Fatal(err)
	}
	dc.ctrl.BrokerDown(follower)
	before := leader.lookup("d", 0).r.LEO()
	for i := 0; i < 3; i++ {
		if res := produce(t, leader, -1, "d", 0, batch("w", 10)); res.Err != nil {
			t.Fatalf("produce: %v", res.Err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dc.dirs[st.Leader], "d-0", "*.log"))
	sort.Strings(files)
	bad := flipBatch(t, files[len(files)-1], -2) // appended by the running leader: trusted, served as is
	if bad < before {
		t.Fatalf("flipped batch %d is not one of the new ones (from %d)", bad, before)
	}
	b := dc.start(follower)
	dc.waitFor("the follower refused the corrupt batch", 20*time.Second, func() bool { return b.DamageStats().FetchedCorrupt > 0 })
	if leo := b.lookup("d", 0).r.LEO(); leo > bad {
		t.Fatalf("the follower's LEO %d passed the corrupt batch at %d", leo, bad)
	}
}

// TestNewReplicaNotDamaged: a replica created after the broker started (a new topic) holds
// nothing it could have lost: it is not called damaged, even when the broker's HW checkpoint
// was unreadable at start (which does make the replicas it held then suspect).
func TestNewReplicaNotDamaged(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	cfg := testConfig()
	cfg.Logf = func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	c := newTestCluster(t, 3, cfg)
	c.createTopic("old", 1, 3, nil)
	if err := c.broker(0).Close(); err != nil {
		t.Fatal(err)
	}
	c.ctrl.BrokerDown(0)
	if err := os.WriteFile(filepath.Join(c.dirs[0], HWCheckpointFile), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The new leader of old-0 is paused while broker 0 starts, so that broker 0 cannot
	// re-replicate (which clears the damage) before its report is checked.
	l := c.leader("old", 0)
	l.Pause()
	c.start(0)
	d := c.ctrl.Damaged("old", 0)
	l.Resume()
	if !slices.Equal(d, []int32{0}) {
		t.Fatalf("a replica held while the checkpoint became unreadable: Damaged %v, want [0]", d)
	}
	c.createTopic("new", 2, 3, nil)
	for p := int32(0); p < 2; p++ {
		if d := c.ctrl.Damaged("new", p); len(d) != 0 {
			t.Fatalf("new-%d: Damaged %v, want none", p, d)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		if strings.Contains(l, "new-") && strings.Contains(l, "damaged") {
			t.Fatalf("a new replica was called damaged: %s", l)
		}
	}
}
