package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/isrbench/isrbench/core/vfs"
)

// entry locates one batch inside a segment: its base offset relative to the segment's base
// offset and its byte position in the .log file. The in-memory table holds one per batch; the
// .index file holds one per log.index.interval.bytes, in the same 8-byte big-endian layout.
type entry struct {
	rel uint32
	pos uint32
}

const indexEntrySize = 8

// segment is one NNNNNNNNNNNNNNNNNNNN.log file (+ .index). base and the paths are
// immutable. The published fields (entries, size, next, maxTs) are written under Log.wmu and
// Log.mu and read under Log.mu (read lock) or Log.wmu; the writer-only fields are guarded by
// Log.wmu; the file fields are described in files.go.
type segment struct {
	base    int64
	fs      vfs.FS      // opens the .log (when closed) and the .index (see withIndex)
	cache   *fileCache  // of sealed files
	active  *fileCache  // of active files
	wmu     *sync.Mutex // its Log's writer lock: an active segment's file is closed under it
	logPath string
	idxPath string
	txnPath string

	// The .txnindex (txnindex.go), guarded by txnMu (its Log's txnMu): the entries in the
	// file, those fsynced, the last one's marker offset (-1: none), whether the segment was deleted, and
	// (written by Open only) whether Open saw a transactional batch in it.
	txnMu     *sync.Mutex
	txnN      int
	txnSynced int // entries known fsynced
	txnLast   int64
	txnGone   bool
	txnSeen   bool

	// The .log file: the segment's hold on it (nil while a sealed segment's file is
	// closed; swapped under fmu), read lock-free by acquire. The active segment always
	// holds it.
	file     atomic.Pointer[segFile]
	sealed   atomic.Bool // no longer the active segment: its file may be closed when unused
	used     atomic.Bool // read since the cache's clock hand last passed (CLOCK's reference bit)
	cacheIdx int         // index in cache's ring, -1 when not cached (guarded by cache.mu)
	// index in active's ring, -1 when not cached (guarded by active.mu); activeCached
	// mirrors activeIdx >= 0 for the writer's lock-free check
	activeIdx    int
	activeCached atomic.Bool
	fmu          struct {
		sync.Mutex
		gone bool // removed, or its Log closed: the file is never opened again
	}

	// published (Log.mu)
	entries []entry // every batch, in order
	size    int64   // bytes of whole published batches
	next    int64   // offset after the last batch (exclusive); base when empty
	maxTs   int64   // largest batch maxTimestamp, -1 if none

	// What needs a check before it is served (damage.go): bytes at or past ours were
	// written by this process (the file's size when Open found it; 0 for a segment this
	// process created); bytes below checked were CRC-checked (a prefix, batch-aligned).
	// Both only come down by truncation (under Log.wmu); checked is raised lock-free.
	ours, checked atomic.Int64

	// writer-only (Log.wmu)
	w             vfs.File     // the open .log file of the active segment (the hold's), else nil: see writable
	gen           atomic.Int64 // bumped (under Log.wmu) by every truncation into the segment and its removal; read by the roll flush
	synced        int64        // bytes known fsynced
	index         []entry      // sparse index entries (written and pending)
	idxWritten    int          // entries of index written to the .index file
	idxSynced     int          // entries of index known fsynced
	bytesSinceIdx int64        // bytes appended since the last index entry (Kafka's bytesSinceLastIndexEntry)
	wbStarted     int64        // drop-behind: bytes [0, wbStarted) were handed to the disk (dropbehind.go)
	dropped       int64        // drop-behind: bytes [0, dropped) were dropped from the page cache

	// tail is the newest bytes written, in memory (tail.go): written under Log.wmu, read
	// lock-free; dropped when the segment is sealed.
	tail tail
}

func segmentName(base int64, ext string) string { return fmt.Sprintf("%020d%s", base, ext) }

// newSegment returns l's segment at base, with no file open.
func (l *Log) newSegment(base int64) *segment {
	return &segment{base: base, next: base, maxTs: -1, fs: l.fs, cache: l.cache, active: l.active,
		wmu: &l.wmu.Mutex, cacheIdx: -1, activeIdx: -1, txnMu: &l.txnMu, txnLast: -1,
		logPath: filepath.Join(l.dir, segmentName(base, ".log")),
		idxPath: filepath.Join(l.dir, segmentName(base, ".index")),
		txnPath: filepath.Join(l.dir, segmentName(base, txnIndexExt))}
}

// hold installs f, the segment's open .log file, as the active segment's hold, kept open by
// the cache of active files.
func (s *segment) hold(f vfs.File) {
	h := &segFile{f: f}
	h.refs.Store(1)
	s.file.Store(h)
	s.w = f
	s.cacheActive()
}

// createSegment creates (or truncates a stale) empty segment at base in l's directory, as
// the active segment (its .log open; its .index is created when first written). On failure
// nothing is left open and the files it created are removed.
func (l *Log) createSegment(base int64) (*segment, error) {
	fs := l.fs
	s := l.newSegment(base)
	f, err := fs.OpenFile(s.logPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: create segment %s: %w", s.logPath, err)
	}
	// The .index is created by its first write (withIndex): an empty segment needs none,
	// and a new replica is one file creation cheaper. A stale one goes.
	if err := fs.Remove(s.idxPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		f.Close()
		fs.Remove(s.logPath) // best effort: recovery would take an empty last segment anyway
		return nil, fmt.Errorf("log: remove stale index %s: %w", s.idxPath, err)
	}
	s.hold(f)
	return s, nil
}

// withIndex runs fn on the segment's .index file, opened (created when missing) for it and
// closed after. The index is read at recovery and written at a roll flush, a flush or a
// truncation, so keeping it closed in between halves the descriptors a broker holds.
func (s *segment) withIndex(what string, fn func(f vfs.File) error) error {
	f, err := s.fs.OpenFile(s.idxPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("log: %s index %s: %w", what, s.idxPath, err)
	}
	err = fn(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("log: %s index %s: close: %w", what, s.idxPath, cerr)
	}
	return err
}

// baseAt is the absolute base offset of batch i.
func (s *segment) baseAt(i int) int64 { return s.base + int64(s.entries[i].rel) }

// nextAt is the offset after batch i (exclusive).
func (s *segment) nextAt(i int) int64 {
	if i+1 < len(s.entries) {
		return s.baseAt(i + 1)
	}
	return s.next
}

// endAt is the byte position after batch i.
func (s *segment) endAt(i int) int64 {
	if i+1 < len(s.entries) {
		return int64(s.entries[i+1].pos)
	}
	return s.size
}

// find returns the index of the last batch with base offset <= off (off >= s.base and the
// segment non-empty). Tail lookups are O(1), others a binary search.
func (s *segment) find(off int64) int {
	n := len(s.entries)
	if off >= s.baseAt(n-1) {
		return n - 1
	}
	rel := uint32(off - s.base)
	return sort.Search(n, func(i int) bool { return s.entries[i].rel > rel }) - 1
}

// addIndex applies Kafka's sparse index rule for a batch appended at pos with size bytes.
func (s *segment) addIndex(e entry, size int64, interval int) {
	if s.bytesSinceIdx > int64(interval) {
		s.index = append(s.index, e)
		s.bytesSinceIdx = 0
	}
	s.bytesSinceIdx += size
}

// writeIndex writes the pending index entries to the .index file (one pwrite), and fsyncs
// it when sync is set and it holds entries not known synced.
func (s *segment) writeIndex(scratch []byte, sync bool) ([]byte, error) {
	if s.idxWritten == len(s.index) && (!sync || s.idxSynced == s.idxWritten) {
		return scratch, nil
	}
	scratch = scratch[:0]
	for _, e := range s.index[s.idxWritten:] {
		scratch = binary.BigEndian.AppendUint32(scratch, e.rel)
		scratch = binary.BigEndian.AppendUint32(scratch, e.pos)
	}
	err := s.withIndex("write", func(f vfs.File) error {
		if len(scratch) > 0 {
			if _, err := f.WriteAt(scratch, int64(s.idxWritten)*indexEntrySize); err != nil {
				return fmt.Errorf("log: write index %s: %w", s.idxPath, err)
			}
			s.idxWritten = len(s.index)
		}
		if sync {
			if err := f.Sync(); err != nil {
				return fmt.Errorf("log: fsync index %s: %w", s.idxPath, err)
			}
			s.idxSynced = s.idxWritten
		}
		return nil
	})
	return scratch, err
}

// rebuildIndex regenerates the sparse index from the batch table and rewrites the file.
func (s *segment) rebuildIndex(interval int) error {
	s.index = s.index[:0]
	s.bytesSinceIdx = 0
	for i, e := range s.entries {
		s.addIndex(e, s.endAt(i)-int64(e.pos), interval)
	}
	if err := s.withIndex("truncate", func(f vfs.File) error { return f.Truncate(0) }); err != nil {
		return err
	}
	s.idxWritten, s.idxSynced = 0, 0
	_, err := s.writeIndex(nil, true)
	return err
}

// loadIndex reads the .index file and keeps it when every entry names a real batch (same
// relative offset and position) in strictly increasing order; a missing trailing part (an
// index that lags the log after a crash) is fine. It reports "" when the index was kept, or
// why it must be rebuilt.
func (s *segment) loadIndex() (string, error) {
	var data []byte
	why := ""
	err := s.withIndex("read", func(f vfs.File) error {
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("log: stat index %s: %w", s.idxPath, err)
		}
		if st.Size()%indexEntrySize != 0 {
			why = fmt.Sprintf("index %s size %d is not a multiple of %d", filepath.Base(s.idxPath), st.Size(), indexEntrySize)
			return nil
		}
		if int64(len(s.entries))*indexEntrySize < st.Size() {
			why = fmt.Sprintf("index %s has %d entries for %d batches", filepath.Base(s.idxPath), st.Size()/indexEntrySize, len(s.entries))
			return nil
		}
		data = make([]byte, st.Size())
		if _, err := f.ReadAt(data, 0); err != nil {
			return fmt.Errorf("log: read index %s: %w", s.idxPath, err)
		}
		return nil
	})
	if err != nil || why != "" {
		return why, err
	}
	s.index = s.index[:0]
	j := 0 // next candidate batch
	for p := 0; p < len(data); p += indexEntrySize {
		e := entry{rel: binary.BigEndian.Uint32(data[p:]), pos: binary.BigEndian.Uint32(data[p+4:])}
		for j < len(s.entries) && s.entries[j].rel < e.rel {
			j++
		}
		if j == len(s.entries) || s.entries[j] != e {
			return fmt.Sprintf("index %s entry %d (offset %d, position %d) matches no batch", filepath.Base(s.idxPath), p/indexEntrySize, s.base+int64(e.rel), e.pos), nil
		}
		j++
		s.index = append(s.index, e)
	}
	s.idxWritten, s.idxSynced = len(s.index), len(s.index)
	s.bytesSinceIdx = s.size
	if n := len(s.index); n > 0 {
		s.bytesSinceIdx = s.size - int64(s.index[n-1].pos)
	}
	return "", nil
}

// indexCutAt returns how many index entries lie before byte position pos, and whether the
// .index file may hold entries at or past it, so that a truncation to pos must cut the file
// too: entries written, or pending ones a roll flush in flight may be writing.
func (s *segment) indexCutAt(pos int64) (n int, fileToo bool) {
	n = sort.Search(len(s.index), func(i int) bool { return int64(s.index[i].pos) >= pos })
	return n, len(s.index) > n
}

// truncateIndex drops index entries at or past byte position pos; idx is the open .index
// file when indexCutAt said the file must be cut too (else nil). Log.idxMu held.
func (s *segment) truncateIndex(pos int64, idx vfs.File) error {
	n, fileToo := s.indexCutAt(pos)
	s.index = s.index[:n]
	if fileToo {
		if idx == nil {
			panic("BUG: log: truncateIndex without the .index file it must cut")
		}
		st, err := idx.Stat()
		if err != nil {
			return fmt.Errorf("log: stat index %s: %w", s.idxPath, err)
		}
		if st.Size() > int64(n)*indexEntrySize {
			if err := idx.Truncate(int64(n) * indexEntrySize); err != nil {
				return fmt.Errorf("log: truncate index %s: %w", s.idxPath, err)
			}
		}
	}
	s.idxWritten = min(s.idxWritten, n)
	s.idxSynced = min(s.idxSynced, n)
	s.bytesSinceIdx = s.size
	if n > 0 {
		s.bytesSinceIdx = s.size - int64(s.index[n-1].pos)
	}
	return nil
}

// remove retires the segment and unlinks its files; an open .log file stays open for live
// Slices.
func (s *segment) remove(fs vfs.FS) error {
	s.retire()
	s.gen.Add(1)
	s.w = nil
	err1 := fs.Remove(s.logPath)
	err2 := fs.Remove(s.idxPath)
	err3 := s.removeTxnIndex(fs)
	if err1 != nil && !os.IsNotExist(err1) {
		return fmt.Errorf("log: delete segment: %w", err1)
	}
	if err2 != nil && !os.IsNotExist(err2) {
		return fmt.Errorf("log: delete index: %w", err2)
	}
	return err3
}
