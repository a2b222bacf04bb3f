package log

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/records"
)

// walkChunk is how much a SegmentWalker reads at a time.
const walkChunk = 256 << 10

// SegmentBatch is one batch of a segment file as recovery sees it.
type SegmentBatch struct {
	// Position is the byte position of the batch's first byte in the file; the batch covers
	// [Position, Position+Size).
	Position int64
	// Size is the batch's length in bytes (Header.Size()).
	Size   int64
	Header records.Header
	// Err is why recovery would truncate the log at this batch even though its framing is
	// intact (the walk can go on past it): a CRC mismatch, a baseOffset that does not follow
	// the previous batch (or, for the first batch, the segment's base offset), or a batch
	// beyond the segment's 2 GiB / 2^31-offset range. nil for a valid batch.
	Err error
}

// CorruptTailError ends a walk whose remaining bytes are not a whole batch: fewer bytes than a
// batch header, a header that does not parse, or a batchLength reaching past the end of the
// file. Recovery truncates the segment at Position. It wraps kerr.CorruptMessage.
type CorruptTailError struct {
	Position int64  // where the bytes that are not a whole batch start (inclusive)
	Offset   int64  // the offset the next batch would have had
	Bytes    int64  // bytes from Position to the end of the file
	msg      string // what is wrong, with position and file name
	err      error  // the header parser's error, when that was the cause
}

func (e *CorruptTailError) Error() string { return e.msg }

// Unwrap returns the parser's error (which wraps a kerr code) or kerr.CorruptMessage.
func (e *CorruptTailError) Unwrap() error {
	if e.err != nil {
		return e.err
	}
	return kerr.CorruptMessage
}

// SegmentWalker iterates over the batches of one segment file in file order, applying
// exactly the checks Open's recovery applies: framing (header present and parseable, batch
// within the file), CRC-32C, contiguous offsets from the segment's base offset, and the
// segment's position and offset range. Recovery uses it to rebuild a segment's table and
// `isrbench dump-log` to print a segment, so the two cannot disagree on what a valid batch is.
//
//	w := log.NewSegmentWalker(f, name, size, base)
//	for w.Next() {
//		b := w.Batch() // b.Err != nil: recovery would truncate here
//	}
//	err := w.Err() // nil: clean end; *CorruptTailError: torn or corrupt tail; else a read error
//
// It reads the file walkChunk bytes at a time through one reused buffer. Concurrency: one
// goroutine at a time; the file must not change during the walk.
type SegmentWalker struct {
	r         io.ReaderAt
	name      string
	size      int64
	base      int64 // segment base offset; < 0: the first batch's baseOffset
	checkFrom int64 // batches ending at or below this offset are not CRC-checked

	pos    int64 // position of the current batch
	end    int64 // position just past the last whole batch
	next   int64 // offset the next batch must start at
	buf    []byte
	bufPos int64
	cur    SegmentBatch
	err    error
	done   bool
}

// NewSegmentWalker returns a walker over the first size bytes of r, a segment file called name
// (used in messages) with base offset base (the %020d of its file name; a base < 0 takes the
// first batch's baseOffset, for a file whose name is not a segment name). Every batch is
// CRC-checked unless SkipCRCBelow says otherwise.
func NewSegmentWalker(r io.ReaderAt, name string, size, base int64) *SegmentWalker {
	w := &SegmentWalker{}
	w.reset(r, name, size, base)
	return w
}

// reset makes w walk another file, keeping its buffer.
func (w *SegmentWalker) reset(r io.ReaderAt, name string, size, base int64) {
	*w = SegmentWalker{r: r, name: name, size: size, base: base, next: base, checkFrom: math.MinInt64, buf: w.buf[:0]}
}

// SkipCRCBelow skips the CRC check of the batches whose NextOffset is <= off (exclusive end
// offsets at or below a recovery point, which were verified before they were fsynced). Call
// it before the first Next.
func (w *SegmentWalker) SkipCRCBelow(off int64) { w.checkFrom = off }

// Next advances to the next batch and reports whether there is one; after false, Err says why
// the walk ended.
func (w *SegmentWalker) Next() bool {
	if w.done {
		return false
	}
	w.pos = w.end
	if w.pos >= w.size {
		w.done = true
		return false
	}
	w.cur = SegmentBatch{Position: w.pos}
	left := w.size - w.pos
	if left < records.HeaderSize {
		return w.tail(nil, "torn batch header at position %d of %s (offset %d): %d bytes left, a header needs %d", w.pos, w.name, w.next, left, records.HeaderSize)
	}
	hb, err := w.bytes(w.pos, records.HeaderSize)
	if err != nil {
		return w.fail(err)
	}
	h, err := records.ParseHeader(hb)
	if err != nil {
		return w.tail(err, "corrupt batch at position %d of %s (offset %d): %v", w.pos, w.name, w.next, err)
	}
	size := int64(h.Size())
	if size > left {
		return w.tail(nil, "torn batch at position %d of %s (offset %d): batchLength needs %d bytes, %d left", w.pos, w.name, w.next, size, left)
	}
	if w.base < 0 {
		w.base, w.next = h.BaseOffset, h.BaseOffset
	}
	w.cur.Size, w.cur.Header = size, h
	switch {
	case h.BaseOffset != w.next:
		w.cur.Err = fmt.Errorf("batch at position %d of %s has baseOffset %d, expected %d", w.pos, w.name, h.BaseOffset, w.next)
	case w.pos+size > math.MaxInt32 || h.LastOffset()-w.base > math.MaxInt32:
		w.cur.Err = fmt.Errorf("batch at position %d of %s (offset %d) lies beyond the segment's 2 GiB / 2^31 offset range", w.pos, w.name, w.next)
	case h.NextOffset() > w.checkFrom:
		b, err := w.bytes(w.pos, int(size))
		if err != nil {
			return w.fail(err)
		}
		if _, verr := records.Validate(b); verr != nil {
			w.cur.Err = fmt.Errorf("corrupt batch at position %d of %s (offset %d): %w", w.pos, w.name, w.next, verr)
		}
	}
	w.next, w.end = h.NextOffset(), w.pos+size
	return true
}

// Batch returns the batch Next stopped at. Valid until the next call of Next.
func (w *SegmentWalker) Batch() SegmentBatch { return w.cur }

// Err returns nil when the walk reached the end of the file on a batch boundary, a
// *CorruptTailError when the bytes left are not a whole batch, or the read error that ended it.
func (w *SegmentWalker) Err() error { return w.err }

// End returns the byte position just past the last whole batch Next returned (the file's
// valid length when the walk ended on a CorruptTailError).
func (w *SegmentWalker) End() int64 { return w.end }

// NextOffset returns the offset a batch after the last one Next returned must start at (the
// segment's base offset before the first): the segment's end offset when the walk ends.
func (w *SegmentWalker) NextOffset() int64 { return w.next }

func (w *SegmentWalker) tail(err error, format string, args ...any) bool {
	w.done = true
	w.err = &CorruptTailError{Position: w.pos, Offset: w.next, Bytes: w.size - w.pos, msg: fmt.Sprintf(format, args...), err: err}
	return false
}

func (w *SegmentWalker) fail(err error) bool {
	w.done = true
	w.err = err
	return false
}

// bytes returns file bytes [pos, pos+n); the caller guarantees pos+n <= w.size.
func (w *SegmentWalker) bytes(pos int64, n int) ([]byte, error) {
	if pos >= w.bufPos && pos+int64(n) <= w.bufPos+int64(len(w.buf)) {
		off := pos - w.bufPos
		return w.buf[off : off+int64(n)], nil
	}
	want := int(min(int64(max(n, walkChunk)), w.size-pos))
	if cap(w.buf) < want {
		w.buf = make([]byte, want)
	}
	w.buf = w.buf[:want]
	if k, err := w.r.ReadAt(w.buf, pos); k < want {
		w.buf = w.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %s at %d: %w", w.name, pos, err)
	}
	w.bufPos = pos
	return w.buf[:n], nil
}
