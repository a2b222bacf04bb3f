package log

import (
	"fmt"
	"os"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/vfs"
)

// TruncateTo removes every batch with base offset >= offset; an offset inside a batch is
// rounded down to that batch's base offset (the batch is removed). The LEO becomes that
// boundary. offset >= LEO is a no-op; offset below the first segment empties the log and
// restarts it at offset (TruncateFullyAndStartAt); a log start above the boundary (inside
// the first segment, IncrementLogStart) comes down to it, as Kafka's UnifiedLog.truncateTo
// does. Segments past the boundary are deleted.
func (l *Log) TruncateTo(offset int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	leo := l.leo.Load()
	if offset >= leo {
		return nil
	}
	if offset < l.mu.segs[0].base {
		return l.truncateFullyLocked(offset)
	}
	bound, err := l.boundaryLocked(offset, leo)
	if err != nil {
		return err
	}
	l.cutOpenEpochsLocked(bound)
	si := l.findSegment(bound)
	seg := l.mu.segs[si]
	var cut int64 // byte position of bound in seg
	if len(seg.entries) > 0 && bound < seg.next {
		cut = int64(seg.entries[seg.find(bound)].pos)
	} else {
		cut = seg.size
	}
	// First what may fail for want of a descriptor, so that such a failure changes nothing:
	// the recovery point comes down (the bytes from bound on will be rewritten, and a crash
	// must find them checked), the segment's file (sealed: maybe closed) and its index are
	// opened.
	if l.wmu.recoveryPoint > bound {
		if err := l.setRecoveryPoint(bound); err != nil {
			return err
		}
	}
	f := seg.w
	var h *segFile
	if f == nil {
		if h, err = seg.acquire(); err != nil {
			return l.fail("open segment to truncate", err)
		}
		defer h.unref()
		f = h.f
	}
	var idx vfs.File
	if _, fileToo := seg.indexCutAt(cut); fileToo {
		if idx, err = l.fs.OpenFile(seg.idxPath, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			return l.fail("open index to truncate", fmt.Errorf("log: %s: %w", seg.idxPath, err))
		}
		defer idx.Close()
	}
	removed := append([]*segment(nil), l.mu.segs[si+1:]...)
	var dropped int64
	for _, s := range removed {
		dropped += s.size
	}
	dropped += seg.size - cut
	l.mu.Lock()
	clear(l.mu.segs[si+1:])
	l.mu.segs = l.mu.segs[:si+1]
	n := sort.Search(len(seg.entries), func(i int) bool { return int64(seg.entries[i].pos) >= cut })
	seg.entries = seg.entries[:n]
	seg.size = cut
	seg.next = bound
	seg.ours.Store(min(seg.ours.Load(), cut))
	seg.checked.Store(min(seg.checked.Load(), cut))
	seg.wbStarted, seg.dropped = min(seg.wbStarted, cut), min(seg.dropped, cut) // drop-behind restarts at the cut
	l.leo.Store(bound)
	l.mu.Unlock()
	seg.gen.Add(1) // a roll flush of seg in flight does not count
	if h != nil {
		seg.activate(h) // the active segment again
		seg.w = h.f
	}
	l.size.Add(-dropped)
	seg.synced = min(seg.synced, cut)
	if err := f.Truncate(cut); err != nil {
		return l.poison("truncate", err)
	}
	l.idxMu.Lock()
	err = seg.truncateIndex(cut, idx)
	l.idxMu.Unlock()
	if err != nil {
		return l.poison("truncate", err)
	}
	l.txnMu.Lock()
	err = seg.truncateTxns(l.fs, bound)
	l.txnMu.Unlock()
	if err != nil {
		return l.poison("truncate", err)
	}
	var rmErr error
	for _, s := range removed {
		if err := s.remove(l.fs); err != nil && rmErr == nil {
			rmErr = err
		}
	}
	if rmErr != nil {
		return l.poison("truncate", rmErr)
	}
	if len(removed) > 0 {
		// The deletions durable, so that a crash does not bring the segments back.
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.poison("truncate", err)
		}
	}
	if l.logStart.Load() > bound {
		l.setLogStartLocked(bound)
		if err := l.persistLogStartLocked(); err != nil {
			return err
		}
	}
	if len(removed) > 0 {
		// The deletions durable, so a crash does not bring the segments back (recovery
		// would delete them again; a resource error here is left to it).
		if err := l.fs.SyncDir(l.dir); err != nil && !IsResourceError(err) {
			return l.poison("truncate", fmt.Errorf("fsync %s: %w", l.dir, err))
		}
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and restarts the log empty at offset
// (LogStart = LEO = offset), as a follower does when the leader's log start is past its LEO.
// A resource error (no descriptor for the new segment) fails it having changed nothing.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("log: TruncateFullyAndStartAt(%d): offset must be >= 0: %w", offset, kerr.OffsetOutOfRange)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

// deletedSuffix ends the names of a segment's files moved aside by truncateFullyLocked until
// the new segment exists (recovery deletes leftovers).
const deletedSuffix = ".deleted"

func (l *Log) truncateFullyLocked(offset int64) error {
	l.cutOpenEpochsLocked(-1)
	if offset < 0 {
		offset = 0
	}
	if l.wmu.recoveryPoint > offset {
		if err := l.setRecoveryPoint(offset); err != nil {
			return err
		}
	}
	old := l.mu.segs
	// The new segment is created before the old ones go, so that failing to create it (no
	// descriptor left) changes nothing. An old segment with the new one's name is moved
	// aside first, and back on failure; its fmu, held meanwhile, keeps readers from opening
	// it by a name it has not.
	var aside *segment
	for _, s := range old {
		if s.base == offset {
			aside = s
		}
	}
	if aside != nil {
		aside.fmu.Lock()
		if err := l.renameSegment(aside, "", deletedSuffix); err != nil {
			aside.fmu.Unlock()
			return l.poison("truncate fully", err)
		}
	}
	ns, err := l.createSegment(offset)
	if err != nil {
		if aside != nil {
			if rerr := l.renameSegment(aside, deletedSuffix, ""); rerr != nil {
				aside.fmu.Unlock()
				return l.poison("truncate fully", rerr)
			}
			aside.fmu.Unlock()
		}
		return l.fail("truncate fully", err)
	}
	if aside != nil {
		aside.retireLocked()
		aside.fmu.Unlock()
	}
	// Open Slices keep their files.
	var rmErr error
	for _, s := range old {
		if s == aside {
			s.gen.Add(1)
			s.w = nil
			for _, p := range []string{s.logPath + deletedSuffix, s.idxPath + deletedSuffix} {
				if err := l.fs.Remove(p); err != nil && !os.IsNotExist(err) && rmErr == nil {
					rmErr = err
				}
			}
			// Its .txnindex kept its name; the new segment has none yet.
			if err := s.removeTxnIndex(l.fs); err != nil && rmErr == nil {
				rmErr = err
			}
			continue
		}
		if err := s.remove(l.fs); err != nil && rmErr == nil {
			rmErr = err
		}
	}
	l.mu.Lock()
	l.mu.segs = []*segment{ns}
	l.logStart.Store(offset)
	l.leo.Store(offset)
	l.mu.Unlock()
	l.size.Store(0)
	if rmErr != nil {
		return l.poison("truncate fully", rmErr)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("truncate fully", fmt.Errorf("fsync %s: %w", l.dir, err))
	}
	if err := l.persistLogStartLocked(); err != nil {
		return err
	}
	// Written even when unchanged: the file may be missing. A resource error leaves the
	// old value, which is at most offset.
	if err := l.writeRecoveryPoint(offset); err != nil && !IsResourceError(err) {
		return err
	}
	return nil
}

// renameSegment renames the segment's files from their name+from to their name+to (the
// .index may be missing).
func (l *Log) renameSegment(s *segment, from, to string) error {
	if err := l.fs.Rename(s.logPath+from, s.logPath+to); err != nil {
		return fmt.Errorf("log: rename %s: %w", s.logPath+from, err)
	}
	if err := l.fs.Rename(s.idxPath+from, s.idxPath+to); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("log: rename %s: %w", s.idxPath+from, err)
	}
	return nil
}

// cutOpenEpochsLocked drops the epoch rises of EpochStartsAtOpen at or past offset (exclusive
// end of what a truncation keeps; -1: all), whose batches are gone (wmu held).
func (l *Log) cutOpenEpochsLocked(offset int64) {
	n := len(l.openEpochs)
	for n > 0 && l.openEpochs[n-1].StartOffset >= offset {
		n--
	}
	l.openEpochs = l.openEpochs[:n:n]
}
