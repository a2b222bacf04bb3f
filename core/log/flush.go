package log

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/isrbench/isrbench/core/vfs"
)

// FlushInBackground runs job on one of the process's background flushers, goroutines
// started on first use (Kafka's scheduler threads; Config.RollFlush), or in the calling
// goroutine when their queue is full, so that a disk that cannot keep up slows the appends
// down instead of letting the queue grow. Safe for concurrent use.
func FlushInBackground(job func()) {
	if !bgFlush.Offer(job) {
		job()
	}
}

// The background flushers: how many goroutines fsync rolled segments (they wait for the disk,
// not for a core) and how many flushes may wait for them.
const (
	backgroundFlushers   = 4
	backgroundFlushQueue = 4096
)

var bgFlush = JobQueue{Workers: backgroundFlushers, Size: backgroundFlushQueue}

// A JobQueue runs the jobs offered to it on its Workers, goroutines started on first use
// that live as long as the process; it holds up to Size jobs not yet started.
type JobQueue struct {
	Workers, Size int
	once          sync.Once
	jobs          chan func()
}

// Offer queues job, or returns false when the queue is full (the caller runs it itself).
func (q *JobQueue) Offer(job func()) bool {
	q.once.Do(func() {
		q.jobs = make(chan func(), q.Size)
		for range q.Workers {
			go func() {
				for j := range q.jobs {
					j()
				}
			}()
		}
	})
	select {
	case q.jobs <- job:
		return true
	default:
		return false
	}
}

// rolledSeg is a segment sealed by a roll, waiting for its flush, with the reference on its
// file the flush uses (so no descriptor has to be found for it).
type rolledSeg struct {
	s *segment
	h *segFile
}

// flushRolled flushes the segments sealed by rolls, as Kafka's roll schedules the flush of
// the old segment (UnifiedLog.roll: flushUptoOffsetExclusive(newSegment.baseOffset)): each
// one's .log and its pending index entries are written and fsynced, then the log directory
// (the new segments' entries), and the recovery point moves up to the first segment with
// unflushed bytes. So, flush.messages or not, a machine crash loses at most the active
// segment's tail.
//
// Config.RollFlush runs it in the background (Kafka runs it on its scheduler thread), or, by
// default, the Append that rolled runs it after its group commit, in its own goroutine
// (which keeps the deterministic simulator deterministic); either way outside wmu, so other
// appends go on during the fsyncs: only the bookkeeping takes wmu. A truncation or deletion
// of a segment meanwhile (its gen changed) discards that segment's result. A resource error
// (no descriptor for the .index or the directory) leaves the segment queued for the next
// Append to try again; an fsync failure poisons the Log and is returned.
func (l *Log) flushRolled() error {
	type job struct {
		rolledSeg
		gen          int64
		size         int64
		idx          []byte // index entries [idxFrom, idxTo) not yet written, encoded
		idxFrom      int
		idxTo        int
		logOK, idxOK bool
	}
	l.wmu.Lock()
	if !l.rollFlush.Load() || l.closed.Load() {
		l.wmu.Unlock()
		return nil
	}
	jobs := make([]job, len(l.wmu.rolled))
	for i, r := range l.wmu.rolled {
		s := r.s
		j := &jobs[i]
		j.rolledSeg, j.gen, j.size, j.idxFrom, j.idxTo = r, s.gen.Load(), s.size, s.idxWritten, len(s.index)
		for _, e := range s.index[s.idxWritten:] {
			j.idx = binary.BigEndian.AppendUint32(j.idx, e.rel)
			j.idx = binary.BigEndian.AppendUint32(j.idx, e.pos)
		}
	}
	clear(l.wmu.rolled)
	l.wmu.rolled = l.wmu.rolled[:0]
	l.rollFlush.Store(false)
	l.wmu.Unlock()

	var ferr error
	for i := range jobs {
		j := &jobs[i]
		if err := l.fsync(j.h.f); err != nil {
			ferr = l.poison("fsync rolled segment", fmt.Errorf("%s: %w", j.s.logPath, err))
			break
		}
		j.logOK = true
		l.dropSealed(j.h)
		l.idxMu.Lock()
		if j.s.gen.Load() == j.gen && !l.closed.Load() { // no write after Close or Abandon
			err := j.s.withIndex("flush", func(f vfs.File) error {
				if len(j.idx) > 0 {
					if _, err := f.WriteAt(j.idx, int64(j.idxFrom)*indexEntrySize); err != nil {
						return fmt.Errorf("log: write index %s: %w", j.s.idxPath, err)
					}
				}
				return f.Sync()
			})
			if err == nil {
				j.idxOK = true
			} else if !IsResourceError(err) {
				ferr = l.poison("index flush", err)
			}
		}
		l.idxMu.Unlock()
		if ferr != nil {
			break
		}
		if err := l.syncTxnIndex(j.s); err != nil && !IsResourceError(err) {
			ferr = err
			break
		}
	}
	dirOK := false
	if ferr == nil {
		if err := l.fs.SyncDir(l.dir); err == nil {
			dirOK = true
		} else if !IsResourceError(err) {
			ferr = l.poison("fsync log dir", fmt.Errorf("%s: %w", l.dir, err))
		}
	}

	l.wmu.Lock()
	defer l.wmu.Unlock()
	for i := range jobs {
		j := &jobs[i]
		s := j.s
		current := s.gen.Load() == j.gen
		if current && dirOK && j.logOK {
			s.synced = max(s.synced, j.size)
		}
		if current && j.idxOK {
			s.idxWritten = max(s.idxWritten, j.idxTo)
			s.idxSynced = max(s.idxSynced, j.idxTo)
		}
		if current && (!dirOK || !j.logOK || !j.idxOK) && ferr == nil && !l.closed.Load() {
			l.wmu.rolled = append(l.wmu.rolled, j.rolledSeg) // try again at the next Append
			l.rollFlush.Store(true)
			continue
		}
		j.h.unref()
	}
	if ferr != nil || l.closed.Load() {
		return ferr
	}
	return l.advanceRecoveryPoint()
}

// advanceRecoveryPoint persists, when it is higher than the persisted one, the recovery
// point the fsynced segments allow: the base of the first segment with unsynced bytes, or
// the LEO (wmu held). A resource error leaves the old one for a later try.
func (l *Log) advanceRecoveryPoint() error {
	rp := l.leo.Load()
	for _, s := range l.mu.segs {
		if s.synced < s.size {
			rp = s.base
			break
		}
	}
	if rp <= l.wmu.recoveryPoint {
		return nil
	}
	if err := l.setRecoveryPoint(rp); err != nil && !IsResourceError(err) {
		return err
	}
	return nil
}

// fsync makes f's contents durable: through the Writer's Syncer (io_uring) when it has one
// and f has a descriptor, else (or while f's syncs are deferred, vfs.SyncDeferred)
// File.Sync.
func (l *Log) fsync(f vfs.File) error {
	if osf := f.OS(); osf != nil && l.syncer != nil && !vfs.SyncDeferred(f) {
		return l.syncer.Fsync(osf)
	}
	return f.Sync()
}

// fsyncDirty fsyncs every segment with unsynced bytes (wmu held). A sealed segment's file
// is opened when it is closed; a resource error doing so fails the flush, not the Log.
func (l *Log) fsyncDirty() error {
	for _, s := range l.mu.segs {
		if s.synced >= s.size {
			continue
		}
		f, h := s.w, (*segFile)(nil)
		if f == nil {
			var err error
			if h, err = s.acquire(); err != nil {
				return l.fail("open segment to fsync", err)
			}
			f = h.f
		}
		err := l.fsync(f)
		if h != nil {
			h.unref()
		}
		if err != nil {
			return l.poison("fsync", err)
		}
		s.synced = s.size
	}
	if l.wmu.dirDirty {
		// A segment created since the directory's last fsync: without its entry a crash
		// loses the file, fsynced contents and all (Kafka's LocalLog.flush syncs it too).
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail("fsync log dir", fmt.Errorf("%s: %w", l.dir, err))
		}
		l.wmu.dirDirty = false
	}
	l.wmu.unflushed = 0
	if l.flushT {
		l.wmu.lastFlushMs = l.nowMs()
	}
	return nil
}

// Flush fsyncs all segments and their indexes and persists the recovery point (the LEO).
// A resource error (no descriptor to open a file with) fails it without poisoning the Log.
func (l *Log) Flush() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	return l.flushLocked()
}

func (l *Log) flushLocked() error {
	if err := l.fsyncDirty(); err != nil {
		return err
	}
	l.idxMu.Lock()
	defer l.idxMu.Unlock()
	for _, s := range l.mu.segs {
		var err error
		if l.wmu.idxScratch, err = s.writeIndex(l.wmu.idxScratch, true); err != nil {
			return l.fail("index write", err)
		}
		if err := l.syncTxnIndex(s); err != nil {
			return err
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("fsync log dir", fmt.Errorf("%s: %w", l.dir, err))
	}
	return l.setRecoveryPoint(l.leo.Load())
}

// setRecoveryPoint persists rp (wmu held). A resource error keeps the old one and leaves the
// Log usable; another error poisons it.
func (l *Log) setRecoveryPoint(rp int64) error {
	if rp == l.wmu.recoveryPoint {
		return nil
	}
	return l.writeRecoveryPoint(rp)
}

// writeRecoveryPoint writes rp to the recovery-point checkpoint (wmu held); see
// setRecoveryPoint.
func (l *Log) writeRecoveryPoint(rp int64) error {
	if err := WriteCheckpoint(l.fs, filepath.Join(l.dir, RecoveryPointFile), 0, []string{fmt.Sprint(rp)}); err != nil {
		return l.fail("recovery-point checkpoint", err)
	}
	l.wmu.recoveryPoint = rp
	return nil
}
