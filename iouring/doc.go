// Package iouring is a small io_uring binding (golang.org/x/sys/unix and the
// standard library only, no cgo) and a batched file writer built on it: the
// "uring" value of isrbench.io, used by core/log to write appended batches.
//
// # What it owns
//
// One ring per Writer: the ring fd from io_uring_setup, the three shared
// mappings, and the requests in flight. It writes with IORING_OP_WRITEV and
// flushes with IORING_OP_FSYNC; nothing else is submitted.
//
// # Ring layout
//
// io_uring_setup(entries, &params) returns an fd and fills params with the
// granted sizes (powers of two; the CQ is twice the SQ) and the byte offsets
// of the fields inside the rings. Three regions are mmap'd from the fd:
//
//	offset 0x0         SQ ring: head | tail | ring_mask | ring_entries | flags | dropped | array[sq_entries]u32
//	offset 0x8000000   CQ ring: head | tail | ring_mask | ring_entries | overflow | cqes[cq_entries] (16 B each)
//	                   (one mapping serves both rings when IORING_FEAT_SINGLE_MMAP is set)
//	offset 0x10000000  SQEs:    sqes[sq_entries] (64 B each)
//
//	SQE (64 B): opcode u8 | flags u8 | ioprio u16 | fd i32 | off u64 | addr u64 | len u32 |
//	            rw_flags u32 | user_data u64 | buf_index u16 | personality u16 | splice_fd_in i32 | addr3 u64 | pad u64
//	CQE (16 B): user_data u64 | res i32 (bytes written, or -errno) | flags u32
//
// Submission: the writer fills sqes[tail&mask], stores the index in
// array[tail&mask], and publishes with a store-release of the SQ tail; the
// kernel consumes entries by advancing the SQ head during io_uring_enter.
// Completion: the kernel appends CQEs and advances the CQ tail; the writer
// reads them after a load-acquire of the CQ tail and releases them by a
// store-release of the CQ head. The SQ tail and CQ head are written only by
// us, the SQ head and CQ tail only by the kernel.
//
// # Memory rules
//
// No Go pointer is stored in kernel memory as a pointer: an SQE's addr is the
// uintptr address of the request's []unix.Iovec (heap memory: the request
// escapes into the Writer's queues), and user_data is a slot index, never a
// pointer. The Go GC does not move heap objects, so the address stays valid as
// long as the object stays reachable; the request (its iovecs and the caller's
// buffers) is referenced from the Writer's slot table until its CQE is reaped,
// and the waiting caller holds it too (runtime.KeepAlive after completion).
// The file descriptor is held through (*os.File).SyscallConn().Control for the
// whole request, so a concurrent Close of the file cannot let the kernel write
// into a recycled descriptor. If io_uring_enter fails unexpectedly the Writer
// is poisoned; in-flight requests stay referenced forever and the ring stays
// mapped, since the kernel may still read their memory.
//
// # Lifecycle
//
// Available probes once per process (setup + a NOP through io_uring_enter)
// and reports why io_uring cannot be used: ENOSYS (kernel without
// CONFIG_IO_URING, or a sandbox filtering the syscall) or EPERM (a seccomp
// profile, or the kernel.io_uring_disabled sysctl). NewWriter sets up a ring;
// Close waits for in-flight requests and tears it down; later calls fail with
// ErrClosed.
//
// # Concurrency
//
// Every Writer method may be called from any number of goroutines. Callers
// are group-submitted: each enqueues its request under the Writer's mutex; the
// caller holding the submitter role moves all pending requests into the SQ,
// submits them with one io_uring_enter (waiting for at least one completion),
// reaps the CQEs, resubmits short writes and wakes the callers whose requests
// completed. When its own request completes it submits whatever is queued and
// hands the role to a waiting caller. Many concurrent produce requests thus
// become one submission; Stats reports SQEs per io_uring_enter. Only the
// current submitter touches the ring; at most Entries requests are in flight
// (so the CQ, twice as large, cannot overflow); further callers queue.
//
// # Performance
//
// Buffered WRITEV to ext4 or tmpfs cannot complete without blocking
// (IOCB_NOWAIT unsupported for buffered writes there), so the kernel hands
// every such SQE to an io-wq worker thread (iou-wrk-*): each write costs a
// thread hand-off, and one synchronous WriteAt is slower than a pwritev
// (BenchmarkWriteAt). The ring pays off when many callers write at once and
// their SQEs share one io_uring_enter (parallel-8: ~3 SQEs per enter on 2
// CPUs), and on filesystems with async buffered writes (XFS, btrfs).
//
// Offsets: WriteAt(f, off, bufs) writes the file range [off, off+total)
// (off inclusive, end exclusive).
package iouring
