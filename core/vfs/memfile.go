package vfs

import (
	"io"
	"os"
	"sync"
	"syscall"
)

// memFile is an open MemFS file. Its node stays valid after the name is removed.
type memFile struct {
	fs       *MemFS
	n        *memNode
	name     string
	writable bool
	off      int64 // for Write

	mu     sync.Mutex
	closed bool
}

func (f *memFile) check(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	}
	return nil
}

func (f *memFile) ReadAt(b []byte, off int64) (int, error) {
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: syscall.EINVAL}
	}
	if len(b) == 0 {
		return 0, nil
	}
	m := f.fs
	m.mu.Lock()
	defer m.mu.Unlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.n.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(b []byte, off int64) (int, error) {
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if !f.writable {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
	}
	if off < 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.EINVAL}
	}
	m := f.fs
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.injectLocked(OpWrite, f.name); err != nil {
		return 0, err
	}
	end := off + int64(len(b))
	if grow := end - int64(len(f.n.data)); grow > 0 {
		if m.mu.capacity > 0 && m.mu.used+grow > m.mu.capacity {
			return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
		}
		m.mu.used += grow
		f.n.data = append(f.n.data, make([]byte, grow)...)
	}
	copy(f.n.data[off:], b)
	f.n.mod = m.now()
	return len(b), nil
}

func (f *memFile) Write(b []byte) (int, error) {
	n, err := f.WriteAt(b, f.off)
	f.off += int64(n)
	return n, err
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	m := f.fs
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.injectLocked(OpTruncate, f.name); err != nil {
		return err
	}
	cur := int64(len(f.n.data))
	if size > cur {
		if m.mu.capacity > 0 && m.mu.used+size-cur > m.mu.capacity {
			return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.ENOSPC}
		}
		f.n.data = append(f.n.data, make([]byte, size-cur)...)
	} else {
		f.n.data = f.n.data[:size]
	}
	m.mu.used += size - cur
	if int64(len(f.n.durable)) > size {
		f.n.durable = f.n.durable[:size] // journaled: a truncation survives a crash
	}
	f.n.mod = m.now()
	return nil
}

func (f *memFile) Sync() error {
	if err := f.check("sync"); err != nil {
		return err
	}
	m := f.fs
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.injectLocked(OpSync, f.name); err != nil {
		return err
	}
	f.n.durable = append(f.n.durable[:0], f.n.data...)
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	if err := f.check("stat"); err != nil {
		return nil, err
	}
	m := f.fs
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.infoLocked(clean(f.name), f.n), nil
}

func (f *memFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	f.closed = true
	return nil
}

func (f *memFile) Name() string { return f.name }
func (f *memFile) Fd() uintptr  { return InvalidFd }
func (f *memFile) OS() *os.File { return nil }
