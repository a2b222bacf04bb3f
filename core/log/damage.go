package log

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Damage found after recovery: bytes on disk that fail their CRC.
//
// Bytes this process appended are trusted (they were validated before they were written).
// Bytes it found on disk (the segments Open recovered, up to their size then) are trusted
// once checked: Open checks the batches past the recovery point, Read checks what it is about
// to serve before it first serves it, and Scrub checks sealed segments again in the
// background. Each segment keeps the two bounds that say so (segment.checked, segment.ours).

// DamageError describes a batch whose bytes fail their check (CRC-32C, framing, or
// contiguous offsets) in a segment file that Open accepted: bit rot, or a file changed behind
// the log's back. It wraps kerr.KafkaStorageError, the code a fetch that would reach the
// batch is answered with; the broker reports the replica damaged rather than its whole log
// directory offline.
type DamageError struct {
	File     string // the segment file
	Position int64  // byte position of the damaged batch in File
	Offset   int64  // base offset of the damaged batch, as the log's table has it (inclusive)
	Reason   string // what check failed
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("log: damaged batch at offset %d (position %d of %s): %s", e.Offset, e.Position, e.File, e.Reason)
}

// Unwrap returns kerr.KafkaStorageError.
func (e *DamageError) Unwrap() error { return kerr.KafkaStorageError }

// AsDamage returns the *DamageError err wraps, or nil.
func AsDamage(err error) *DamageError {
	var d *DamageError
	if errors.As(err, &d) {
		return d
	}
	return nil
}

var walkerPool = sync.Pool{New: func() any { return &SegmentWalker{} }}

// checkRange CRC-checks the batches of seg's file f in byte range [from, to), the first of
// which starts at offset off. It returns the byte position reached (to when every batch
// passed) and the damage found, nil if none; pace, when not nil, is called with each
// batch's size before it is read, and its error ends the check.
func checkRange(seg *segment, f interface {
	ReadAt([]byte, int64) (int, error)
}, from, to, off int64, pace func(int64) error) (int64, *DamageError, error) {
	w := walkerPool.Get().(*SegmentWalker)
	defer walkerPool.Put(w)
	w.reset(f, filepath.Base(seg.logPath), to, seg.base)
	w.end, w.next = from, off
	for {
		pos, expect := w.End(), w.NextOffset()
		if !w.Next() {
			if err := w.Err(); err != nil {
				var tail *CorruptTailError
				if errors.As(err, &tail) {
					return pos, &DamageError{File: seg.logPath, Position: pos, Offset: expect, Reason: tail.Error()}, nil
				}
				return pos, nil, err
			}
			return w.End(), nil, nil
		}
		b := w.Batch()
		if pace != nil {
			if err := pace(b.Size); err != nil {
				return pos, nil, err
			}
		}
		if b.Err == nil {
			continue
		}
		return pos, &DamageError{File: seg.logPath, Position: pos, Offset: expect, Reason: b.Err.Error()}, nil
	}
}

// raise moves a to at least v.
func raise(a interface {
	Load() int64
	CompareAndSwap(old, new int64) bool
}, v int64) {
	for {
		cur := a.Load()
		if cur >= v || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// offsetAtPos returns the base offset of seg's batch starting at byte position pos, or false
// when no batch starts there (truncated meanwhile).
func (l *Log) offsetAtPos(seg *segment, pos int64) (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i := sort.Search(len(seg.entries), func(i int) bool { return int64(seg.entries[i].pos) >= pos })
	if i == len(seg.entries) || int64(seg.entries[i].pos) != pos {
		return 0, false
	}
	return seg.baseAt(i), true
}

// checkSlice checks the bytes of s (a Slice of seg, holding its file) that this process did
// not write and has not checked yet. On damage past the Slice's first batch it shortens s to
// end before the damaged batch; on damage at its first batch it returns the *DamageError.
// Either way the damage is reported to Config.OnDamage.
func (l *Log) checkSlice(s *Slice, seg *segment) error {
	end := s.Pos + s.Size
	ours, checked := seg.ours.Load(), seg.checked.Load()
	from, to := max(s.Pos, checked), min(end, ours)
	if from >= to {
		return nil
	}
	off := s.FirstOffset
	if from != s.Pos {
		var ok bool
		if off, ok = l.offsetAtPos(seg, from); !ok {
			from, off = s.Pos, s.FirstOffset
		}
	}
	reached, dmg, err := checkRange(seg, s.File, from, to, off, nil)
	if err != nil {
		return l.ioError("check", err)
	}
	if from <= checked {
		raise(&seg.checked, reached) // a prefix checked without a gap
	}
	if dmg == nil {
		return nil
	}
	l.reportDamage(dmg)
	if dmg.Offset <= s.FirstOffset || dmg.Position <= s.Pos {
		return dmg
	}
	s.Size, s.NextOffset = dmg.Position-s.Pos, dmg.Offset
	return nil
}

func (l *Log) reportDamage(d *DamageError) {
	if l.cfg.OnDamage != nil {
		l.cfg.OnDamage(*d)
	}
}

// Scrub CRC-checks every batch of every sealed segment, and of the active segment the bytes
// Open found (Kafka has no such check: bit rot is found there only when a reader trips over
// it), whether checked before or not, oldest first. pace is called with each batch's size before the batch is read (the caller's rate
// limit; its error ends the scrub and is returned). It returns the bytes checked and the
// first damage found (a *DamageError, also reported to Config.OnDamage); a segment removed
// meanwhile by retention or truncation is skipped. Safe to call concurrently with
// everything else; one Scrub at a time per Log is enough.
func (l *Log) Scrub(pace func(n int64) error) (int64, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	type job struct {
		seg  *segment
		size int64
	}
	l.mu.RLock()
	var jobs []job
	for i, s := range l.mu.segs {
		size := s.size
		if i == len(l.mu.segs)-1 {
			size = min(size, s.ours.Load()) // the active segment: what Open found of it
		}
		if size > 0 {
			jobs = append(jobs, job{s, size})
		}
	}
	l.mu.RUnlock()
	var total int64
	for _, j := range jobs {
		h, err := j.seg.acquire()
		if errors.Is(err, errSegmentGone) {
			continue
		}
		if err != nil {
			return total, l.ioError("scrub", err)
		}
		reached, dmg, err := checkRange(j.seg, h.f, 0, j.size, j.seg.base, pace)
		h.unref()
		total += reached
		if err != nil {
			if errors.Is(err, errSegmentGone) {
				continue
			}
			return total, err
		}
		if dmg != nil {
			if _, ok := l.offsetAtPos(j.seg, dmg.Position); !ok && dmg.Position > 0 {
				continue // truncated meanwhile: the bytes checked are not the log's any more
			}
			l.reportDamage(dmg)
			return total, dmg
		}
		raise(&j.seg.checked, reached)
	}
	return total, nil
}
