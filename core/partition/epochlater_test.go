package partition

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// laterQueue is an EpochCheckpointLater that holds the writes until the test runs them, or
// refuses them (full).
type laterQueue struct {
	full bool
	jobs []func() error
}

func (q *laterQueue) later(write func() error) bool {
	if q.full {
		return false
	}
	q.jobs = append(q.jobs, write)
	return true
}

// run runs the queued writes in order and returns the first error.
func (q *laterQueue) run() error {
	jobs := q.jobs
	q.jobs = nil
	var first error
	for _, j := range jobs {
		if err := j(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func readCheckpoint(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, EpochCheckpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "(none)"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEpochCheckpointLater: with a later function (isrbench.leader.epoch.checkpoint.async)
// Assign leaves the file to the queued write, which writes the entries as they are when it
// runs (one write for the Assigns before it); a truncation still writes the file before it
// returns; a full queue writes at once; Close writes what is pending and ends the writes, so
// a write queued for a replica deleted meanwhile creates nothing; a failed queued write makes
// the next change write the file at once and report it.
func TestEpochCheckpointLater(t *testing.T) {
	dir := t.TempDir()
	c, err := LoadEpochCache(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	q := &laterQueue{}
	c.later = q.later
	for _, e := range []EpochEntry{{0, 0}, {3, 1500}} {
		if changed, err := c.Assign(e.Epoch, e.StartOffset); !changed || err != nil {
			t.Fatalf("Assign(%v) = %v, %v", e, changed, err)
		}
	}
	if got := readCheckpoint(t, dir); got != "(none)" || len(q.jobs) != 1 {
		t.Fatalf("after two Assigns: file %q, %d queued writes; want no file and one write", got, len(q.jobs))
	}
	if err := q.run(); err != nil {
		t.Fatal(err)
	}
	if got, want := readCheckpoint(t, dir), "0\n2\n0 0\n3 1500\n"; got != want {
		t.Fatalf("after the queued write: %q, want %q", got, want)
	}

	// A truncation writes at once; the write queued before it has nothing left to do.
	if _, err := c.Assign(5, 2000); err != nil {
		t.Fatal(err)
	}
	if err := c.TruncateFromEnd(1800); err != nil {
		t.Fatal(err)
	}
	if got, want := readCheckpoint(t, dir), "0\n2\n0 0\n3 1500\n"; got != want {
		t.Fatalf("after TruncateFromEnd: %q, want %q", got, want)
	}
	if err := os.Remove(filepath.Join(dir, EpochCheckpointFile)); err != nil {
		t.Fatal(err)
	}
	if err := q.run(); err != nil || readCheckpoint(t, dir) != "(none)" {
		t.Fatalf("the queued write after a truncation wrote the file (err %v)", err)
	}

	// A full queue: the write is made at once.
	q.full = true
	if _, err := c.Assign(6, 1900); err != nil {
		t.Fatal(err)
	}
	if got, want := readCheckpoint(t, dir), "0\n3\n0 0\n3 1500\n6 1900\n"; got != want {
		t.Fatalf("with the queue full: %q, want %q", got, want)
	}
	q.full = false

	// A failed queued write (the directory gone): the next change writes at once and says so;
	// once the directory is back, it succeeds.
	if _, err := c.Assign(7, 2000); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := q.run(); err == nil {
		t.Fatal("the queued write into a removed directory reported no error")
	}
	if _, err := c.Assign(8, 2100); err == nil || len(q.jobs) != 0 {
		t.Fatalf("the Assign after a failed write: err %v, %d queued; want its own write's error", err, len(q.jobs))
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Assign(8, 2100); err != nil { // no change: the stale file is written
		t.Fatal(err)
	}
	if got, want := readCheckpoint(t, dir), "0\n5\n0 0\n3 1500\n6 1900\n7 2000\n8 2100\n"; got != want {
		t.Fatalf("after the directory came back: %q, want %q", got, want)
	}

	// Close writes what is queued and ends the writes.
	if _, err := c.Assign(9, 2200); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readCheckpoint(t, dir); !strings.HasSuffix(got, "9 2200\n") {
		t.Fatalf("after Close: %q, want the pending 9 2200 written", got)
	}
	if err := os.RemoveAll(dir); err != nil { // the replica is deleted ...
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil { // ... and its topic created again
		t.Fatal(err)
	}
	if _, err := c.Assign(10, 2300); err != nil {
		t.Fatal(err)
	}
	if err := q.run(); err != nil {
		t.Fatal(err)
	}
	if got := readCheckpoint(t, dir); got != "(none)" {
		t.Fatalf("a closed cache wrote %q into the directory of the next incarnation", got)
	}
}

// TestEpochCheckpointQueuedLostInKill: a replica whose queued checkpoint writes never ran (the
// process was killed) comes back with the entries restored from its batches, and a replica
// closed cleanly leaves them in its file.
func TestEpochCheckpointQueuedLostInKill(t *testing.T) {
	for _, clean := range []bool{false, true} {
		name := "killed"
		if clean {
			name = "closed"
		}
		t.Run(name, func(t *testing.T) {
			mfs := vfs.NewMemFS(nil)
			const dir = "/b/t-0"
			if err := vfs.MkdirAllDurable(mfs, dir); err != nil {
				t.Fatal(err)
			}
			q := &laterQueue{}
			open := func() *Replica {
				t.Helper()
				cfg := log.DefaultConfig()
				cfg.FS = mfs
				l, _, err := log.Open(dir, cfg)
				if err != nil {
					t.Fatal(err)
				}
				r, err := NewReplica("t", 0, 0, l, dir, Config{MinInsyncReplicas: 1, FS: mfs, EpochCheckpointLater: q.later})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			r := open()
			for _, epoch := range []int32{1, 4} {
				st := controller.PartitionState{Topic: "t", Leader: 0, LeaderEpoch: epoch, Replicas: []int32{0}, ISR: []int32{0}}
				if err := r.MakeLeader(st); err != nil {
					t.Fatal(err)
				}
				if _, err := r.AppendAsLeader(batches(3), 1); err != nil {
					t.Fatal(err)
				}
			}
			want := []EpochEntry{{1, 0}, {4, 3}}
			if got := r.Epochs().Entries(); !slices.Equal(got, want) {
				t.Fatalf("epochs %v, want %v", got, want)
			}
			if c, err := LoadEpochCache(mfs, dir); err != nil || len(c.Entries()) != 0 || len(q.jobs) == 0 {
				t.Fatalf("before the writes ran the file holds %v (err %v), %d writes queued; want nothing written yet", c.Entries(), err, len(q.jobs))
			}
			q.jobs = nil // never run: the process dies with them
			if clean {
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				if c, err := LoadEpochCache(mfs, dir); err != nil || !slices.Equal(c.Entries(), want) {
					t.Fatalf("after Close the file holds %v (err %v), want %v", c.Entries(), err, want)
				}
			}
			r2 := open()
			defer r2.Close()
			if got := r2.Epochs().Entries(); !slices.Equal(got, want) {
				t.Fatalf("reopened with epochs %v, want %v", got, want)
			}
			if why := r2.EpochCacheRebuilt(); clean != (why == "") {
				t.Fatalf("EpochCacheRebuilt %q after a %s stop", why, name)
			}
			if c, err := LoadEpochCache(mfs, dir); err != nil || !slices.Equal(c.Entries(), want) {
				t.Fatalf("after reopening the file holds %v (err %v), want %v", c.Entries(), err, want)
			}
		})
	}
}
