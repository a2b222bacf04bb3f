package vfs

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

// HoldFS is a view of a file system whose syncs can be held back and then made durable
// together. Between Hold and Release, File.Sync and SyncDir do nothing and renames are
// queued, not made; Release then makes every write durable with one SyncFS of the root,
// makes the queued renames in order, and makes them durable with a second SyncFS. A broker
// reaches its files through one and holds it while it closes every replica: two syncfs per
// log directory replace an fsync or three per replica.
//
// Holding keeps what the fsyncs ordered. A file replaced by rename (a checkpoint written
// to name.tmp, fsynced, renamed over name) is still the old one or the new one whole after
// a crash at any point, and a new one only ever names data the first SyncFS made durable
// (a recovery point never runs ahead of the segment bytes it vouches for). A crash before
// Release loses what an unheld fsync would have kept: callers hold only while nothing
// waits on durability (a broker that stopped serving).
//
// Files opened through it check the hold at each Sync, whenever they were opened. Over a
// file system that cannot sync as a whole (not an FSSyncer) Hold does nothing. Safe for
// concurrent use.
type HoldFS struct {
	FS
	root string
	held atomic.Bool
	mu   struct {
		sync.Mutex
		renames [][2]string // queued while held, in call order
	}
}

// NewHoldFS returns a view of fs (nil: OS) whose Release syncs the file system holding root.
func NewHoldFS(fs FS, root string) *HoldFS {
	return &HoldFS{FS: Or(fs), root: root}
}

// CanSyncFS reports whether the wrapped file system syncs as a whole (see FSSyncer).
func (h *HoldFS) CanSyncFS() bool { return CanSyncFS(h.FS) }

// CanSyncFS reports whether fs implements FSSyncer and, if it is a view that says whether
// the file system under it does (HoldFS), whether that one does.
func CanSyncFS(fs FS) bool {
	if _, ok := fs.(FSSyncer); !ok {
		return false
	}
	if v, ok := fs.(interface{ CanSyncFS() bool }); ok {
		return v.CanSyncFS()
	}
	return true
}

// SyncFS implements FSSyncer through the wrapped file system: an error if it cannot.
func (h *HoldFS) SyncFS(dir string) error {
	s, ok := h.FS.(FSSyncer)
	if !ok {
		return fmt.Errorf("vfs: syncfs %s: the file system cannot sync as a whole", dir)
	}
	return s.SyncFS(dir)
}

// Hold starts holding syncs and renames back until Release. It reports false, holding
// nothing, when the wrapped file system cannot sync as a whole or a hold is already on.
func (h *HoldFS) Hold() bool {
	if !h.CanSyncFS() {
		return false
	}
	return h.held.CompareAndSwap(false, true)
}

// Held reports whether syncs are held back.
func (h *HoldFS) Held() bool { return h.held.Load() }

// Release ends the hold: one SyncFS of the root, then the queued renames in order, then,
// if there were any, a second SyncFS. When the first SyncFS fails no rename is made (the
// files they would replace keep naming durable data) and the error names the root; a
// failed rename is reported and the others are still made. A no-op when nothing is held.
func (h *HoldFS) Release() error {
	if !h.held.Load() {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held.Store(false)
	renames := h.mu.renames
	h.mu.renames = nil
	s := h.FS.(FSSyncer) // Hold checked
	if err := s.SyncFS(h.root); err != nil {
		return fmt.Errorf("vfs: syncfs %s: %w", h.root, err)
	}
	if len(renames) == 0 {
		return nil
	}
	var errs []error
	for _, r := range renames {
		if err := h.FS.Rename(r[0], r[1]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.SyncFS(h.root); err != nil {
		errs = append(errs, fmt.Errorf("vfs: syncfs %s: %w", h.root, err))
	}
	return errors.Join(errs...)
}

// Drop ends the hold without syncing: the queued renames are forgotten, as a crash
// forgets them.
func (h *HoldFS) Drop() {
	h.mu.Lock()
	h.held.Store(false)
	h.mu.renames = nil
	h.mu.Unlock()
}

// Rename implements FS: queued until Release while held, else the wrapped Rename.
func (h *HoldFS) Rename(oldpath, newpath string) error {
	if h.held.Load() {
		h.mu.Lock()
		if h.held.Load() {
			// The same replacement again (a checkpoint written twice while held): its
			// source now holds the newest contents, moved once, in the later place.
			h.mu.renames = slices.DeleteFunc(h.mu.renames, func(r [2]string) bool { return r == [2]string{oldpath, newpath} })
			h.mu.renames = append(h.mu.renames, [2]string{oldpath, newpath})
			h.mu.Unlock()
			return nil
		}
		h.mu.Unlock()
	}
	return h.FS.Rename(oldpath, newpath)
}

// Mkdir implements Mkdirer through the wrapped file system (see MkdirNew).
func (h *HoldFS) Mkdir(dir string, perm os.FileMode) error { return MkdirNew(h.FS, dir, perm) }

// SyncDir implements FS: nothing while held, else the wrapped SyncDir.
func (h *HoldFS) SyncDir(dir string) error {
	if h.held.Load() {
		return nil
	}
	return h.FS.SyncDir(dir)
}

// OpenFile implements FS: the file's Sync does nothing while h is held.
func (h *HoldFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return gatedFile{File: f, on: &h.held}, nil
}

// Crash implements Crasher when the wrapped file system does: the hold is dropped (its
// renames were never made) and the file system loses what was not synced.
func (h *HoldFS) Crash() error {
	c, ok := h.FS.(Crasher)
	if !ok {
		return errors.New("vfs: the file system cannot simulate a power loss")
	}
	h.Drop()
	return c.Crash()
}

// SyncDeferrer is implemented by a File whose Sync may be deferred (a file of a HoldFS or a
// DeferFS): whoever fsyncs the file's descriptor by other means (io_uring) asks it first.
type SyncDeferrer interface {
	// SyncDeferred reports whether Sync does nothing now (a later SyncFS makes it durable).
	SyncDeferred() bool
}

// SyncDeferred reports whether f's Sync does nothing now (see SyncDeferrer).
func SyncDeferred(f File) bool {
	d, ok := f.(SyncDeferrer)
	return ok && d.SyncDeferred()
}
