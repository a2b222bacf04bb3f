package partition

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/isrbench/isrbench/core/vfs"
)

// The log-start snapshot: the producers that only the deleted part of the log showed.
//
// Retention, DeleteRecords and a follower following its leader's log start delete the
// batches below the new log start. A producer whose every batch and marker lay below it is
// then known only to the replica's memory: its epoch, which fences its zombies, its
// coordinator epoch, its last sequences. Rebuilding the state from the log, as a restart
// after a crash and every truncation do, would forget it, and a batch its fenced old process
// still retries (an epoch below the one the deleted marker carried) would be taken as a new
// producer's: with transactions, a transaction no coordinator knows of, which keeps the
// partition's LSO where it began for good. Kafka keeps such producers in the snapshot files
// it writes at every segment roll.
//
// Before the log start moves (the log's SetBeforeLogStart hook, called before any segment is
// deleted), the replica writes the state of the producers whose last batch or marker
// (producerEntry.lastAt) lies below the new log start to <replica dir>/log-start.producers,
// in the snapshot layout (snapshot.go) at the new log start's offset, durably, and keeps its
// bytes. A producer with anything at or past it is left to the replay of the log. Every
// rebuild of the state from the log (open without a Close snapshot, truncation) starts from
// it, then replays the log: from the log start, skipping below the snapshot's offset the
// records of the producers it holds (a crash can leave the log start below the snapshot's
// offset, when segments were deleted and the log start checkpoint not yet written). A
// snapshot at an offset below the log start, or past the LEO, is stale and ignored. The file
// goes when no producer is left to keep, and when the log is emptied
// (TruncateFullyAndStartAt).

// logStartSnapName is the log-start snapshot's file name in the replica directory.
const logStartSnapName = "log-start.producers"

// logStartSnap is the log-start snapshot in effect: its offset and encoded state (nil: none).
type logStartSnap struct {
	offset int64
	data   []byte
}

// beforeLogStart is the log's hook: it keeps the producers the log start about to move to
// newStart leaves without a batch or marker in the log. Called with the log's writer lock
// held; an error stops the move.
func (r *Replica) beforeLogStart(newStart int64) error {
	ps := &r.producers
	ps.mu.Lock()
	kept := 0
	data := ps.encodeSnapshotLocked(newStart, func(e *producerEntry) bool {
		if e.lastAt >= 0 && e.lastAt < newStart { // changed, and last below the new log start
			kept++
			return true
		}
		return false
	})
	had := ps.logStartSnap.data != nil
	ps.mu.Unlock()
	if kept == 0 {
		if !had {
			return nil
		}
		data = nil
	}
	if r.dir != "" {
		fs, path := vfs.Or(r.cfg.FS), r.logStartSnapPath()
		if kept == 0 {
			if err := fs.Remove(path); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("partition %s-%d: removing %s: %w", r.topic, r.partition, path, err)
			}
		} else if err := vfs.WriteFileAtomic(fs, path, data); err != nil {
			return fmt.Errorf("partition %s-%d: writing %s (%d producers at log start %d): %w", r.topic, r.partition, path, kept, newStart, err)
		}
	}
	ps.mu.Lock()
	ps.logStartSnap = logStartSnap{offset: newStart, data: data}
	ps.mu.Unlock()
	return nil
}

// loadLogStartSnapshot reads the log-start snapshot at open: kept when its offset is within
// [log start, LEO], else (stale, damaged) removed.
func (r *Replica) loadLogStartSnapshot(fs vfs.FS) {
	path := r.logStartSnapPath()
	b, err := vfs.ReadFile(fs, path)
	if err != nil {
		return
	}
	snap, err := decodeSnapshot(b)
	if err != nil || snap.offset < r.log.LogStart() || snap.offset > r.log.LEO() {
		_ = fs.Remove(path)
		return
	}
	r.producers.mu.Lock()
	r.producers.logStartSnap = logStartSnap{offset: snap.offset, data: b}
	r.producers.mu.Unlock()
}

// replayFromLogStartLocked rebuilds the state (emptied by the caller, ps.mu held) from the
// log-start snapshot, when one is in effect for the log as it is, and the log from its start.
func (r *Replica) replayFromLogStartLocked() error {
	ps := &r.producers
	start := r.log.LogStart()
	ls := ps.logStartSnap
	if ls.data == nil || ls.offset < start || ls.offset > r.log.LEO() {
		return r.replayLocked(start)
	}
	snap, err := decodeSnapshot(ls.data)
	if err != nil {
		return fmt.Errorf("partition %s-%d: log-start snapshot: %w", r.topic, r.partition, err)
	}
	if ps.producers == nil {
		ps.producers = make(map[int64]*producerEntry)
	}
	for id, e := range snap.entries {
		ps.producers[id] = e
	}
	for id, first := range snap.ongoing {
		ps.txn.beginLocked(id, first)
	}
	return r.replaySkippingLocked(start, ls.offset, snap.entries)
}

// removeLogStartSnapshot removes the log-start snapshot file (the log was emptied).
func (r *Replica) removeLogStartSnapshot() {
	if r.dir != "" {
		_ = vfs.Or(r.cfg.FS).Remove(r.logStartSnapPath())
	}
}

// logStartSnapPath is the log-start snapshot's path in the replica directory.
func (r *Replica) logStartSnapPath() string { return filepath.Join(r.dir, logStartSnapName) }
