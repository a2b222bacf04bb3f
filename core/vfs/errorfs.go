package vfs

import (
	"os"
	"sync/atomic"
)

// ErrorFS wraps a file system and fails the operations its Injector picks (pebble's
// errorfs): a full disk, an I/O error on fsync. Its files have no OS descriptor (OS returns
// nil), so every write goes through WriteAt, where the error can be injected. Safe for
// concurrent use.
type ErrorFS struct {
	FS
	inject atomic.Pointer[Injector]
}

// NewErrorFS returns an ErrorFS over base (nil: OS) that fails nothing until SetInjector.
func NewErrorFS(base FS) *ErrorFS { return &ErrorFS{FS: Or(base)} }

// SetInjector installs (nil: removes) the injector.
func (e *ErrorFS) SetInjector(inj Injector) {
	if inj == nil {
		e.inject.Store(nil)
		return
	}
	e.inject.Store(&inj)
}

func (e *ErrorFS) check(op Op, path string) error {
	if p := e.inject.Load(); p != nil {
		if err := (*p)(op, path); err != nil {
			return &os.PathError{Op: string(op), Path: path, Err: err}
		}
	}
	return nil
}

// OpenFile implements FS.
func (e *ErrorFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	if flag&os.O_CREATE != 0 {
		if err := e.check(OpCreate, name); err != nil {
			return nil, err
		}
	}
	f, err := e.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, e: e}, nil
}

// ReadDir implements FS (reading a directory opens it: OpOpen).
func (e *ErrorFS) ReadDir(dir string) ([]os.DirEntry, error) {
	if err := e.check(OpOpen, dir); err != nil {
		return nil, err
	}
	return e.FS.ReadDir(dir)
}

// SyncDir implements FS (it opens the directory: OpOpen).
func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.check(OpOpen, dir); err != nil {
		return err
	}
	return e.FS.SyncDir(dir)
}

// Rename implements FS.
func (e *ErrorFS) Rename(oldpath, newpath string) error {
	if err := e.check(OpRename, newpath); err != nil {
		return err
	}
	return e.FS.Rename(oldpath, newpath)
}

type errorFile struct {
	File
	e *ErrorFS
}

func (f *errorFile) WriteAt(b []byte, off int64) (int, error) {
	if err := f.e.check(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(b, off)
}

func (f *errorFile) Write(b []byte) (int, error) {
	if err := f.e.check(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(b)
}

func (f *errorFile) Sync() error {
	if err := f.e.check(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.e.check(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// OS returns nil: writes must go through WriteAt to be checked.
func (f *errorFile) OS() *os.File { return nil }

// Fd is the descriptor, for reads (sendfile of what was written).
func (f *errorFile) Fd() uintptr { return f.File.Fd() }
