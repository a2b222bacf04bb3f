package log

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Drop-behind (isrbench.log.drop.behind.bytes, Config.DropBehindBytes): a Log keeps about
// DropBehindBytes of its active segment's newest bytes in the page cache and lets the kernel
// have the pages of older ones back.
//
// Why: every byte appended lands in a page-cache page. While the page cache grows, each new
// page is memory the kernel takes from its free lists; on a virtual machine whose host
// reclaims free guest memory (free page reporting, ballooning) that first touch of a page is
// a fault in the host, which costs many times the copy itself. A log whose old pages are
// freed as it goes reuses the same, recently touched, pages for its next writes.
//
// How, for the active segment, in steps of half DropBehindBytes: once that much was
// appended since the last step, the new bytes are handed to the disk (sync_file_range
// SYNC_FILE_RANGE_WRITE: it starts the writeback and waits for none of it), and the bytes
// handed over at the previous step, written by now, are dropped from the page cache
// (posix_fadvise POSIX_FADV_DONTNEED, which frees clean pages and leaves any page still
// dirty or under writeback). A sealed segment is dropped whole after its roll flush
// fsynced it. The writeback is the one the roll flush would do anyway, done earlier; nothing
// is fsynced and nothing about durability, offsets or reads changes: a read of a dropped
// range reads the disk instead of the page cache. The default is 8 MiB; 0 (Kafka's
// behaviour) leaves the page cache to the kernel.
//
// The work runs outside the group commit, on a reference to the segment's file, so it never
// holds up other appends nor closes a descriptor under a reader. Where it runs:
//   - Config.DropBehindWait (isrbench.log.drop.behind.wait, the default): the step waits for
//     its writeback (SYNC_FILE_RANGE_WAIT_BEFORE|WRITE|WAIT_AFTER), and in a broker
//     (Config.RollFlush set) the steps of every Log of the process run one after another on
//     one goroutine, the drop-behind goroutine. Replicas fed at the same rate cross their
//     steps at the same moment (a leader and its followers always do); started together,
//     their writebacks reached the disk as one burst of every replica's half step (6
//     partitions, RF 3: 72 MiB), and appends stalled behind it: ack p99.9 of the default
//     spec 20.3 ms against 2.9 ms with the steps one at a time (medians of 5 interleaved
//     runs, README). The previous step's range is then clean when it is dropped, so all of
//     it leaves the page cache.
//   - Without it, the step only starts the writeback (SYNC_FILE_RANGE_WRITE) and runs where
//     the roll flush runs (Config.RollFlush: on the background flushers in a broker).
//   - Either way, with no Config.RollFlush (the simulator, tests) the step runs in the Append
//     whose commit crossed it.
// A step that finds the drop-behind goroutine's queue full is left due, and a later Append
// queues it again.

// dropStep is how many appended bytes of the active segment trigger a drop-behind step.
func (l *Log) dropStep() int64 { return max(l.cfg.DropBehindBytes/2, 64<<10) }

// noteDropBehind records, after a commit (wmu held), whether the active segment seg has a
// drop-behind step due.
func (l *Log) noteDropBehind(seg *segment) {
	if l.cfg.DropBehindBytes > 0 && seg.size-seg.wbStarted >= l.dropStep() {
		l.dropDue.Store(true)
	}
}

// queueDropBehind has the due drop-behind step of l run where Config.DropBehindWait and
// Config.RollFlush say (see above).
func (l *Log) queueDropBehind() {
	switch {
	case l.cfg.RollFlush == nil:
		l.dropBehind()
	case !l.dropQueued.CompareAndSwap(false, true):
		// queued already
	case !l.cfg.DropBehindWait:
		l.cfg.RollFlush(l.dropJob)
	default:
		if !dropQueue.Offer(l.dropJob) {
			l.dropQueued.Store(false) // full: still due, a later Append queues it again
		}
	}
}

var (
	// dropQueue is the drop-behind goroutine; its queue holds at most one step per Log.
	dropQueue = JobQueue{Workers: 1, Size: 4096}
	// dropRunning counts the writebacks of drop-behind steps under way in the process, and
	// dropOverlapped records that two were ever under way at once (tests read them).
	dropRunning    atomic.Int32
	dropOverlapped atomic.Bool
)

// dropBehind runs the due drop-behind step of the active segment, unless another goroutine
// is running one.
func (l *Log) dropBehind() {
	if !l.dropMu.TryLock() {
		return
	}
	defer l.dropMu.Unlock()
	l.wmu.Lock()
	if !l.dropDue.Load() || l.closed.Load() || l.poisoned.Load() != nil {
		l.wmu.Unlock()
		return
	}
	l.dropDue.Store(false)
	seg := l.mu.segs[len(l.mu.segs)-1]
	h := seg.file.Load()
	if h == nil || seg.sealed.Load() || !h.tryRef() {
		l.wmu.Unlock()
		return
	}
	wbFrom, wbTo := seg.wbStarted, seg.size
	dropFrom, dropTo := seg.dropped, seg.wbStarted
	seg.wbStarted, seg.dropped = wbTo, dropTo
	l.wmu.Unlock()
	defer h.unref()
	f := h.f.OS()
	if f == nil {
		return // an in-memory file: no page cache
	}
	// Both calls are advice: a failure changes nothing written (a write error of the
	// writeback surfaces at the next fsync, as it would without them).
	fd := int(f.Fd())
	if wbTo > wbFrom {
		flags := unix.SYNC_FILE_RANGE_WRITE
		if l.cfg.DropBehindWait {
			flags |= unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WAIT_AFTER
		}
		if dropRunning.Add(1) > 1 {
			dropOverlapped.Store(true)
		}
		_ = unix.SyncFileRange(fd, wbFrom, wbTo-wbFrom, flags)
		dropRunning.Add(-1)
	}
	if dropTo > dropFrom {
		_ = unix.Fadvise(fd, dropFrom, dropTo-dropFrom, unix.FADV_DONTNEED)
	}
}

// dropSealed drops a sealed segment's .log from the page cache after its roll flush
// fsynced it (all its pages are clean).
func (l *Log) dropSealed(h *segFile) {
	if l.cfg.DropBehindBytes <= 0 {
		return
	}
	if f := h.f.OS(); f != nil {
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	}
}
