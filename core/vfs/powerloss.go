package vfs

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// PowerLossFS wraps a file system (normally OS) and remembers, for every file written through
// it, how many of its bytes were made durable (the size at its last Sync, cut by later
// truncations). Crash then does to the files what a machine crash does to the page cache:
// every file written since its last Sync is truncated back to its durable length.
//
// It models lost appends exactly (the broker's segments, indexes and checkpoints are
// append-only or replaced by rename), not in-place overwrites of synced bytes. A broker of the
// embedded cluster runs on its own PowerLossFS, so the crash fault affects that broker only.
// Safe for concurrent use.
type PowerLossFS struct {
	FS
	mu struct {
		sync.Mutex
		files map[string]*plState // cleaned path -> state
	}
}

type plState struct {
	durable int64
	// writers counts the open handles that may write the file (opened O_WRONLY or O_RDWR:
	// writes may also bypass the wrapper through File.OS); size is the file's size when the
	// last of them closed, -1 unknown. A file with no writer and a known size needs no stat
	// to be made durable by SyncFS: with thousands of replicas, one SyncFS stats only the
	// files still open for writing (the active segments), not every file ever written.
	writers int
	size    int64
	// open is the file's one open writer (writers == 1), else nil: while its size is known
	// (plFile.known) SyncFS takes it from there instead of a stat, so the thousands of empty
	// active segments of a batch of new replicas cost nothing to make durable.
	open *plFile
}

// NewPowerLossFS returns a PowerLossFS over base (nil: OS).
func NewPowerLossFS(base FS) *PowerLossFS {
	p := &PowerLossFS{FS: Or(base)}
	p.mu.files = map[string]*plState{}
	return p
}

func (p *PowerLossFS) state(name string, size int64) *plState {
	k := filepath.Clean(name)
	st := p.mu.files[k]
	if st == nil {
		st = &plState{durable: size, size: -1}
		p.mu.files[k] = st
	}
	return st
}

// OpenFile implements FS.
func (p *PowerLossFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	var statErr error // whether O_CREATE made the file: asked only when O_TRUNC does not say
	if flag&os.O_CREATE != 0 && flag&os.O_TRUNC == 0 {
		_, statErr = p.FS.Stat(name)
	}
	f, err := p.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	p.mu.Lock()
	defer p.mu.Unlock()
	var st *plState
	switch {
	case errors.Is(statErr, fs.ErrNotExist), flag&os.O_TRUNC != 0:
		st = p.state(name, 0)
		st.durable = 0 // a new or truncated file: nothing of it is durable yet
	default:
		if fi, err := f.Stat(); err == nil {
			st = p.state(name, fi.Size())
		}
	}
	known := int64(-1)
	if flag&os.O_TRUNC != 0 && flag&os.O_APPEND == 0 {
		known = 0
	}
	pf := &plFile{File: f, p: p, name: filepath.Clean(name), writer: writable && st != nil}
	pf.known.Store(known)
	if writable && st != nil {
		st.writers++
		st.size = -1
		st.open = nil
		if st.writers == 1 {
			st.open = pf
		}
	}
	return pf, nil
}

// Mkdir implements Mkdirer through the wrapped file system (see MkdirNew).
func (p *PowerLossFS) Mkdir(dir string, perm os.FileMode) error { return MkdirNew(p.FS, dir, perm) }

// Remove implements FS.
func (p *PowerLossFS) Remove(name string) error {
	if err := p.FS.Remove(name); err != nil {
		return err
	}
	p.mu.Lock()
	delete(p.mu.files, filepath.Clean(name))
	p.mu.Unlock()
	return nil
}

// RemoveAll implements FS.
func (p *PowerLossFS) RemoveAll(name string) error {
	if err := p.FS.RemoveAll(name); err != nil {
		return err
	}
	k := filepath.Clean(name)
	p.mu.Lock()
	for q := range p.mu.files {
		if q == k || len(q) > len(k) && q[:len(k)+1] == k+string(filepath.Separator) {
			delete(p.mu.files, q)
		}
	}
	p.mu.Unlock()
	return nil
}

// Rename implements FS.
func (p *PowerLossFS) Rename(oldpath, newpath string) error {
	if err := p.FS.Rename(oldpath, newpath); err != nil {
		return err
	}
	p.mu.Lock()
	o, n := filepath.Clean(oldpath), filepath.Clean(newpath)
	if st, ok := p.mu.files[o]; ok {
		p.mu.files[n] = st
		delete(p.mu.files, o)
	} else {
		delete(p.mu.files, n)
		// A directory: the files under it moved with it.
		for name, st := range p.mu.files {
			if strings.HasPrefix(name, o+string(filepath.Separator)) {
				delete(p.mu.files, name)
				p.mu.files[n+name[len(o):]] = st
			}
		}
	}
	p.mu.Unlock()
	return nil
}

// Crash truncates every file longer than its durable length back to it, as a power loss would
// leave it, and returns the first error. (Writes may bypass the wrapper through File.OS, for
// pwritev and io_uring, so the check is by size, not by tracking each write.) Files must not be written meanwhile (the
// broker using them is stopped first).
func (p *PowerLossFS) Crash() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for name, st := range p.mu.files {
		f, err := p.FS.OpenFile(name, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			if fi, serr := f.Stat(); serr == nil && fi.Size() > st.durable {
				err = f.Truncate(st.durable)
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

type plFile struct {
	File
	p      *PowerLossFS
	name   string
	writer bool // counted in its plState's writers until Close
	closed bool
	// known is the file's size as its writes through f made it, when f created or
	// truncated it and it was written only through f (no File.OS, no other writer): Close
	// then needs no stat; -1 unknown.
	known atomic.Int64
}

// grow raises known to end unless it is unknown.
func (f *plFile) grow(end int64) {
	for {
		k := f.known.Load()
		if k < 0 || k >= end || f.known.CompareAndSwap(k, end) {
			return
		}
	}
}

// Write implements File, keeping known.
func (f *plFile) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	if n > 0 {
		for {
			k := f.known.Load()
			if k < 0 || f.known.CompareAndSwap(k, k+int64(n)) {
				break
			}
		}
	}
	return n, err
}

// WriteAt implements File, keeping known.
func (f *plFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(b, off)
	if n > 0 {
		f.grow(off + int64(n))
	}
	return n, err
}

// OS implements File: what is written through the descriptor is not seen by f, so its
// size is looked up at Close.
func (f *plFile) OS() *os.File {
	if f.known.Load() >= 0 {
		f.known.Store(-1)
	}
	return f.File.OS()
}

// Close records, for the last writer of the file, its size (see plState), then closes it.
func (f *plFile) Close() error {
	if f.writer && !f.closed {
		f.closed = true
		size := f.known.Load()
		if size < 0 || f.othersWrite() {
			size = -1
			if fi, err := f.File.Stat(); err == nil {
				size = fi.Size()
			}
		}
		f.p.mu.Lock()
		if st := f.p.mu.files[f.name]; st != nil && st.writers > 0 {
			if st.open == f {
				st.open = nil
			}
			st.writers--
			if st.writers == 0 {
				st.size = size
			}
		}
		f.p.mu.Unlock()
	}
	return f.File.Close()
}

// othersWrite reports whether another handle writes f's file too (its size then is not
// f's to know).
func (f *plFile) othersWrite() bool {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	st := f.p.mu.files[f.name]
	return st == nil || st.writers > 1
}

func (f *plFile) Truncate(size int64) error {
	if err := f.File.Truncate(size); err != nil {
		f.known.Store(-1)
		return err
	}
	if k := f.known.Load(); k >= 0 {
		f.known.CompareAndSwap(k, size)
	}
	f.p.mu.Lock()
	st := f.p.state(f.name, size)
	st.durable = min(st.durable, size)
	f.p.mu.Unlock()
	return nil
}

func (f *plFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	fi, err := f.File.Stat()
	if err != nil {
		return err
	}
	f.p.mu.Lock()
	st := f.p.state(f.name, fi.Size())
	st.durable = fi.Size()
	f.p.mu.Unlock()
	return nil
}

// Crasher is a file system that can simulate a power loss in place (PowerLossFS, MemFS).
type Crasher interface {
	Crash() error
}

// Crash implements Crasher for MemFS: every file's contents revert to their durable contents,
// in place (open files see the reverted contents), and in a strict MemFS the namespace reverts
// to what the directories held at their last SyncDir (see CrashClone).
func (m *MemFS) Crash() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.nodes = maps.Clone(m.crashTreeLocked())
	m.mu.used = 0
	seen := map[*memNode]bool{}
	for _, n := range m.mu.nodes {
		if n.dir || seen[n] {
			continue
		}
		seen[n] = true
		n.data = append(n.data[:0], n.durable...)
		m.mu.used += int64(len(n.data))
	}
	m.syncAllLocked()
	return nil
}
