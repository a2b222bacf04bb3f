// Package iouring is a small io_uring binding (golang.org/x/sys/unix and the
// standard library only, no cgo) that writes and fsyncs files in batches: the
// back-end of the "uring" value of isrbench.io, whose writer (core/log's
// UringWriter) group-commits the appends of every partition into Ring.Submit
// calls. Its Exchange is the back-end of isrbench.replica.fetch.uring: a replica
// fetcher's request sent and its response received with one system call.
//
// # What it owns
//
// One ring per Ring: the ring fd from io_uring_setup, the three shared
// mappings, and the operations in flight. It writes with IORING_OP_WRITEV and
// flushes with IORING_OP_FSYNC; nothing else is submitted. An Exchange has a
// ring of its own for one socket: IORING_OP_SEND linked to IORING_OP_RECV (and
// IORING_OP_LINK_TIMEOUT), its completions waited for on the ring's descriptor
// through the runtime's poller (exchange.go).
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
// uintptr address of an Op's iovecs (heap memory: the Op's own iovec array), and
// user_data is a slot index, never a pointer. The Go GC does not move heap
// objects, so the address stays valid as long as the object stays reachable;
// the Ring references the Op (and through it the caller's buffers) from its slot
// table until its CQE is reaped. The caller keeps each Op's file descriptor open
// until the Op is done (core/log holds it through (*os.File).SyscallConn().Control),
// so the kernel cannot write into a recycled descriptor. If io_uring_enter fails
// unexpectedly the Ring is poisoned; the Ops in flight stay referenced forever
// (the caller must not reuse a failed Op: core/log drops them) and the ring stays
// mapped, since the kernel may still read their memory.
//
// # Lifecycle
//
// Available probes once per process (setup + a NOP through io_uring_enter)
// and reports why io_uring cannot be used: ENOSYS (kernel without
// CONFIG_IO_URING, or a sandbox filtering the syscall) or EPERM (a seccomp
// profile, or the kernel.io_uring_disabled sysctl). NewRing sets up a ring;
// Close tears it down; later Submits fail with ErrClosed.
//
// # Concurrency
//
// A Ring is used by one goroutine at a time; it has no lock and no batching
// role of its own. Add queues Ops; Step moves them into the SQ, submits them
// with one io_uring_enter that waits for at least one completion, reaps the
// CQEs, resubmits short writes and reports the Ops that are done, so a driver
// can add Ops while others are in flight. Submit is the one-shot form (a batch
// in, one io_uring_enter that waits for all of it while it fits the ring).
// Batching concurrent callers is core/log's group commit, the same one that
// batches a partition's appends: the caller holding its committer role adds
// every queued write and fsync of every partition, steps the ring, wakes each
// caller as its Op completes and adds the Ops queued meanwhile while its own is
// in flight. At most Entries Ops are in flight (so the CQ, twice as large,
// cannot overflow); the rest wait in the Ring. Stats reports SQEs per
// io_uring_enter.
//
// # Performance
//
// Buffered WRITEV to ext4 or tmpfs cannot complete without blocking
// (IOCB_NOWAIT unsupported for buffered writes there), so the kernel hands
// every such SQE to an io-wq worker thread (iou-wrk-*): each write costs a
// thread hand-off, and one synchronous write is slower than a pwritev
// (core/log's BenchmarkWriteAt). The ring pays off when many callers write at
// once and their SQEs share one io_uring_enter (BenchmarkSubmit ops=8; core/log
// BenchmarkWriteAt parallel-8), and on filesystems with async buffered writes
// (XFS, btrfs).
//
// An Exchange round is one io_uring_enter where write(2) and read(2) are two,
// at about the latency of the two on loopback (BenchmarkPingPong): the receive
// completes through task work on the submitting thread before the ring's
// descriptor turns readable, one wake-up more than a socket's readiness.
//
// Offsets: an Op writes the file range [Off, Off+total) (Off inclusive, end
// exclusive).
package iouring
