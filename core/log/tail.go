package log

import "sync/atomic"

// The in-memory tail (isrbench.log.tail.bytes, Config.TailBytes): the active segment keeps a
// copy of the newest bytes written to it, at most TailBytes plus two chunks, so that
// Slice.ReadAll copies recent batches (what followers and caught-up consumers fetch) from
// memory instead of reading them back with pread(2).
//
// Concurrency: the writer (under Log.wmu) copies each write into chunks and then publishes the
// new end with an atomic store; readers load the snapshot and its end and copy only bytes
// below that end, which are never written again (a chunk is filled once; a write that does
// not continue the tail, after a truncation, starts a new snapshot with new chunks). Chunks
// that fall out of the bound leave in a new snapshot; a reader holding the old one still reads
// valid bytes. No lock on either side.

// A tail is kept only once it is wanted: a ReadAll of the segment that the tail could not
// serve asks for it, so a follower's replica (which nobody fetches from) copies nothing, and
// the next segment of a wanted one is wanted from its start.
//
// Chunk sizes: a tail starts with a small chunk, so that a partition written once costs
// little, and doubles up to the largest, which stays within the heap's small size classes
// (allocated from and freed to the per-P caches, not the page heap).
const (
	minTailChunk = 4 << 10
	maxTailChunk = 32 << 10
)

// tail is a segment's in-memory tail. snap is nil while the tail holds nothing (off, not
// wanted yet, never written, sealed, or dropped).
type tail struct {
	snap   atomic.Pointer[tailSnap]
	wanted atomic.Bool
}

// tailSnap is one run of contiguous bytes of the segment: chunks[0][0] is at position start.
// Every chunk has len == cap; the bytes of [start, end) are valid and immutable.
type tailSnap struct {
	start  int64
	chunks [][]byte
	end    atomic.Int64
	fill   int // bytes of the last chunk written (writer-only)
}

// write copies bufs, written at position off of the segment, into the tail, keeping at most
// limit bytes (plus the chunk being filled). A write that does not continue the tail starts a
// new one; one larger than limit empties it. Called by the writer only (Log.wmu held).
func (t *tail) write(off int64, bufs [][]byte, limit int64) {
	var total int64
	for _, b := range bufs {
		total += int64(len(b))
	}
	if total == 0 || !t.wanted.Load() {
		return
	}
	s := t.snap.Load()
	if total > limit {
		if s != nil {
			t.snap.Store(nil)
		}
		return
	}
	if s == nil || s.end.Load() != off {
		s = &tailSnap{start: off}
		s.end.Store(off)
		t.snap.Store(s)
	}
	end := off
	for _, b := range bufs {
		for len(b) > 0 {
			if len(s.chunks) == 0 || s.fill == len(s.chunks[len(s.chunks)-1]) {
				s.end.Store(end) // what is written so far stays readable in the new snapshot
				s = t.grow(s, limit)
			}
			c := s.chunks[len(s.chunks)-1]
			n := copy(c[s.fill:], b)
			s.fill += n
			b = b[n:]
			end += int64(n)
		}
	}
	s.end.Store(end)
}

// grow publishes a snapshot with one more chunk after s's, dropping the oldest chunks while
// the others hold at least limit bytes.
func (t *tail) grow(s *tailSnap, limit int64) *tailSnap {
	size := minTailChunk
	if n := len(s.chunks); n > 0 {
		size = min(2*len(s.chunks[n-1]), tailChunkMax(limit))
	}
	ns := &tailSnap{start: s.start}
	kept := s.end.Load() - s.start
	chunks := s.chunks
	for len(chunks) > 0 && kept-int64(len(chunks[0])) >= limit {
		kept -= int64(len(chunks[0]))
		ns.start += int64(len(chunks[0]))
		chunks = chunks[1:]
	}
	ns.chunks = make([][]byte, len(chunks), len(chunks)+1)
	copy(ns.chunks, chunks)
	ns.chunks = append(ns.chunks, make([]byte, size))
	ns.end.Store(s.end.Load())
	t.snap.Store(ns)
	return ns
}

// tailChunkMax is the largest chunk of a tail bounded by limit: a tail holds at most limit
// bytes plus two such chunks.
func tailChunkMax(limit int64) int {
	return int(max(minTailChunk, min(maxTailChunk, limit)))
}

// drop empties the tail (the segment was sealed) and passes on whether it was wanted to next,
// the new active segment.
func (t *tail) drop(next *tail) {
	next.wanted.Store(t.wanted.Load())
	t.snap.Store(nil)
}

// load returns the current snapshot (nil: none).
func (t *tail) load() *tailSnap { return t.snap.Load() }

// appendTo appends the n bytes at segment position pos to dst from the current snapshot when
// it holds them all; when it does not, the tail is wanted from now on.
func (t *tail) appendTo(dst []byte, pos, n int64) ([]byte, bool) {
	if t == nil {
		return dst, false
	}
	b, ok := t.load().appendTo(dst, pos, n)
	if !ok && !t.wanted.Load() {
		t.wanted.Store(true)
	}
	return b, ok
}

// appendTo appends the n bytes at segment position pos to dst when the snapshot holds all of
// them, and reports whether it did (dst is unchanged when not).
func (s *tailSnap) appendTo(dst []byte, pos, n int64) ([]byte, bool) {
	if s == nil || pos < s.start || pos+n > s.end.Load() {
		return dst, false
	}
	off := pos - s.start
	for _, c := range s.chunks {
		if n == 0 {
			break
		}
		if off >= int64(len(c)) {
			off -= int64(len(c))
			continue
		}
		k := min(int64(len(c))-off, n)
		dst = append(dst, c[off:off+k]...)
		n -= k
		off = 0
	}
	return dst, true
}
