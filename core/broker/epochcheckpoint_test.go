package broker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/core/vfs"
)

// epochWriteFS counts the files created for leader-epoch checkpoints.
type epochWriteFS struct {
	vfs.FS
	writes atomic.Int64
}

func (c *epochWriteFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&os.O_CREATE != 0 && strings.Contains(filepath.Base(name), partition.EpochCheckpointFile) {
		c.writes.Add(1)
	}
	return c.FS.OpenFile(name, flag, perm)
}

func (c *epochWriteFS) SyncFS(dir string) error { return c.FS.(vfs.FSSyncer).SyncFS(dir) }

// TestQueuedEpochCheckpoints (isrbench.leader.epoch.checkpoint.async on): new
// replicas' leader-epoch checkpoints are not written by the election that assigns their
// epoch but by the queue (here a Manual broker's WritePendingEpochCheckpoints); a broker
// killed before they ran comes back with the entries restored from its batches, and its
// queued writes, run after the new incarnation opened the same files, write nothing.
func TestQueuedEpochCheckpoints(t *testing.T) {
	const parts = 4
	fs := &epochWriteFS{FS: vfs.NewStrictMemFS(nil)}
	ctrl, b := startCloseBrokerWithTopic(t, fs, true, parts)
	b.WritePendingPartitionMetadata()
	if w := fs.writes.Load(); w != 0 {
		t.Fatalf("%d leader-epoch checkpoints written by the elections, want them queued", w)
	}
	want := make([][]partition.EpochEntry, parts)
	for p := range want {
		r, _ := b.Replica("t", int32(p))
		want[p] = r.Epochs().Entries()
		if len(want[p]) == 0 {
			t.Fatalf("t-%d has no leader epoch entry", p)
		}
	}
	b.epochQ.Lock()
	queued := len(b.epochQ.pending)
	b.epochQ.Unlock()
	if queued != parts {
		t.Fatalf("%d checkpoint writes queued, want %d", queued, parts)
	}

	b.Kill()
	var logs lines
	b2 := startCloseBroker(t, ctrl, fs, true, &logs)
	t.Cleanup(func() { _ = b2.Close() })
	if l := logs.find("restored"); l == "" {
		t.Error("the restart after the kill did not restore the lost checkpoint entries from the log")
	}
	for p := range want {
		r, ok := b2.Replica("t", int32(p))
		if !ok {
			t.Fatalf("t-%d not hosted after the restart", p)
		}
		// The entries from before the kill, restored; the new incarnation may already lead in
		// a later epoch too (the controller elects it again once it registers), whose entry
		// comes after them.
		if got := r.Epochs().Entries(); len(got) < len(want[p]) || !slices.Equal(got[:len(want[p])], want[p]) {
			t.Errorf("t-%d after the kill: epochs %v, want them to begin with %v", p, got, want[p])
		}
	}
	w := fs.writes.Load()
	if n := b.WritePendingEpochCheckpoints(); n != parts {
		t.Fatalf("the killed broker ran %d queued writes, want %d", n, parts)
	}
	if d := fs.writes.Load() - w; d != 0 {
		t.Fatalf("the killed broker's queued writes made %d checkpoint files in the new incarnation's directories", d)
	}
}
