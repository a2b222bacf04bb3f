package vfs

import "sync/atomic"

// SyscallCounts are the file system calls made through OS since the process started, for the
// harness's cost accounting (take two snapshots and subtract). MemFS files issue none and are not
// counted. A snapshot value.
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

// osCalls are the process-wide counters of OS's files: one atomic add per call and one per
// call's bytes, no allocation.
var osCalls struct {
	pread, pwrite, write, fsync atomic.Int64
	readBytes, writeBytes       atomic.Int64
}

// Syscalls returns the counters of the file system calls made through OS so far. Safe for
// concurrent use.
func Syscalls() SyscallCounts {
	return SyscallCounts{Pread: osCalls.pread.Load(), Pwrite: osCalls.pwrite.Load(), Write: osCalls.write.Load(),
		Fsync: osCalls.fsync.Load(), ReadBytes: osCalls.readBytes.Load(), WriteBytes: osCalls.writeBytes.Load()}
}

// ReadAt is (*os.File).ReadAt, counted.
func (f osFile) ReadAt(b []byte, off int64) (int, error) {
	osCalls.pread.Add(1)
	n, err := f.File.ReadAt(b, off)
	osCalls.readBytes.Add(int64(n))
	return n, err
}

// WriteAt is (*os.File).WriteAt, counted.
func (f osFile) WriteAt(b []byte, off int64) (int, error) {
	osCalls.pwrite.Add(1)
	n, err := f.File.WriteAt(b, off)
	osCalls.writeBytes.Add(int64(n))
	return n, err
}

// Write is (*os.File).Write, counted.
func (f osFile) Write(b []byte) (int, error) {
	osCalls.write.Add(1)
	n, err := f.File.Write(b)
	osCalls.writeBytes.Add(int64(n))
	return n, err
}

// Sync is (*os.File).Sync, counted.
func (f osFile) Sync() error {
	osCalls.fsync.Add(1)
	return f.File.Sync()
}
