package vfs

import "sync/atomic"

// SyscallCounts are the file system calls counted by a Counters, for the harness's cost
// accounting (take two snapshots and subtract). MemFS files issue none and are not counted. A
// snapshot value.
type SyscallCounts struct {
	Pread  int64 // ReadAt calls: pread(2) (one per call; a short read that ReadAt retries adds one more)
	Pwrite int64 // WriteAt calls: pwrite(2)
	Write  int64 // Write calls: write(2) (checkpoints, the controller's metadata log)
	Fsync  int64 // Sync and SyncDir calls: fsync(2)
	// ReadBytes and WriteBytes are the bytes those calls copied between user space and the page
	// cache.
	ReadBytes, WriteBytes int64
}

// Sub returns c - o, field by field.
func (c SyscallCounts) Sub(o SyscallCounts) SyscallCounts {
	return SyscallCounts{Pread: c.Pread - o.Pread, Pwrite: c.Pwrite - o.Pwrite, Write: c.Write - o.Write,
		Fsync: c.Fsync - o.Fsync, ReadBytes: c.ReadBytes - o.ReadBytes, WriteBytes: c.WriteBytes - o.WriteBytes}
}

// Counters count the file system calls made through the files of the FS NewOS returns: one
// atomic add per call and one per call's bytes, no allocation. Whoever owns the file system (an
// embedded cluster) owns its Counters, so two of them in one process count apart. The zero
// value is ready; safe for concurrent use.
type Counters struct {
	pread, pwrite, write, fsync atomic.Int64
	readBytes, writeBytes       atomic.Int64
}

// Syscalls returns the counts so far (zero for a nil c).
func (c *Counters) Syscalls() SyscallCounts {
	if c == nil {
		return SyscallCounts{}
	}
	return SyscallCounts{Pread: c.pread.Load(), Pwrite: c.pwrite.Load(), Write: c.write.Load(),
		Fsync: c.fsync.Load(), ReadBytes: c.readBytes.Load(), WriteBytes: c.writeBytes.Load()}
}

// NewOS returns the operating system's file system with its calls counted in c (nil: not
// counted, as OS).
func NewOS(c *Counters) FS { return osFS{c: c} }

// ReadAt is (*os.File).ReadAt, counted.
func (f osFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	if f.c != nil {
		f.c.pread.Add(1)
		f.c.readBytes.Add(int64(n))
	}
	return n, err
}

// WriteAt is (*os.File).WriteAt, counted.
func (f osFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(b, off)
	if f.c != nil {
		f.c.pwrite.Add(1)
		f.c.writeBytes.Add(int64(n))
	}
	return n, err
}

// Write is (*os.File).Write, counted.
func (f osFile) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	if f.c != nil {
		f.c.write.Add(1)
		f.c.writeBytes.Add(int64(n))
	}
	return n, err
}

// Sync is (*os.File).Sync, counted.
func (f osFile) Sync() error {
	if f.c != nil {
		f.c.fsync.Add(1)
	}
	return f.File.Sync()
}
