package log

import (
	"sync/atomic"

	"github.com/isrbench/isrbench/iouring"
)

// SyscallCounts are the system calls of the log's Writers, for the harness's cost accounting
// (take two snapshots and subtract; the file calls made through a counted vfs.FS are in
// vfs.SyscallCounts). A snapshot value.
type SyscallCounts struct {
	Pwritev      int64 // pwritev(2) calls of PwritevWriter
	Pwrite       int64 // pwrite(2) calls of WriteWriter
	IOUringEnter int64 // io_uring_enter(2) calls of the "uring" writer (writes and fsyncs): the process's
	WriteBytes   int64 // bytes the three writers copied from user space into the page cache
}

// Sub returns c - o, field by field.
func (c SyscallCounts) Sub(o SyscallCounts) SyscallCounts {
	return SyscallCounts{Pwritev: c.Pwritev - o.Pwritev, Pwrite: c.Pwrite - o.Pwrite,
		IOUringEnter: c.IOUringEnter - o.IOUringEnter, WriteBytes: c.WriteBytes - o.WriteBytes}
}

// Counters count the system calls of the Writers given them (CountedWriter): one atomic add per
// system call and one for its bytes, no allocation. Whoever owns the logs (an embedded cluster)
// owns their Counters, so two of them in one process count apart. The zero value is ready;
// safe for concurrent use.
type Counters struct {
	pwritev, pwrite, bytes atomic.Int64
}

// Syscalls returns the counts so far. The io_uring figures (IOUringEnter, and the bytes of its
// writes in WriteBytes) are the whole process's: the "uring" writer is one ring shared by every
// Log of the process, whose io_uring_enter(2) calls carry the writes of many Logs at once. A
// nil c gives those alone.
func (c *Counters) Syscalls() SyscallCounts {
	s := SyscallCounts{IOUringEnter: iouring.EnterCalls(), WriteBytes: iouring.WriteBytes()}
	if c != nil {
		s.Pwritev, s.Pwrite = c.pwritev.Load(), c.pwrite.Load()
		s.WriteBytes += c.bytes.Load()
	}
	return s
}

// CountedWriter returns w (nil: the default PwritevWriter) counting its system calls in c. The
// "uring" writer is returned unchanged: its ring is the process's (see Counters.Syscalls).
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
