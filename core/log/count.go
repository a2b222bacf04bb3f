package log

import (
	"sync/atomic"

	"github.com/isrbench/isrbench/iouring"
)

// SyscallCounts are the system calls the log's Writers made since the process started, for the
// harness's cost accounting (take two snapshots and subtract; the file calls made through
// vfs.OS are in vfs.Syscalls). A snapshot value.
type SyscallCounts struct {
	Pwritev      int64 // pwritev(2) calls of PwritevWriter
	Pwrite       int64 // pwrite(2) calls of WriteWriter
	IOUringEnter int64 // io_uring_enter(2) calls of the "uring" writer (writes and fsyncs)
	WriteBytes   int64 // bytes the three writers copied from user space into the page cache
}

// Sub returns c - o, field by field.
func (c SyscallCounts) Sub(o SyscallCounts) SyscallCounts {
	return SyscallCounts{Pwritev: c.Pwritev - o.Pwritev, Pwrite: c.Pwrite - o.Pwrite,
		IOUringEnter: c.IOUringEnter - o.IOUringEnter, WriteBytes: c.WriteBytes - o.WriteBytes}
}

// writerCalls are the process-wide counters of the Writers: one atomic add per system call and
// one for its bytes, no allocation.
var writerCalls struct {
	pwritev, pwrite, bytes atomic.Int64
}

// Syscalls returns the Writers' counters so far. Safe for concurrent use.
func Syscalls() SyscallCounts {
	return SyscallCounts{Pwritev: writerCalls.pwritev.Load(), Pwrite: writerCalls.pwrite.Load(),
		IOUringEnter: iouring.EnterCalls(), WriteBytes: writerCalls.bytes.Load() + iouring.WriteBytes()}
}

// countWrite counts one write system call of n bytes by the pwritev or the write path.
func countWrite(c *atomic.Int64, n int) {
	c.Add(1)
	if n > 0 {
		writerCalls.bytes.Add(int64(n))
	}
}
