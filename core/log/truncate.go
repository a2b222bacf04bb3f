package log

import (
	"fmt"
	"os"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
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
	si := l.findSegment(bound)
	seg := l.mu.segs[si]
	var cut int64 // byte position of bound in seg
	if len(seg.entries) > 0 && bound < seg.next {
		cut = int64(seg.entries[seg.find(bound)].pos)
	} else {
		cut = seg.size
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
	l.leo.Store(bound)
	l.mu.Unlock()
	l.size.Add(-dropped)
	seg.synced = min(seg.synced, cut)
	if err := seg.f.Truncate(cut); err != nil {
		return l.poison("truncate", err)
	}
	if err := seg.truncateIndex(cut); err != nil {
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
	if l.wmu.recoveryPoint > bound {
		return l.setRecoveryPoint(bound)
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and restarts the log empty at offset
// (LogStart = LEO = offset), as a follower does when the leader's log start is past its LEO.
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

func (l *Log) truncateFullyLocked(offset int64) error {
	if offset < 0 {
		offset = 0
	}
	old := l.mu.segs
	// Unlink first: the new segment may reuse a name. Open Slices keep their files.
	var rmErr error
	for _, s := range old {
		if err := l.fs.Remove(s.logPath); err != nil && !os.IsNotExist(err) && rmErr == nil {
			rmErr = err
		}
		if err := l.fs.Remove(s.idxPath); err != nil && !os.IsNotExist(err) && rmErr == nil {
			rmErr = err
		}
	}
	if rmErr != nil {
		return l.poison("truncate fully", rmErr)
	}
	ns, err := createSegment(l.fs, l.dir, offset)
	if err != nil {
		return l.poison("truncate fully", err)
	}
	l.mu.Lock()
	l.mu.segs = []*segment{ns}
	l.logStart.Store(offset)
	l.leo.Store(offset)
	l.mu.Unlock()
	l.size.Store(0)
	for _, s := range old {
		s.unref()
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.poison("truncate fully", err)
	}
	if err := l.persistLogStartLocked(); err != nil {
		return err
	}
	l.wmu.recoveryPoint = -1 // force the write
	return l.setRecoveryPoint(offset)
}
