package log

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/vfs"
)

// Open descriptors: a segment's .log file is opened when a write, a read, a scan, a flush or
// a truncation needs it and stays open only while used or while one of two process-wide
// caches keeps it: the cache of active segments (ActiveFileCacheSize entries) and the cache
// of sealed ones (SealedFileCacheSize entries), each evicting the least recently used (CLOCK).
// The descriptors a process holds for its logs are thus bounded by the two caches, not by its
// replicas nor by their segments: 30,000 replicas of 100 segments each hold at most
// ActiveFileCacheSize + SealedFileCacheSize files open, not 30,000 or 3 million. An active
// segment's file is closed only by its own Log's writer lock (taken with TryLock: a Log
// busy writing keeps its file), and reopened by its next write or read. A .index file is
// opened only for the moment it is read or written.
//
// A segFile is one open descriptor, reference counted: one reference for the segment's hold
// (while a cache keeps it) and one per user (a Slice until Release, a scan, a flush, a
// write). The last reference closes it, so a Slice stays readable after its segment was
// sealed, evicted, deleted by retention or truncation, or its Log closed: unlinked files
// that are open stay readable.

// ActiveFileCacheSize is how many active segments' files the process keeps open (the
// replicas written or read most recently); the files of the others are closed until their
// next write or read reopens them.
const ActiveFileCacheSize = 4096

// SealedFileCacheSize is how many sealed segment files the process keeps open for reads
// beyond the active segments (the default cache; its descriptors are part of the reserve a
// process needs besides one per hosted replica).
const SealedFileCacheSize = 128

// segFile is one open descriptor of a segment's .log file. Safe for concurrent use.
type segFile struct {
	f    vfs.File
	refs atomic.Int64 // closed at 0
}

// tryRef takes a reference unless the file is already closed (refs reached 0).
func (h *segFile) tryRef() bool {
	for {
		n := h.refs.Load()
		if n <= 0 {
			return false
		}
		if h.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// unref drops one reference; the last one closes the file.
func (h *segFile) unref() {
	if n := h.refs.Add(-1); n == 0 {
		h.f.Close()
	} else if n < 0 {
		panic("BUG: log: segment file released more often than referenced (Slice.Release called twice?)")
	}
}

// errSegmentGone: the segment was deleted (retention, truncation) or its Log closed before
// its file could be opened again. Reads treat it as an offset below the log start.
var errSegmentGone = fmt.Errorf("log: segment deleted: %w", kerr.OffsetOutOfRange)

// fileCache keeps up to size sealed segments' files open, evicting with the CLOCK algorithm
// (an approximation of least recently used whose hits cost one atomic store, no lock).
// Safe for concurrent use. Lock order: segment.fmu, then fileCache.mu.
type fileCache struct {
	size   int
	active bool // the cache of active segments (segment.activeIdx), else of sealed ones (cacheIdx)
	mu     struct {
		sync.Mutex
		ring []*segment // the cached segments; segment.cacheIdx is the index here
		hand int
	}
}

func newFileCache(size int) *fileCache { return &fileCache{size: max(1, size)} }

func newActiveCache(size int) *fileCache { return &fileCache{size: max(1, size), active: true} }

// sealedFiles and activeFiles are the process-wide caches used by every Log (Config has no
// say in them, so the bounds hold for the process).
var (
	sealedFiles = newFileCache(SealedFileCacheSize)
	activeFiles = newActiveCache(ActiveFileCacheSize)
)

// idx is s's index in c's ring (-1: not in it), guarded by c.mu.
func (c *fileCache) idx(s *segment) *int {
	if c.active {
		return &s.activeIdx
	}
	return &s.cacheIdx
}

// add puts s (its fmu held, its file open) in the cache and returns the segments evicted to
// make room; the caller drops their holds (dropCached) after releasing s.fmu.
func (c *fileCache) add(s *segment, victims []*segment) []*segment {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *c.idx(s) >= 0 {
		return victims
	}
	for len(c.mu.ring) >= c.size {
		if c.mu.hand >= len(c.mu.ring) {
			c.mu.hand = 0
		}
		v := c.mu.ring[c.mu.hand]
		if v.used.Swap(false) {
			c.mu.hand++
			continue
		}
		c.removeLocked(v)
		victims = append(victims, v)
	}
	*c.idx(s) = len(c.mu.ring)
	c.mu.ring = append(c.mu.ring, s)
	if c.active {
		s.activeCached.Store(true)
	}
	return victims
}

// remove takes s out of the cache (a no-op when it is not in it).
func (c *fileCache) remove(s *segment) {
	c.mu.Lock()
	c.removeLocked(s)
	c.mu.Unlock()
}

func (c *fileCache) removeLocked(s *segment) {
	i := *c.idx(s)
	if i < 0 {
		return
	}
	last := len(c.mu.ring) - 1
	c.mu.ring[i] = c.mu.ring[last]
	*c.idx(c.mu.ring[i]) = i
	c.mu.ring[last] = nil
	c.mu.ring = c.mu.ring[:last]
	*c.idx(s) = -1
	if c.active {
		s.activeCached.Store(false)
	}
}

// cached reports whether s is in the cache.
func (c *fileCache) cached(s *segment) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *c.idx(s) >= 0
}

// len returns the number of cached files (tests).
func (c *fileCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.ring)
}

// acquire returns the segment's open file with a reference for the caller (unref it when
// done), opening it when it is closed. Lock-free when the file is open. It fails with
// errSegmentGone after the segment was removed or its Log closed, and with the open's error
// (a resource error when no descriptor is left) otherwise.
func (s *segment) acquire() (*segFile, error) {
	if h := s.file.Load(); h != nil && h.tryRef() {
		s.used.Store(true)
		return h, nil
	}
	s.fmu.Lock()
	if h := s.file.Load(); h != nil && h.tryRef() { // opened meanwhile
		s.fmu.Unlock()
		s.used.Store(true)
		return h, nil
	}
	if s.fmu.gone {
		s.fmu.Unlock()
		return nil, errSegmentGone
	}
	f, err := s.fs.OpenFile(s.logPath, os.O_RDWR, 0)
	if err != nil {
		s.fmu.Unlock()
		return nil, fmt.Errorf("log: open segment %s: %w", s.logPath, err)
	}
	h := &segFile{f: f}
	h.refs.Store(2) // the hold and the caller's
	s.file.Store(h)
	s.used.Store(true)
	var victims []*segment
	if s.sealed.Load() {
		victims = s.cache.add(s, nil)
	} else {
		victims = s.active.add(s, nil)
	}
	s.fmu.Unlock()
	dropCached(victims)
	return h, nil
}

// dropCached closes (drops the hold of) the files of segments the cache evicted, unless a
// segment became active again or was cached again meanwhile.
// An active segment's file is closed only under its Log's writer lock, taken with TryLock:
// a Log busy writing keeps its file open (its next write puts it back in the cache).
func dropCached(victims []*segment) {
	for _, v := range victims {
		if !v.sealed.Load() {
			if !v.wmu.TryLock() {
				continue
			}
			v.fmu.Lock()
			if !v.sealed.Load() && !v.active.cached(v) {
				v.w = nil
				v.dropHoldLocked()
			}
			v.fmu.Unlock()
			v.wmu.Unlock()
			continue
		}
		v.fmu.Lock()
		if v.sealed.Load() && !v.cache.cached(v) {
			v.dropHoldLocked()
		}
		v.fmu.Unlock()
	}
}

// cacheActive puts the active segment s, its file held open, in the cache of active files
// (a no-op when it is in it), closing the least recently used others. Log.wmu held.
func (s *segment) cacheActive() {
	s.fmu.Lock()
	var victims []*segment
	if !s.fmu.gone && !s.sealed.Load() && s.file.Load() != nil {
		s.used.Store(true)
		victims = s.active.add(s, nil)
	}
	s.fmu.Unlock()
	dropCached(victims)
}

// writable returns the active segment's open file for a write (Log.wmu held), reopening it
// when the cache of active files closed it: a resource error when no descriptor is left.
// The file stays open while wmu is held.
func (s *segment) writable() (vfs.File, error) {
	if s.w != nil {
		if s.activeCached.Load() {
			s.used.Store(true)
		} else {
			s.cacheActive() // evicted while its Log was busy: back in the cache
		}
		return s.w, nil
	}
	h, err := s.acquire()
	if err != nil {
		return nil, err
	}
	s.w = h.f
	h.unref() // the hold keeps it open; only a holder of wmu closes it
	return s.w, nil
}

// dropHoldLocked closes the segment's hold on its file (fmu held).
func (s *segment) dropHoldLocked() {
	if h := s.file.Swap(nil); h != nil {
		h.unref()
	}
}

// seal makes s a sealed segment: its file, open since it was active, goes to the cache
// (which may evict others); from now on it may be closed when unused.
func (s *segment) seal() {
	s.fmu.Lock()
	s.sealed.Store(true)
	s.active.remove(s)
	var victims []*segment
	if s.file.Load() != nil && !s.fmu.gone {
		s.used.Store(true)
		victims = s.cache.add(s, nil)
	}
	s.fmu.Unlock()
	dropCached(victims)
}

// activate makes a sealed segment the active one again (a truncation cut into it): h, a
// reference the caller holds on its open file, becomes its hold if it has none; the cache
// lets go of it. The caller still owns its reference.
func (s *segment) activate(h *segFile) {
	s.fmu.Lock()
	s.sealed.Store(false)
	s.cache.remove(s)
	if cur := s.file.Load(); cur != h {
		h.refs.Add(1)
		s.file.Store(h)
		if cur != nil {
			cur.unref()
		}
	}
	s.fmu.Unlock()
	s.cacheActive()
}

// retire marks s removed (or its Log closed): its file is never opened again, the hold is
// dropped (the descriptor closes once the last Slice on it is released) and the cache lets
// go of it.
func (s *segment) retire() {
	s.fmu.Lock()
	s.retireLocked()
	s.fmu.Unlock()
}

func (s *segment) retireLocked() {
	s.fmu.gone = true
	s.cache.remove(s)
	s.active.remove(s)
	s.dropHoldLocked()
}
