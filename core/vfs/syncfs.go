package vfs

import (
	"fmt"
	"os"
	"sync/atomic"
)

// FSSyncer is implemented by a file system that can make everything written to it durable
// at once: the contents of every file and every directory entry (Linux's syncfs(2)). One
// such call replaces thousands of fsyncs when many files were created together.
type FSSyncer interface {
	// SyncFS makes durable every file's contents and every directory entry of the file
	// system that holds dir.
	SyncFS(dir string) error
}

// SyncFS implements FSSyncer with syncfs(2) on dir's file system (counted as one fsync).
func (o osFS) SyncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if o.c != nil {
		o.c.fsync.Add(1)
	}
	err = syncfs(d.Fd())
	if err != nil {
		err = &os.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncFS implements FSSyncer: every file's contents become durable and, in a strict MemFS,
// every directory's current entries.
func (m *MemFS) SyncFS(dir string) error {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.mu.nodes[p]; !ok || !n.dir {
		return &os.PathError{Op: "syncfs", Path: dir, Err: os.ErrNotExist}
	}
	if err := m.injectLocked(OpSync, dir); err != nil {
		return err
	}
	for _, n := range m.mu.nodes {
		if !n.dir {
			n.durable = append(n.durable[:0], n.data...)
		}
	}
	m.syncAllLocked()
	return nil
}

// SyncFS implements FSSyncer when the wrapped file system does (OpSync on dir is injected).
func (e *ErrorFS) SyncFS(dir string) error {
	if err := e.check(OpSync, dir); err != nil {
		return err
	}
	s, ok := e.FS.(FSSyncer)
	if !ok {
		return fmt.Errorf("vfs: syncfs %s: the file system cannot sync as a whole", dir)
	}
	return s.SyncFS(dir)
}

// SyncFS implements FSSyncer when the wrapped file system does: afterwards every file
// written through p is durable at its current length.
func (p *PowerLossFS) SyncFS(dir string) error {
	s, ok := p.FS.(FSSyncer)
	if !ok {
		return fmt.Errorf("vfs: syncfs %s: the file system cannot sync as a whole", dir)
	}
	if err := s.SyncFS(dir); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, st := range p.mu.files {
		if st.writers == 0 && st.size >= 0 {
			st.durable = st.size // unchanged since its last writer closed it
			continue
		}
		if st.writers == 1 && st.open != nil {
			if k := st.open.known.Load(); k >= 0 {
				st.durable = k // written only through its one writer, which knows its size
				continue
			}
		}
		if fi, err := p.FS.Stat(name); err == nil {
			st.durable = fi.Size()
		}
	}
	return nil
}

// DeferFS is a view of a file system in which File.Sync and SyncDir do nothing while it
// defers: Commit then makes everything durable with one SyncFS. A broker creates the
// directories and files of many new replicas through one DeferFS and commits once, instead
// of fsyncing each file and directory. Nothing created through it may be relied on (served,
// acknowledged) before Commit returned: a crash before it may lose any of it, or leave
// renamed files empty. After Commit (or over a file system that is not an FSSyncer, where
// it never defers) it is a plain pass-through. Safe for concurrent use.
type DeferFS struct {
	FS
	root     string
	deferred atomic.Bool
}

// NewDeferFS returns a view of fs that defers syncs until Commit, which syncs the file
// system holding root; over a file system that is not an FSSyncer it defers nothing.
func NewDeferFS(fs FS, root string) *DeferFS {
	d := &DeferFS{FS: Or(fs), root: root}
	d.deferred.Store(CanSyncFS(d.FS))
	return d
}

// Deferring reports whether syncs are deferred (until Commit).
func (d *DeferFS) Deferring() bool { return d.deferred.Load() }

// Commit makes what was written through d durable (one SyncFS of root) and ends the
// deferral; later syncs go through. A no-op when d does not defer. On error the deferral
// ends too, and the error names root.
func (d *DeferFS) Commit() error {
	if !d.deferred.Swap(false) {
		return nil
	}
	if err := d.FS.(FSSyncer).SyncFS(d.root); err != nil {
		return fmt.Errorf("vfs: syncfs %s: %w", d.root, err)
	}
	return nil
}

// Mkdir implements Mkdirer through the wrapped file system (see MkdirNew).
func (d *DeferFS) Mkdir(dir string, perm os.FileMode) error { return MkdirNew(d.FS, dir, perm) }

// SyncDir implements FS: deferred until Commit, else the wrapped SyncDir.
func (d *DeferFS) SyncDir(dir string) error {
	if d.deferred.Load() {
		return nil
	}
	return d.FS.SyncDir(dir)
}

// OpenFile implements FS: the file's Sync is deferred until Commit.
func (d *DeferFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := d.FS.OpenFile(name, flag, perm)
	if err != nil || !d.deferred.Load() {
		return f, err
	}
	return gatedFile{File: f, on: &d.deferred}, nil
}

// gatedFile is a file of a DeferFS or a HoldFS: its Sync does nothing while on is set (the
// view's deferral or hold), which a later SyncFS makes good.
type gatedFile struct {
	File
	on *atomic.Bool
}

func (f gatedFile) Sync() error {
	if f.on.Load() {
		return nil
	}
	return f.File.Sync()
}

// SyncDeferred implements SyncDeferrer: while the view defers or holds, or while the file
// under it does.
func (f gatedFile) SyncDeferred() bool { return f.on.Load() || SyncDeferred(f.File) }
