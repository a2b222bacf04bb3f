package log

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// RecoveryPointFile is the checkpoint in a replica directory holding the recovery point: the
// offset below which every batch was fsynced and needs no CRC check on Open.
const RecoveryPointFile = "recovery-point"

// Log is one replica's segmented log in its own directory.
//
// Concurrency: every method is safe for concurrent use. Appends are group-committed (see the
// package doc); Read, LEO, LogStart, Size and Segments never wait for a write syscall. Mutations
// (Append's commit, TruncateTo, TruncateFullyAndStartAt, ApplyRetention, Flush, Close,
// SimulatePowerLoss) are serialised.
type Log struct {
	dir    string
	cfg    Config
	fs     vfs.FS
	w      Writer
	syncer Syncer // nil: File.Sync
	nowMs  func() int64
	flushT bool // flush.ms is finite

	segBytes atomic.Int64 // cfg.SegmentBytes, read lock-free by Append's validation
	leo      atomic.Int64 // exclusive; published after the write
	logStart atomic.Int64 // inclusive; mirror of segs[0].base
	size     atomic.Int64
	closed   atomic.Bool
	poisoned atomic.Pointer[error]

	mu   sync.RWMutex // guards segs and the segments' published fields
	segs []*segment

	// wmu serialises mutations; the fields below are guarded by it.
	wmu           sync.Mutex
	unflushed     int64 // records appended since the last fsync
	lastFlushMs   int64
	recoveryPoint int64 // persisted recovery point
	bufs          [][]byte
	pend          []pending
	idxScratch    []byte

	gc struct {
		sync.Mutex
		queue  []*appendReq
		free   []*appendReq
		active bool // a committer is running
	}
	group []*appendReq // the current committer's batch (owned by the committer)

	testHookQueued func() // tests: called when an Append queues behind a running committer
}

// pending is a batch written (or about to be) but not yet published.
type pending struct {
	seg   *segment
	e     entry
	size  int64
	next  int64
	maxTs int64
}

// appendReq is one Append call waiting in the group-commit queue. Reused through Log.gc.free.
type appendReq struct {
	blob     []byte
	assign   bool
	epoch    int32
	first    int64 // follower mode: base offset of the first batch
	span     int64 // offsets the blob covers
	batches  int
	records  int64
	maxTs    int64
	info     AppendInfo
	err      error
	finished bool
	wake     chan struct{}
}

// Open opens (creating if needed) the log in dir, recovering it: batches from the recovery
// point on are CRC-checked, a torn or corrupt tail is truncated, segments after a corrupt one
// are deleted, missing or damaged indexes are rebuilt, and what was found is returned in
// Recovery. I/O errors fail Open (wrapping kerr.KafkaStorageError); corruption does not.
func Open(dir string, cfg Config) (*Log, Recovery, error) {
	if err := cfg.validate(); err != nil {
		return nil, Recovery{}, err
	}
	l := &Log{dir: dir, cfg: cfg, fs: vfs.Or(cfg.FS), w: cfg.Writer, nowMs: cfg.NowMs, flushT: cfg.FlushMs != math.MaxInt64}
	if l.w == nil {
		l.w = PwritevWriter{}
	}
	if s, ok := l.w.(Syncer); ok {
		l.syncer = s
	}
	if l.nowMs == nil {
		l.nowMs = func() int64 { return time.Now().UnixMilli() }
	}
	l.segBytes.Store(cfg.SegmentBytes)
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, Recovery{}, storageErrorf("create log dir: %w", err)
	}
	rec, err := l.recover()
	if err != nil {
		for _, s := range l.segs {
			s.close()
		}
		return nil, rec, err
	}
	if l.flushT {
		l.lastFlushMs = l.nowMs()
	}
	return l, rec, nil
}

func storageErrorf(format string, args ...any) error {
	return fmt.Errorf("log: "+format+": %w", append(args, kerr.KafkaStorageError)...)
}

// usable returns ErrClosed or the poison error.
func (l *Log) usable() error {
	if p := l.poisoned.Load(); p != nil {
		return *p
	}
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// poison marks the Log failed after a write/fsync error; every later call returns the error.
func (l *Log) poison(op string, err error) error {
	perr := fmt.Errorf("log %s: %s failed, log is offline: %w: %w", l.dir, op, err, kerr.KafkaStorageError)
	if !l.poisoned.CompareAndSwap(nil, &perr) {
		return *l.poisoned.Load()
	}
	return perr
}

// Reconfigure applies a topic config change: segment.bytes (from the next roll; a batch
// larger than it is refused), retention.bytes and retention.ms (from the next
// ApplyRetention), index.interval.bytes and flush.messages / flush.ms (from the next
// append). The other fields of c are ignored (the Writer, FS and clock stay). A bad value
// is an error naming it and changes nothing.
func (l *Log) Reconfigure(c Config) error {
	if err := c.validate(); err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.cfg.SegmentBytes, l.cfg.IndexIntervalBytes = c.SegmentBytes, c.IndexIntervalBytes
	l.cfg.RetentionBytes, l.cfg.RetentionMs = c.RetentionBytes, c.RetentionMs
	l.cfg.FlushMessages, l.cfg.FlushMs = c.FlushMessages, c.FlushMs
	l.segBytes.Store(c.SegmentBytes)
	if ft := c.FlushMs != math.MaxInt64; ft && !l.flushT {
		l.lastFlushMs = l.nowMs()
		l.flushT = true
	} else if !ft {
		l.flushT = false
	}
	return nil
}

// Config returns the log's current configuration.
func (l *Log) Config() Config {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.cfg
}

// Dir returns the replica directory.
func (l *Log) Dir() string { return l.dir }

// LEO returns the log end offset: the offset the next appended record gets (exclusive end).
// Lock-free; published after the bytes below it are written.
func (l *Log) LEO() int64 { return l.leo.Load() }

// LogStart returns the first offset in the log (inclusive).
func (l *Log) LogStart() int64 { return l.logStart.Load() }

// Size returns the bytes in all segments.
func (l *Log) Size() int64 { return l.size.Load() }

// Segments returns the number of segments (including the active one).
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// prepare validates blob (every batch's header and CRC) and fills r's counters.
func (l *Log) prepare(r *appendReq, blob []byte, assign bool) error {
	if len(blob) == 0 {
		return fmt.Errorf("log: append of an empty blob: no batches: %w", kerr.InvalidRecord)
	}
	r.batches, r.records, r.span, r.maxTs = 0, 0, 0, -1
	next := int64(-1)
	for pos := 0; pos < len(blob); {
		h, err := records.Validate(blob[pos:])
		if err != nil {
			return fmt.Errorf("log: append: batch %d at byte %d: %w", r.batches, pos, err)
		}
		if sb := l.segBytes.Load(); int64(h.Size()) > sb {
			return fmt.Errorf("log: append: batch %d is %d bytes, larger than log.segment.bytes %d: %w", r.batches, h.Size(), sb, kerr.RecordListTooLarge)
		}
		if assign {
			if h.Compression() == records.CompressionNone && int64(h.RecordsCount) != int64(h.LastOffsetDelta)+1 {
				return fmt.Errorf("log: append: batch %d recordsCount %d does not match lastOffsetDelta %d: %w", r.batches, h.RecordsCount, h.LastOffsetDelta, kerr.InvalidRecord)
			}
		} else {
			if r.batches == 0 {
				r.first = h.BaseOffset
			} else if h.BaseOffset != next {
				return fmt.Errorf("log: follower append: batch %d has baseOffset %d, expected %d (batches must be contiguous): %w", r.batches, h.BaseOffset, next, kerr.OffsetOutOfRange)
			}
			next = h.NextOffset()
		}
		r.span += int64(h.LastOffsetDelta) + 1
		r.records += int64(h.RecordsCount)
		r.maxTs = max(r.maxTs, h.MaxTimestamp)
		r.batches++
		pos += h.Size()
	}
	return nil
}

// Append writes blob (one or more consecutive RecordBatch v2) at the LEO.
//
// assignOffsets (leader): each batch's baseOffset is rewritten in place to the next offset and
// its partitionLeaderEpoch to leaderEpoch (the caller's blob is modified). Otherwise
// (follower): the batches must start at the LEO and be contiguous, else an error wrapping
// kerr.OffsetOutOfRange. Every batch is validated (header and CRC) before anything is written:
// a bad blob writes nothing. Concurrent calls are group-committed: one committer writes the
// queued blobs with one Writer.WriteAt (two when a segment rolls in between). The returned
// offsets are inclusive. After a write or fsync failure the Log is poisoned.
func (l *Log) Append(blob []byte, assignOffsets bool, leaderEpoch int32) (AppendInfo, error) {
	if err := l.usable(); err != nil {
		return AppendInfo{}, err
	}
	var p appendReq
	if err := l.prepare(&p, blob, assignOffsets); err != nil {
		return AppendInfo{}, err
	}
	l.gc.Lock()
	var r *appendReq
	if n := len(l.gc.free); n > 0 {
		r = l.gc.free[n-1]
		l.gc.free = l.gc.free[:n-1]
	} else {
		r = &appendReq{wake: make(chan struct{}, 1)}
	}
	r.first, r.span, r.batches, r.records, r.maxTs = p.first, p.span, p.batches, p.records, p.maxTs
	r.blob, r.assign, r.epoch = blob, assignOffsets, leaderEpoch
	r.info, r.err, r.finished = AppendInfo{}, nil, false
	l.gc.queue = append(l.gc.queue, r)
	if l.gc.active {
		l.gc.Unlock()
		if l.testHookQueued != nil {
			l.testHookQueued()
		}
		<-r.wake
		if r.finished {
			return l.release(r)
		}
		l.gc.Lock() // promoted to committer
	}
	l.gc.active = true
	l.group = append(l.group[:0], l.gc.queue...)
	clear(l.gc.queue)
	l.gc.queue = l.gc.queue[:0]
	l.gc.Unlock()

	group := l.group
	l.commit(group)
	for _, g := range group {
		if g != r {
			g.finished = true
			g.wake <- struct{}{}
		}
	}
	clear(group)

	l.gc.Lock()
	if len(l.gc.queue) > 0 {
		next := l.gc.queue[0]
		l.gc.Unlock()
		next.wake <- struct{}{}
	} else {
		l.gc.active = false
		l.gc.Unlock()
	}
	return l.release(r)
}

// release returns r's result and puts r back on the free list.
func (l *Log) release(r *appendReq) (AppendInfo, error) {
	info, err := r.info, r.err
	r.blob = nil
	l.gc.Lock()
	l.gc.free = append(l.gc.free, r)
	l.gc.Unlock()
	return info, err
}

// commit writes a group of requests. Caller is the single committer.
func (l *Log) commit(group []*appendReq) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		for _, r := range group {
			r.err = err
		}
		return
	}
	seg := l.segs[len(l.segs)-1]
	leo := l.leo.Load()
	writeStart := seg.size
	pos := seg.size
	bufs := l.bufs[:0]
	l.pend = l.pend[:0]
	var nrec int64
	var failed error
	for _, r := range group {
		if !r.assign && r.first != leo {
			r.err = fmt.Errorf("log: follower append at offset %d but the LEO is %d: %w", r.first, leo, kerr.OffsetOutOfRange)
			continue
		}
		blob := r.blob
		r.info = AppendInfo{FirstOffset: leo, Batches: r.batches, Records: r.records, Bytes: int64(len(blob)), MaxTimestamp: r.maxTs}
		chunk := 0
		for p := 0; p < len(blob); {
			h, _ := records.ParseHeader(blob[p:]) // validated in prepare
			size := int64(h.Size())
			if pos > 0 && (pos+size > l.cfg.SegmentBytes || leo+int64(h.LastOffsetDelta)-seg.base > math.MaxInt32) {
				if p > chunk {
					bufs = append(bufs, blob[chunk:p])
				}
				if err := l.writeOut(seg, writeStart, bufs, leo); err != nil {
					failed = err
					break
				}
				bufs = bufs[:0]
				ns, err := l.roll(seg, leo)
				if err != nil {
					failed = err
					break
				}
				seg, pos, writeStart, chunk = ns, 0, 0, p
			}
			if r.assign {
				records.SetBaseOffset(blob[p:], leo)
				records.SetPartitionLeaderEpoch(blob[p:], r.epoch)
			}
			next := leo + int64(h.LastOffsetDelta) + 1
			l.pend = append(l.pend, pending{seg: seg, e: entry{rel: uint32(leo - seg.base), pos: uint32(pos)}, size: size, next: next, maxTs: h.MaxTimestamp})
			leo = next
			pos += size
			p += int(size)
		}
		if failed != nil {
			break
		}
		bufs = append(bufs, blob[chunk:])
		r.info.LastOffset = leo - 1
		nrec += r.records
	}
	if failed == nil && len(bufs) > 0 {
		failed = l.writeOut(seg, writeStart, bufs, leo)
	}
	clear(bufs)
	l.bufs = bufs[:0]
	if failed == nil && nrec > 0 {
		l.unflushed += nrec
		if l.unflushed >= l.cfg.FlushMessages || (l.flushT && l.nowMs()-l.lastFlushMs >= l.cfg.FlushMs) {
			failed = l.fsyncDirty()
		}
	}
	if failed != nil {
		for _, r := range group {
			if r.err == nil {
				r.err = failed
			}
		}
	}
}

// writeOut writes bufs at off in seg with one Writer call and publishes the pending batches.
func (l *Log) writeOut(seg *segment, off int64, bufs [][]byte, leo int64) error {
	if len(bufs) > 0 {
		if err := l.writeAt(seg.f, off, bufs); err != nil {
			return l.poison("write", err)
		}
	}
	l.publish(leo)
	return nil
}

// publish makes the pending batches visible to readers and stores the new LEO.
func (l *Log) publish(leo int64) {
	if len(l.pend) == 0 {
		return
	}
	var added int64
	l.mu.Lock()
	for i := range l.pend {
		p := &l.pend[i]
		s := p.seg
		s.entries = append(s.entries, p.e)
		s.size = int64(p.e.pos) + p.size
		s.next = p.next
		s.maxTs = max(s.maxTs, p.maxTs)
		added += p.size
	}
	l.leo.Store(leo)
	l.mu.Unlock()
	for i := range l.pend {
		p := &l.pend[i]
		p.seg.addIndex(p.e, p.size, l.cfg.IndexIntervalBytes)
		p.seg = nil
	}
	l.pend = l.pend[:0]
	l.size.Add(added)
}

// roll writes the old segment's pending index entries and starts a new segment at base.
func (l *Log) roll(old *segment, base int64) (*segment, error) {
	var err error
	if l.idxScratch, err = old.writeIndex(l.idxScratch, false); err != nil {
		return nil, l.poison("index write", err)
	}
	s, err := createSegment(l.fs, l.dir, base)
	if err != nil {
		return nil, l.poison("segment roll", err)
	}
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.mu.Unlock()
	return s, nil
}

// writeAt writes bufs at off in f: through the Writer when f has a descriptor, else with one
// WriteAt per buffer (in-memory files).
func (l *Log) writeAt(f vfs.File, off int64, bufs [][]byte) error {
	if osf := f.OS(); osf != nil {
		return l.w.WriteAt(osf, off, bufs)
	}
	for _, b := range bufs {
		if _, err := f.WriteAt(b, off); err != nil {
			return fmt.Errorf("log: write %s at %d: %w", f.Name(), off, err)
		}
		off += int64(len(b))
	}
	return nil
}

// fsync makes f's contents durable: through the Writer's Syncer (io_uring) when it has one
// and f has a descriptor, else File.Sync.
func (l *Log) fsync(f vfs.File) error {
	if osf := f.OS(); osf != nil && l.syncer != nil {
		return l.syncer.Fsync(osf)
	}
	return f.Sync()
}

// fsyncDirty fsyncs every segment with unsynced bytes (wmu held).
func (l *Log) fsyncDirty() error {
	for _, s := range l.segs {
		if s.synced < s.size {
			if err := l.fsync(s.f); err != nil {
				return l.poison("fsync", err)
			}
			s.synced = s.size
		}
	}
	l.unflushed = 0
	if l.flushT {
		l.lastFlushMs = l.nowMs()
	}
	return nil
}

// Flush fsyncs all segments and their indexes and persists the recovery point (the LEO).
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
	for _, s := range l.segs {
		var err error
		if l.idxScratch, err = s.writeIndex(l.idxScratch, true); err != nil {
			return l.poison("index write", err)
		}
	}
	return l.setRecoveryPoint(l.leo.Load())
}

// setRecoveryPoint persists rp (wmu held).
func (l *Log) setRecoveryPoint(rp int64) error {
	if rp == l.recoveryPoint {
		return nil
	}
	if err := WriteCheckpoint(l.fs, filepath.Join(l.dir, RecoveryPointFile), 0, []string{fmt.Sprint(rp)}); err != nil {
		return l.poison("recovery-point checkpoint", err)
	}
	l.recoveryPoint = rp
	return nil
}

// Read returns a Slice of one segment holding whole batches: it starts with the batch
// containing offset and ends before the first batch that would pass maxOffset (exclusive; a
// batch whose last offset is >= maxOffset is excluded) or make the Slice exceed maxBytes,
// except that with minOneBatch the first batch is returned whatever its size. maxOffset is
// clamped to the LEO. offset >= maxOffset (in particular offset == LEO) gives an empty Slice
// (Size 0, File nil, FirstOffset = NextOffset = offset). offset outside [LogStart, LEO] is an
// error wrapping kerr.OffsetOutOfRange. The caller must Release the Slice.
func (l *Log) Read(offset, maxOffset int64, maxBytes int, minOneBatch bool) (Slice, error) {
	if err := l.usable(); err != nil {
		return Slice{}, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return Slice{}, ErrClosed
	}
	leo := l.leo.Load() // under mu: consistent with the table
	start := l.segs[0].base
	if offset < start || offset > leo {
		return Slice{}, fmt.Errorf("log %s: read at offset %d outside [log start %d, LEO %d]: %w", l.dir, offset, start, leo, kerr.OffsetOutOfRange)
	}
	maxOffset = min(maxOffset, leo)
	if offset >= maxOffset {
		return Slice{FirstOffset: offset, NextOffset: offset}, nil
	}
	seg := l.segs[l.findSegment(offset)]
	if len(seg.entries) == 0 || offset >= seg.next {
		return Slice{}, fmt.Errorf("log %s: BUG: offset %d below LEO %d not in segment %d (next %d): %w", l.dir, offset, leo, seg.base, seg.next, kerr.KafkaStorageError)
	}
	i := seg.find(offset)
	n := len(seg.entries)
	// limit: batches [i, limit) end at or before maxOffset.
	limit := n
	if maxOffset < seg.next {
		limit = sort.Search(n, func(j int) bool { return seg.baseAt(j) >= maxOffset })
		if limit > 0 && seg.nextAt(limit-1) > maxOffset {
			limit--
		}
	}
	if limit <= i {
		return Slice{FirstOffset: offset, NextOffset: offset}, nil
	}
	pos0 := int64(seg.entries[i].pos)
	// k: batches [i, k) fit in maxBytes.
	k := i + sort.Search(limit-i, func(j int) bool { return seg.endAt(i+j)-pos0 > int64(maxBytes) })
	if k == i {
		if !minOneBatch {
			return Slice{FirstOffset: offset, NextOffset: offset}, nil
		}
		k = i + 1
	}
	seg.refs.Add(1)
	return Slice{File: seg.f, Pos: pos0, Size: seg.endAt(k-1) - pos0, FirstOffset: seg.baseAt(i), NextOffset: seg.nextAt(k - 1), seg: seg}, nil
}

// findSegment returns the index of the last segment with base <= off (mu held, off >= segs[0].base).
func (l *Log) findSegment(off int64) int {
	n := len(l.segs)
	if off >= l.segs[n-1].base {
		return n - 1
	}
	return sort.Search(n, func(i int) bool { return l.segs[i].base > off }) - 1
}

// BatchBoundaryAtOrBelow returns the base offset of the batch containing offset, or the LEO
// when offset >= LEO. offset < LogStart is an error wrapping kerr.OffsetOutOfRange.
func (l *Log) BatchBoundaryAtOrBelow(offset int64) (int64, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.boundaryLocked(offset, l.leo.Load())
}

func (l *Log) boundaryLocked(offset, leo int64) (int64, error) {
	if len(l.segs) == 0 {
		return 0, ErrClosed
	}
	if offset >= leo {
		return leo, nil
	}
	if offset < l.segs[0].base {
		return 0, fmt.Errorf("log %s: offset %d below log start %d: %w", l.dir, offset, l.segs[0].base, kerr.OffsetOutOfRange)
	}
	seg := l.segs[l.findSegment(offset)]
	if len(seg.entries) == 0 {
		return seg.base, nil
	}
	return seg.baseAt(seg.find(offset)), nil
}

// TruncateTo removes every batch with base offset >= offset; an offset inside a batch is
// rounded down to that batch's base offset (the batch is removed). The LEO becomes that
// boundary. offset >= LEO is a no-op; offset < LogStart empties the log and restarts it at
// offset (TruncateFullyAndStartAt). Segments past the boundary are deleted.
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
	if offset < l.segs[0].base {
		return l.truncateFullyLocked(offset)
	}
	bound, err := l.boundaryLocked(offset, leo)
	if err != nil {
		return err
	}
	si := l.findSegment(bound)
	seg := l.segs[si]
	var cut int64 // byte position of bound in seg
	if len(seg.entries) > 0 && bound < seg.next {
		cut = int64(seg.entries[seg.find(bound)].pos)
	} else {
		cut = seg.size
	}
	removed := append([]*segment(nil), l.segs[si+1:]...)
	var dropped int64
	for _, s := range removed {
		dropped += s.size
	}
	dropped += seg.size - cut
	l.mu.Lock()
	clear(l.segs[si+1:])
	l.segs = l.segs[:si+1]
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
	if l.recoveryPoint > bound {
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
	old := l.segs
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
	l.segs = []*segment{ns}
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
	l.recoveryPoint = -1 // force the write
	return l.setRecoveryPoint(offset)
}

// ApplyRetention deletes the oldest segments while retention.bytes or retention.ms is breached
// (Kafka's rules: delete while Size()-segment size >= retention.bytes; or now - the segment's
// largest timestamp (file mtime if it has none) > retention.ms). It never deletes the active
// segment, nor a segment holding offsets >= maxDeletableOffset (the high watermark): a segment
// is deletable only when the next segment's base offset <= maxDeletableOffset. It stops at the
// first segment it keeps and returns how many it deleted.
func (l *Log) ApplyRetention(nowMs int64, maxDeletableOffset int64) (deletedSegments int, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	rb, rms := l.cfg.RetentionBytes, l.cfg.RetentionMs
	if rb < 0 && rms < 0 {
		return 0, nil
	}
	for len(l.segs) > 1 {
		s := l.segs[0]
		if l.segs[1].base > maxDeletableOffset {
			break
		}
		size := l.size.Load()
		bySize := rb >= 0 && size-s.size >= rb
		byTime := false
		if rms >= 0 {
			ts := s.maxTs
			if ts < 0 {
				if st, err := s.f.Stat(); err == nil {
					ts = st.ModTime().UnixMilli()
				}
			}
			byTime = ts >= 0 && nowMs-ts > rms
		}
		if !bySize && !byTime {
			break
		}
		l.mu.Lock()
		l.segs[0] = nil
		l.segs = l.segs[1:]
		l.logStart.Store(l.segs[0].base)
		l.mu.Unlock()
		l.size.Add(-s.size)
		if err := s.remove(l.fs); err != nil {
			return deletedSegments, l.poison("retention delete", err)
		}
		deletedSegments++
	}
	return deletedSegments, nil
}

// Close flushes (fsync data and indexes, persist the recovery point) and closes the Log; open
// Slices stay valid until released. A second Close returns nil. Closing a poisoned Log closes
// its files without flushing and returns nil.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed.Load() {
		return nil
	}
	var err error
	if l.poisoned.Load() == nil {
		err = l.flushLocked()
	}
	l.shut()
	return err
}

// Abandon closes the Log without writing anything, as a killed process would: no fsync, no
// index or recovery-point write; the files keep what the page cache has. Later calls fail
// with ErrClosed; open Slices stay valid until released. A no-op on a closed Log.
func (l *Log) Abandon() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if !l.closed.Load() {
		l.shut()
	}
}

// shut closes every segment and marks the Log closed (wmu held).
func (l *Log) shut() {
	l.closed.Store(true)
	l.mu.Lock()
	segs := l.segs
	l.segs = nil
	l.mu.Unlock()
	for _, s := range segs {
		s.close()
	}
}

// Bytes returns the raw bytes of the whole batches from the one containing from up to the last
// one ending at or before to (exclusive), across segments: for comparing replica logs.
// from or to outside [LogStart, LEO] (or from > to) is an error wrapping kerr.OffsetOutOfRange.
func (l *Log) Bytes(from, to int64) ([]byte, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if start, leo := l.LogStart(), l.LEO(); from < start || to > leo || from > to {
		return nil, fmt.Errorf("log %s: bytes [%d, %d) outside [log start %d, LEO %d]: %w", l.dir, from, to, start, leo, kerr.OffsetOutOfRange)
	}
	var out []byte
	for off := from; off < to; {
		s, err := l.Read(off, to, math.MaxInt32, true)
		if err != nil {
			return out, err
		}
		if s.Size == 0 {
			break
		}
		out, err = s.ReadAll(out)
		s.Release()
		if err != nil {
			return out, err
		}
		off = s.NextOffset
	}
	return out, nil
}
