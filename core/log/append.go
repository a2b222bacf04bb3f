package log

import (
	"fmt"
	"math"

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
// queued blobs with one Writer.WriteAt (one per segment when segments roll in between). The
// returned offsets are inclusive. After a write or fsync failure the Log is poisoned; a roll
// that cannot create its segment file for want of a descriptor fails the append with a
// resource error (ErrTooManyOpenFiles) having written nothing of it, and the next append
// tries the roll again.
//
// A segment sealed by a roll is flushed, as Kafka does when a segment rolls (see
// flushRolled): by the Append that rolled before it returns, outside the group commit so that
// concurrent appends are not held up by the fsyncs, or in the background when
// Config.RollFlush says so.
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
	if l.dropDue.Load() {
		l.queueDropBehind()
	}
	if l.rollFlush.Load() {
		if l.cfg.RollFlush == nil {
			if ferr := l.flushRolled(); ferr != nil && err == nil {
				err = ferr
			}
		} else if l.flushQueued.CompareAndSwap(false, true) {
			l.cfg.RollFlush(l.flushJob)
		}
	}
	return info, err
}

// rollsAt reports whether a batch of size bytes whose last offset is leo+lastOffsetDelta,
// appended at byte position pos of the segment based at base, must go to a new segment: it
// would pass log.segment.bytes, or its offsets would leave the 2^31 range of the segment's
// relative offsets. An empty segment takes any batch.
func (l *Log) rollsAt(base, pos, size, leo int64, lastOffsetDelta int32) bool {
	return pos > 0 && (pos+size > l.cfg.SegmentBytes || leo+int64(lastOffsetDelta)-base > math.MaxInt32)
}

// commit writes a group of requests. Caller is the single committer.
//
// Each segment's share of the group is written with one Writer call, and the batches are
// published (made readable, the LEO moved) once, after the last write. A request that rolls
// first creates every segment its batches need, before any of its bytes is written: when a
// segment file cannot be created for want of a descriptor (a resource error), that request
// and the ones after it fail having appended nothing, the ones before it are written and
// published, and the Log stays usable.
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
	if _, err := seg.writable(); err != nil {
		// Closed by the cache of active files and no descriptor to reopen it: nothing is
		// written, the Log stays usable.
		err = l.fail("open segment to write", err)
		for _, r := range group {
			r.err = err
		}
		return
	}
	leo := l.leo.Load()
	writeStart := seg.size
	pos := seg.size
	bufs := l.wmu.bufs[:0]
	l.wmu.pend = l.wmu.pend[:0]
	ahead, ai := l.wmu.ahead[:0], 0 // segments created for the current request's rolls; ahead[ai] is next
	var nrec int64
	var failed error
	failedAt := 0 // with failed: the requests from group[failedAt] on fail
	for gi, r := range group {
		if !r.assign && r.first != leo {
			r.err = fmt.Errorf("log: follower append at offset %d but the LEO is %d: %w", r.first, leo, kerr.OffsetOutOfRange)
			continue
		}
		blob := r.blob
		r.info = AppendInfo{FirstOffset: leo, Batches: r.batches, Records: r.records, Bytes: int64(len(blob)), MaxTimestamp: r.maxTs}
		rPend := len(l.wmu.pend)
		created := false // the segments of r's rolls are in ahead
		chunk := 0
		for p := 0; p < len(blob); {
			h, _ := records.ParseHeader(blob[p:]) // validated in prepare
			size := int64(h.Size())
			if l.rollsAt(seg.base, pos, size, leo, h.LastOffsetDelta) {
				if !created {
					var err error
					if ahead, err = l.createAhead(ahead[:0], seg.base, pos, leo, blob[p:]); err != nil {
						// Nothing of r is written; bufs holds the earlier requests' bytes.
						l.wmu.pend = l.wmu.pend[:rPend]
						leo, ai = r.info.FirstOffset, 0
						failed, failedAt = err, gi
						break
					}
					created, ai = true, 0
				}
				if p > chunk {
					bufs = append(bufs, blob[chunk:p])
				}
				if err := l.writeSeg(seg, writeStart, bufs); err != nil {
					failed = err
					break
				}
				bufs = bufs[:0]
				ns := ahead[ai]
				ai++
				l.rollTo(seg, ns)
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
	for _, s := range ahead[ai:] { // created for a request whose write failed (the Log is poisoned)
		s.retire()
	}
	clear(ahead[:cap(ahead)])
	l.wmu.ahead = ahead[:0]
	if l.poisoned.Load() == nil && len(bufs) > 0 {
		if err := l.writeSeg(seg, writeStart, bufs); err != nil {
			failed, failedAt = err, 0
		}
	}
	clear(bufs)
	l.wmu.bufs = bufs[:0]
	if l.poisoned.Load() != nil {
		failedAt = 0 // a write failed: nothing is published, every request fails
		l.wmu.pend = l.wmu.pend[:0]
	} else {
		l.publish(leo)
		l.noteDropBehind(seg)
	}
	if l.poisoned.Load() == nil && nrec > 0 {
		l.wmu.unflushed += nrec
		if l.wmu.unflushed >= l.cfg.FlushMessages || (l.flushT && l.nowMs()-l.wmu.lastFlushMs >= l.cfg.FlushMs) {
			if err := l.fsyncDirty(); err != nil {
				for _, r := range group {
					if r.err == nil {
						r.err = err
					}
				}
			}
		}
	}
	if failed != nil {
		for _, r := range group[failedAt:] {
			if r.err == nil {
				r.err = failed
			}
		}
	}
}

// createAhead creates, in order, the segments the batches of rest need when written from
// byte position pos of the segment based at base, the first of them rolling (rest's first
// batch does not fit), and appends them to dst. On failure it removes what it created and
// returns the error: a resource error leaves the Log usable, another poisons it.
func (l *Log) createAhead(dst []*segment, base, pos, leo int64, rest []byte) ([]*segment, error) {
	first := len(dst)
	for p := 0; p < len(rest); {
		h, _ := records.ParseHeader(rest[p:])
		size := int64(h.Size())
		if l.rollsAt(base, pos, size, leo, h.LastOffsetDelta) {
			s, err := l.createSegment(leo)
			if err != nil {
				for _, c := range dst[first:] {
					c.retire()
					l.fs.Remove(c.logPath)
					l.fs.Remove(c.idxPath)
				}
				clear(dst[first:])
				return dst[:first], l.fail("segment roll", err)
			}
			dst = append(dst, s)
			base, pos = leo, 0
		}
		pos += size
		leo += int64(h.LastOffsetDelta) + 1
		p += int(size)
	}
	return dst, nil
}

// rollTo seals old, whose bytes are written, queues it for its flush (flushRolled) and
// makes ns the active segment (wmu held).
func (l *Log) rollTo(old, ns *segment) {
	h := old.file.Load()
	h.refs.Add(1) // the flush's; the active segment's hold is never dropped while active
	old.w = nil
	old.tail.drop(&ns.tail)
	old.seal()
	l.mu.Lock()
	l.mu.segs = append(l.mu.segs, ns)
	l.mu.Unlock()
	l.wmu.rolled = append(l.wmu.rolled, rolledSeg{s: old, h: h})
	l.rollFlush.Store(true)
	l.wmu.dirDirty = true // ns's directory entry: durable at the roll flush or the next fsyncDirty
}

// writeSeg writes bufs at off in the active segment seg with one Writer call; a failure
// poisons the Log.
func (l *Log) writeSeg(seg *segment, off int64, bufs [][]byte) error {
	if len(bufs) == 0 {
		return nil
	}
	if err := l.writeAt(seg.w, off, bufs); err != nil {
		return l.poison("write", err)
	}
	if l.cfg.TailBytes > 0 {
		seg.tail.write(off, bufs, l.cfg.TailBytes)
	}
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
