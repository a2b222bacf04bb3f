package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// InvalidFd is the Fd of a File that has no operating-system descriptor (an in-memory file).
const InvalidFd = ^uintptr(0)

// File is an open file. The methods follow *os.File. Safe for concurrent use as *os.File is
// (ReadAt and WriteAt at distinct ranges from any goroutine; the caller orders writes).
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	io.Closer
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Sync makes the file's contents durable (fsync).
	Sync() error
	// Stat returns the file's size and modification time.
	Stat() (os.FileInfo, error)
	// Name is the path the file was opened with.
	Name() string
	// Fd is the operating-system descriptor, or InvalidFd for an in-memory file.
	Fd() uintptr
	// OS is the *os.File behind this File, or nil for an in-memory file: sendfile,
	// pwritev and io_uring need a real descriptor.
	OS() *os.File
}

// FS is a file system: the operating system's (OS) or an in-memory one for tests (MemFS).
// Implementations are safe for concurrent use.
type FS interface {
	// OpenFile opens name with os.OpenFile's flags (O_RDONLY, O_RDWR, O_CREATE, O_TRUNC,
	// O_WRONLY, O_EXCL).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a path and everything under it.
	RemoveAll(name string) error
	// Rename renames oldpath to newpath, replacing newpath if it exists.
	Rename(oldpath, newpath string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists dir's entries sorted by name.
	ReadDir(dir string) ([]os.DirEntry, error)
	// Stat describes name.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes dir's entries (creations, removals, renames) durable.
	SyncDir(dir string) error
}

// OS is the operating system's file system, its calls not counted (NewOS counts them).
var OS FS = osFS{}

// Or returns fs, or OS when fs is nil.
func Or(fs FS) FS {
	if fs == nil {
		return OS
	}
	return fs
}

// ReadFile reads the whole file name.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, st.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// WriteFileAtomic replaces name with data durably: it writes name+".tmp", fsyncs it, renames
// it over name and fsyncs the directory, so a crash leaves the old or the new file.
//
// Through a DeferFS that defers (a batch of new replicas being created), the file is
// written in place: nothing written through it is relied on before its Commit, so there is
// no old file to keep, and a crash before the Commit may leave it empty or missing (its
// readers rewrite or rebuild such a file).
func WriteFileAtomic(fs FS, name string, data []byte) error {
	return replaceFile(fs, name, data, true)
}

// WriteFileReplace replaces name with data without fsync: it writes name+".tmp" and renames
// it over name, so a reader sees the old or the new file whole. A crash may leave the old
// file or, where the rename reached the disk before the data, an empty or short one: only
// for files whose readers can repair them from other durable state (the leader-epoch
// checkpoint, rebuilt from the log's batches). Through a DeferFS that defers it writes in
// place, as WriteFileAtomic.
func WriteFileReplace(fs FS, name string, data []byte) error {
	return replaceFile(fs, name, data, false)
}

// replaceFile writes data to name+".tmp" and renames it over name; durable fsyncs the file
// before the rename and the directory after it (WriteFileAtomic), else neither
// (WriteFileReplace). Through a DeferFS that defers it writes in place.
func replaceFile(fs FS, name string, data []byte, durable bool) error {
	if d, ok := fs.(*DeferFS); ok && d.Deferring() {
		return writeFileInPlace(d, name, data)
	}
	tmp := name + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("fsync %s: %w", tmp, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fs.Rename(tmp, name); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return fs.SyncDir(filepath.Dir(name))
}

// writeFileInPlace writes data as name's whole contents (no fsync: d defers it).
func writeFileInPlace(d *DeferFS, name string, data []byte) error {
	f, err := d.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	return nil
}

// MkdirAllDurable creates dir and any missing parents, as MkdirAll does, and makes the new
// entries durable: it fsyncs the parent of every directory it created (Kafka's LogManager
// flushes the parent of a log directory it creates), so that a crash does not lose them.
// An existing dir is left as it is.
func MkdirAllDurable(fs FS, dir string) error {
	dir = filepath.Clean(dir)
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created { // deepest first: each parent's entry after its child's
		if err := fs.SyncDir(filepath.Dir(d)); err != nil {
			return fmt.Errorf("fsync %s: %w", filepath.Dir(d), err)
		}
	}
	return nil
}

// Mkdirer is implemented by a file system that can create one directory in an existing
// parent with one call (os.Mkdir), where MkdirAll first looks at the path and its parent.
type Mkdirer interface {
	// Mkdir creates dir; its parent must exist. An existing dir is an error (fs.ErrExist).
	Mkdir(dir string, perm os.FileMode) error
}

// MkdirNew creates dir, expected not to exist, in an existing parent: one mkdir(2) where fs
// is a Mkdirer (the views of this package pass it on), else MkdirAll. An existing dir is an
// error matching fs.ErrExist.
func MkdirNew(fs FS, dir string, perm os.FileMode) error {
	if m, ok := fs.(Mkdirer); ok {
		return m.Mkdir(dir, perm)
	}
	if _, err := fs.Stat(dir); err == nil {
		return &os.PathError{Op: "mkdir", Path: dir, Err: os.ErrExist}
	}
	return fs.MkdirAll(dir, perm)
}

// osFS is the operating system's file system; its files count their calls in c (nil: not
// counted).
type osFS struct{ c *Counters }

func (fs osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := openFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f, fs.c}, nil
}

func (osFS) Remove(name string) error                  { return os.Remove(name) }
func (osFS) RemoveAll(name string) error               { return os.RemoveAll(name) }
func (osFS) Rename(o, n string) error                  { return os.Rename(o, n) }
func (osFS) MkdirAll(dir string, p os.FileMode) error  { return os.MkdirAll(dir, p) }
func (osFS) Mkdir(dir string, p os.FileMode) error     { return mkdir(dir, p) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error) { return os.ReadDir(dir) }
func (osFS) Stat(name string) (os.FileInfo, error)     { return os.Stat(name) }

func (fs osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if fs.c != nil {
		fs.c.fsync.Add(1)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// osFile is a File over *os.File, its calls counted in c (nil: not counted).
type osFile struct {
	*os.File
	c *Counters
}

func (f osFile) OS() *os.File { return f.File }

// WrapOS returns f as a File, its calls not counted.
func WrapOS(f *os.File) File { return osFile{File: f} }
