package log

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// pending is a batch written (or about to be) but not yet published.
type pending struct {
	seg   *segment
	e     entry
	size  int64
	next  int64
	maxTs int64
}

// appendReq is one Append call waiting in the group-commit queue. Recycled by Log.gc.
type appendReq struct {
	turn
	blob    []byte
	assign  bool
	epoch   int32
	first   int64 // follower mode: base offset of the first batch
	span    int64 // offsets the blob covers
	batches int
	records int64
	maxTs   int64
	info    AppendInfo
	err     error
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
	r, ok := l.gc.get()
	if !ok {
		r = &appendReq{turn: newTurn()}
	}
	r.first, r.span, r.batches, r.records, r.maxTs = p.first, p.span, p.batches, p.records, p.maxTs
	r.blob, r.assign, r.epoch = blob, assignOffsets, leaderEpoch
	r.info, r.err = AppendInfo{}, nil
	l.gc.do(r)
	info, err := r.info, r.err
	r.blob = nil
	l.gc.put(r)
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
	seg := l.mu.segs[len(l.mu.segs)-1]
	leo := l.leo.Load()
	writeStart := seg.size
	pos := seg.size
	bufs := l.wmu.bufs[:0]
	l.wmu.pend = l.wmu.pend[:0]
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
			l.wmu.pend = append(l.wmu.pend, pending{seg: seg, e: entry{rel: uint32(leo - seg.base), pos: uint32(pos)}, size: size, next: next, maxTs: h.MaxTimestamp})
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
	l.wmu.bufs = bufs[:0]
	if failed == nil && nrec > 0 {
		l.wmu.unflushed += nrec
		if l.wmu.unflushed >= l.cfg.FlushMessages || (l.flushT && l.nowMs()-l.wmu.lastFlushMs >= l.cfg.FlushMs) {
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
	if len(l.wmu.pend) == 0 {
		return
	}
	var added int64
	l.mu.Lock()
	for i := range l.wmu.pend {
		p := &l.wmu.pend[i]
		s := p.seg
		s.entries = append(s.entries, p.e)
		s.size = int64(p.e.pos) + p.size
		s.next = p.next
		s.maxTs = max(s.maxTs, p.maxTs)
		added += p.size
	}
	l.leo.Store(leo)
	l.mu.Unlock()
	for i := range l.wmu.pend {
		p := &l.wmu.pend[i]
		p.seg.addIndex(p.e, p.size, l.cfg.IndexIntervalBytes)
		p.seg = nil
	}
	l.wmu.pend = l.wmu.pend[:0]
	l.size.Add(added)
}

// roll writes the old segment's pending index entries and starts a new segment at base.
func (l *Log) roll(old *segment, base int64) (*segment, error) {
	var err error
	if l.wmu.idxScratch, err = old.writeIndex(l.wmu.idxScratch, false); err != nil {
		return nil, l.poison("index write", err)
	}
	s, err := createSegment(l.fs, l.dir, base)
	if err != nil {
		return nil, l.poison("segment roll", err)
	}
	l.wmu.dirDirty = true // its directory entry is durable at the next fsync (fsyncDirty)
	l.mu.Lock()
	l.mu.segs = append(l.mu.segs, s)
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

// fsyncDirty fsyncs every segment with unsynced bytes, and the directory when a roll created
// a segment since its last fsync, as Kafka's LocalLog.flush does: without it a crash may lose
// a new segment's file, fsynced contents and all (wmu held).
func (l *Log) fsyncDirty() error {
	for _, s := range l.mu.segs {
		if s.synced < s.size {
			if err := l.fsync(s.f); err != nil {
				return l.poison("fsync", err)
			}
			s.synced = s.size
		}
	}
	if l.wmu.dirDirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.poison("fsync log dir", err)
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
	for _, s := range l.mu.segs {
		var err error
		if l.wmu.idxScratch, err = s.writeIndex(l.wmu.idxScratch, true); err != nil {
			return l.poison("index write", err)
		}
	}
	return l.setRecoveryPoint(l.leo.Load())
}

// setRecoveryPoint persists rp (wmu held).
func (l *Log) setRecoveryPoint(rp int64) error {
	if rp == l.wmu.recoveryPoint {
		return nil
	}
	if err := WriteCheckpoint(l.fs, filepath.Join(l.dir, RecoveryPointFile), 0, []string{fmt.Sprint(rp)}); err != nil {
		return l.poison("recovery-point checkpoint", err)
	}
	l.wmu.recoveryPoint = rp
	return nil
}
