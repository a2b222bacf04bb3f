package log

import (
	"os"
	"sync/atomic"
)

// SyscallCounts are the system calls of the log's Writers, for the harness's cost accounting
// (take two snapshots and subtract; the file calls made through a counted vfs.FS are in
// vfs.SyscallCounts). A snapshot value.
type SyscallCounts struct {
	Pwritev int64 // pwritev(2) calls of PwritevWriter
	Pwrite  int64 // pwrite(2) calls of WriteWriter
	// IOUringEnter are the io_uring_enter(2) calls of the "uring" writer (writes and fsyncs)
	// made on the goroutines of the Counters' owner: the ring is the process's, and each call
	// is counted once, to the owner whose write or fsync led the group commit that made it
	// (its operations may carry other owners' writes too).
	IOUringEnter int64
	WriteBytes   int64 // bytes the three writers copied from user space into the page cache
}

// Sub returns c - o, field by field.
func (c SyscallCounts) Sub(o SyscallCounts) SyscallCounts {
	return SyscallCounts{Pwritev: c.Pwritev - o.Pwritev, Pwrite: c.Pwrite - o.Pwrite,
		IOUringEnter: c.IOUringEnter - o.IOUringEnter, WriteBytes: c.WriteBytes - o.WriteBytes}
}

// Counters count the system calls of the Writers given them (CountedWriter): one atomic add per
// system call and one for its bytes, no allocation. Whoever owns the logs (an embedded cluster)
// owns their Counters, so two of them in one process count apart, the shared io_uring writer
// included. The zero value is ready; safe for concurrent use.
type Counters struct {
	pwritev, pwrite, uringEnter, bytes atomic.Int64
}

// Syscalls returns the counts so far (zero for a nil c).
func (c *Counters) Syscalls() SyscallCounts {
	if c == nil {
		return SyscallCounts{}
	}
	return SyscallCounts{Pwritev: c.pwritev.Load(), Pwrite: c.pwrite.Load(), IOUringEnter: c.uringEnter.Load(), WriteBytes: c.bytes.Load()}
}

// CountedWriter returns w (nil: the default PwritevWriter) counting its system calls in c. The
// "uring" writer stays the process's one ring; its calls made for w are counted in c.
func CountedWriter(w Writer, c *Counters) Writer {
	switch w := w.(type) {
	case nil:
		return PwritevWriter{Counters: c}
	case PwritevWriter:
		w.Counters = c
		return w
	case WriteWriter:
		w.Counters = c
		return w
	case *UringWriter:
		return countedUring{w: w, c: c}
	case countedUring:
		w.c = c
		return w
	}
	return w
}

// countWrite counts one write system call of n bytes by the pwritev or the write path in c
// (not nil).
func (c *Counters) countWrite(calls *atomic.Int64, n int) {
	calls.Add(1)
	if n > 0 {
		c.bytes.Add(int64(n))
	}
}

// countedUring is the "uring" writer counting the calls made for its owner in c.
type countedUring struct {
	w *UringWriter
	c *Counters
}

func (u countedUring) Name() string { return u.w.Name() }

// WriteAt is UringWriter.WriteAt, its bytes and the io_uring_enter calls it led counted in c.
func (u countedUring) WriteAt(f *os.File, off int64, bufs [][]byte) error {
	return u.w.writeAt(f, off, bufs, u.c)
}

// Fsync is UringWriter.Fsync, the io_uring_enter calls it led counted in c.
func (u countedUring) Fsync(f *os.File) error { return u.w.fsync(f, u.c) }
