package log

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Read returns a Slice of one segment holding whole batches: it starts with the batch
// containing offset and ends before the first batch that would pass maxOffset (exclusive; a
// batch whose last offset is >= maxOffset is excluded) or make the Slice exceed maxBytes,
// except that with minOneBatch the first batch is returned whatever its size. maxOffset is
// clamped to the LEO. offset >= maxOffset (in particular offset == LEO) gives an empty Slice
// (Size 0, File nil, FirstOffset = NextOffset = offset). offset outside [LogStart, LEO] is an
// error wrapping kerr.OffsetOutOfRange. Bytes found on disk at Open are CRC-checked before they
// are first returned (see "Damage found after Open" in the package doc): the Slice ends before
// a damaged batch, and a damaged first batch is a *DamageError. The caller must Release the Slice.
func (l *Log) Read(offset, maxOffset int64, maxBytes int, minOneBatch bool) (Slice, error) {
	if err := l.usable(); err != nil {
		return Slice{}, err
	}
	s, seg, err := l.readLocked(offset, maxOffset, maxBytes, minOneBatch)
	if err != nil || s.Size == 0 {
		return s, err
	}
	// Outside the lock: opening a sealed segment's file is a system call.
	h, err := seg.acquire()
	if err != nil {
		if errors.Is(err, errSegmentGone) {
			if uerr := l.usable(); uerr != nil {
				return Slice{}, uerr // closed meanwhile
			}
			return Slice{}, fmt.Errorf("log %s: read at offset %d: %w (retention or truncation meanwhile)", l.dir, offset, err)
		}
		return Slice{}, l.ioError("read", err)
	}
	s.File, s.h, s.mem = h.f, h, &seg.tail
	if err := l.checkSlice(&s, seg); err != nil {
		s.Release()
		return Slice{}, err
	}
	return s, nil
}

// readLocked finds the Slice of Read (without its file) and its segment.
func (l *Log) readLocked(offset, maxOffset int64, maxBytes int, minOneBatch bool) (Slice, *segment, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.mu.segs) == 0 {
		return Slice{}, nil, ErrClosed
	}
	leo := l.leo.Load() // under mu: consistent with the table
	start := l.logStart.Load()
	if offset < start || offset > leo {
		return Slice{}, nil, fmt.Errorf("log %s: read at offset %d outside [log start %d, LEO %d]: %w", l.dir, offset, start, leo, kerr.OffsetOutOfRange)
	}
	maxOffset = min(maxOffset, leo)
	if offset >= maxOffset {
		return Slice{FirstOffset: offset, NextOffset: offset}, nil, nil
	}
	seg := l.mu.segs[l.findSegment(offset)]
	if len(seg.entries) == 0 || offset >= seg.next {
		return Slice{}, nil, fmt.Errorf("log %s: BUG: offset %d below LEO %d not in segment %d (next %d): %w", l.dir, offset, leo, seg.base, seg.next, kerr.KafkaStorageError)
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
		return Slice{FirstOffset: offset, NextOffset: offset}, nil, nil
	}
	pos0 := int64(seg.entries[i].pos)
	// k: batches [i, k) fit in maxBytes.
	k := i + sort.Search(limit-i, func(j int) bool { return seg.endAt(i+j)-pos0 > int64(maxBytes) })
	if k == i {
		if !minOneBatch {
			return Slice{FirstOffset: offset, NextOffset: offset}, nil, nil
		}
		k = i + 1
	}
	return Slice{Pos: pos0, Size: seg.endAt(k-1) - pos0, FirstOffset: seg.baseAt(i), NextOffset: seg.nextAt(k - 1)}, seg, nil
}

// findSegment returns the index of the last segment with base <= off (mu held, off >= segs[0].base).
func (l *Log) findSegment(off int64) int {
	n := len(l.mu.segs)
	if off >= l.mu.segs[n-1].base {
		return n - 1
	}
	return sort.Search(n, func(i int) bool { return l.mu.segs[i].base > off }) - 1
}

func (l *Log) boundaryLocked(offset, leo int64) (int64, error) {
	if len(l.mu.segs) == 0 {
		return 0, ErrClosed
	}
	if offset >= leo {
		return leo, nil
	}
	if offset < l.mu.segs[0].base {
		return 0, fmt.Errorf("log %s: offset %d below log start %d: %w", l.dir, offset, l.mu.segs[0].base, kerr.OffsetOutOfRange)
	}
	seg := l.mu.segs[l.findSegment(offset)]
	if len(seg.entries) == 0 {
		return seg.base, nil
	}
	return seg.baseAt(seg.find(offset)), nil
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
