package iouring

import (
	"errors"
	"fmt"
	"io"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("iouring: ring closed")

// DefaultEntries is the SQ size NewRing uses when entries <= 0.
const DefaultEntries = 256

// maxEntries is the kernel's IORING_MAX_ENTRIES.
const maxEntries = 32768

// Stats counts the work a Ring did since NewRing. The batching factor of the submissions is
// SQEs/Enters.
type Stats struct {
	Requests  int64 // Ops handed to Submit
	SQEs      int64 // SQEs consumed by the kernel (including resubmissions)
	Enters    int64 // io_uring_enter calls
	MaxBatch  int64 // most SQEs consumed by one io_uring_enter
	Resubmits int64 // SQEs queued again after a short write, an EINTR/EAGAIN or an IOV_MAX-sized chunk
}

// Op is one write or fsync. The caller sets Fd, the operation and Owner; the Ring sets Err.
// An Op may be reused once it is done; it keeps its iovec array for the next use.
type Op struct {
	// Fd is the file's descriptor. The caller keeps it open until the Op is done (for an
	// *os.File: inside its SyscallConn().Control).
	Fd int
	// Fsync selects IORING_OP_FSYNC (data and metadata); otherwise the op is an
	// IORING_OP_WRITEV of Bufs, contiguously at file offset Off (the range [Off, Off+total)).
	// Empty buffers are skipped; more than IOV_MAX (1024) buffers take consecutive SQEs. Bufs
	// must not change until the Op is done.
	Fsync bool
	Off   int64
	Bufs  [][]byte
	// Owner is the caller's (the Ring never touches it): who to tell when the Op is done.
	Owner any
	// Err is the op's result: nil when every byte was written (the fsync succeeded), else the
	// kernel's error (an errno), io.ErrShortWrite for a write that made no progress, or the
	// ring's ErrClosed or fatal error.
	Err error

	off    int64        // file offset of the next byte to write
	iov    []unix.Iovec // iovecs not yet written (advanced on short writes), in iovBuf
	iovBuf []unix.Iovec // reused backing array of iov
	chunk  int          // bytes described by the in-flight SQE
	done   bool
}

// Ring is one io_uring instance that writes and fsyncs files. Add queues Ops; Step puts the
// queued Ops into free SQ slots, submits them with one io_uring_enter that waits for some
// completions, reaps them, resubmits short writes and reports the Ops that are done; Ops can
// be added while others are in flight, so a driver keeps the kernel busy. Submit is the
// one-shot form: a batch in, every Op done, one io_uring_enter when the batch fits.
//
// A Ring is not safe for concurrent use: one goroutine at a time calls its methods. core/log's
// io_uring writer shares one Ring between every Log of the process and serialises its
// callers with its group commit, so that concurrent writes of many partitions share each
// io_uring_enter.
type Ring struct {
	ring  *ring
	hooks testHooks

	slots    []*Op    // in the SQ or in the kernel, indexed by user_data
	free     []uint32 // free slot indexes
	pending  []*Op    // not yet in the SQ (FIFO from pending[head])
	head     int
	finished []*Op  // done but not yet reported by Step
	inflight int    // slots in use
	toSubmit uint32 // SQEs published to the SQ tail but not yet consumed by io_uring_enter
	closed   bool
	broken   error // fatal ring error; every later Op fails with it
	leaked   []*Op // Ops the kernel may still read after a fatal error: kept reachable forever
	stats    Stats
}

// testHooks lets tests observe and perturb the submission path.
type testHooks struct {
	beforeEnter func()                           // before each io_uring_enter
	cqeRes      func(res int32, chunk int) int32 // rewrites a successful WRITEV result (short-write simulation)
}

// NewRing sets up a ring with entries SQ entries (rounded up to a power of two; <= 0 means
// DefaultEntries). At most that many Ops are in flight; a larger Submit refills the SQ as
// Ops complete. Errors wrap ErrUnavailable when io_uring cannot be used.
func NewRing(entries int) (*Ring, error) {
	if entries <= 0 {
		entries = DefaultEntries
	}
	if entries > maxEntries {
		return nil, fmt.Errorf("iouring: entries %d exceeds the kernel maximum %d", entries, maxEntries)
	}
	if ok, reason := Available(); !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, reason)
	}
	r, err := setup(uint32(entries))
	if err != nil {
		return nil, err
	}
	g := &Ring{ring: r}
	n := r.p.sqEntries
	g.slots = make([]*Op, n)
	g.free = make([]uint32, 0, n)
	for i := int(n) - 1; i >= 0; i-- {
		g.free = append(g.free, uint32(i))
	}
	return g, nil
}

// Entries is the SQ size the kernel granted.
func (g *Ring) Entries() int { return int(g.ring.p.sqEntries) }

// Stats returns a snapshot of the counters.
func (g *Ring) Stats() Stats { return g.stats }

// Add queues op for the next Step. An op that needs no I/O (no bytes to write), has a
// negative offset, or meets a closed or broken ring is done at once (Step reports it).
func (g *Ring) Add(op *Op) {
	op.Err, op.done, op.off, op.chunk, op.iov = nil, false, op.Off, 0, nil
	g.stats.Requests++
	switch {
	case g.closed:
		g.finish(op, ErrClosed)
		return
	case g.broken != nil:
		g.finish(op, g.broken)
		return
	case op.Fsync:
		g.pending = append(g.pending, op)
		return
	case op.Off < 0:
		g.finish(op, fmt.Errorf("iouring: negative offset %d", op.Off))
		return
	}
	iov, total := op.iovBuf[:0], 0
	for _, b := range op.Bufs {
		if len(b) > 0 {
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
			total += len(b)
		}
	}
	op.iovBuf = iov
	if total == 0 {
		g.finish(op, nil)
		return
	}
	op.iov = iov
	g.pending = append(g.pending, op)
}

func (g *Ring) finish(op *Op, err error) {
	op.Err, op.done = err, true
	g.finished = append(g.finished, op)
}

// Busy reports whether Ops are queued, in flight, or done but not yet reported by Step.
func (g *Ring) Busy() bool {
	return g.head < len(g.pending) || g.inflight > 0 || len(g.finished) > 0
}

// Step moves queued Ops into free SQ slots, submits them with one io_uring_enter that waits
// until min(wait, in flight) Ops completed (at least one), reaps every completion (requeueing
// short writes), and calls done for each Op that is done, in no particular order; done must
// not call the Ring. It returns at once when the ring is not Busy, and returns the ring's fatal
// error once io_uring_enter failed (every Op not done then fails with it).
func (g *Ring) Step(wait int, done func(*Op)) error {
	if g.head < len(g.pending) || g.inflight > 0 {
		g.fill()
		if g.enter(uint32(min(max(wait, 1), g.inflight))) {
			g.reap()
		}
	}
	for i, op := range g.finished {
		g.finished[i] = nil
		if done != nil {
			done(op)
		}
	}
	g.finished = g.finished[:0]
	return g.broken
}

// Submit runs every op and returns when all are done, each with its Err set: one
// io_uring_enter when they fit the ring and complete at once. It returns ErrClosed after
// Close, or the fatal error of a ring whose io_uring_enter failed (then every op not
// completed has that error, and so has every later op). The ring must not be Busy.
func (g *Ring) Submit(ops []*Op) error {
	for _, op := range ops {
		g.Add(op)
	}
	for g.Busy() {
		g.Step(len(ops), nil)
	}
	if g.closed {
		return ErrClosed
	}
	return g.broken
}

// enter submits the published SQEs and waits for minComplete completions. It reports false
// when the ring broke.
func (g *Ring) enter(minComplete uint32) bool {
	if h := g.hooks.beforeEnter; h != nil {
		h()
	}
	var flags uint32
	if minComplete > 0 {
		flags = enterGetEvents
	}
	got, err := g.ring.enter(g.toSubmit, minComplete, flags)
	g.stats.Enters++
	g.stats.SQEs += int64(got)
	g.stats.MaxBatch = max(g.stats.MaxBatch, int64(got))
	g.toSubmit -= uint32(got)
	switch err {
	case nil, unix.EINTR, unix.EAGAIN, unix.EBUSY:
		// EINTR: a signal (Go's preemption) interrupted the wait; EAGAIN/EBUSY: transient
		// kernel resource shortage. Reap and retry.
		return true
	}
	g.fail(fmt.Errorf("iouring: io_uring_enter: %w", err))
	return false
}

// fill moves pending ops into free SQ slots and publishes them.
func (g *Ring) fill() {
	n := uint32(0)
	for g.head < len(g.pending) && len(g.free) > 0 {
		op := g.pending[g.head]
		g.pending[g.head] = nil
		g.head++
		slot := g.free[len(g.free)-1]
		g.free = g.free[:len(g.free)-1]
		g.slots[slot] = op
		s := g.ring.nextSQE()
		s.fd = int32(op.Fd)
		s.userData = uint64(slot)
		if op.Fsync {
			s.opcode = opFsync
		} else {
			s.opcode = opWritev
			k := min(len(op.iov), iovMax)
			s.off = uint64(op.off)
			s.addr = uint64(uintptr(unsafe.Pointer(&op.iov[0])))
			s.len = uint32(k)
			op.chunk = 0
			for _, v := range op.iov[:k] {
				op.chunk += int(v.Len)
			}
		}
		n++
	}
	if g.head == len(g.pending) {
		g.pending, g.head = g.pending[:0], 0
	}
	if n > 0 {
		g.ring.publish()
		g.toSubmit += n
		g.inflight += int(n)
	}
}

// reap completes every available CQE.
func (g *Ring) reap() {
	g.ring.reap(func(ud uint64, res int32) {
		if ud >= uint64(len(g.slots)) || g.slots[ud] == nil {
			panic(fmt.Sprintf("BUG: iouring: CQE for unknown slot %d", ud))
		}
		op := g.slots[ud]
		g.slots[ud] = nil
		g.free = append(g.free, uint32(ud))
		g.inflight--
		g.complete(op, res)
	})
}

func (g *Ring) complete(op *Op, res int32) {
	switch {
	case res < 0:
		errno := unix.Errno(-res)
		if errno == unix.EINTR || errno == unix.EAGAIN {
			g.requeue(op)
			return
		}
		if op.Fsync {
			op.Err = fmt.Errorf("iouring: fsync: %w", errno)
		} else {
			op.Err = fmt.Errorf("iouring: writev of %d bytes at offset %d: %w", op.chunk, op.off, errno)
		}
	case op.Fsync:
	case res == 0:
		op.Err = fmt.Errorf("iouring: writev wrote 0 of %d bytes at offset %d: %w", op.chunk, op.off, io.ErrShortWrite)
	default:
		if h := g.hooks.cqeRes; h != nil {
			res = h(res, op.chunk)
		}
		op.off += int64(res)
		op.iov = AdvanceIovecs(op.iov, int(res))
		if len(op.iov) > 0 {
			g.requeue(op)
			return
		}
	}
	op.done = true
	g.finished = append(g.finished, op)
}

func (g *Ring) requeue(op *Op) {
	g.stats.Resubmits++
	g.pending = append(g.pending, op)
}

// fail poisons the ring after an unexpected io_uring_enter error: every op not done fails;
// the ops in flight stay referenced (leaked) and the ring stays mapped, since the kernel may
// still read their memory.
func (g *Ring) fail(err error) {
	g.broken = err
	for _, op := range g.pending[g.head:] {
		g.finish(op, err)
	}
	g.pending, g.head = nil, 0
	for i, op := range g.slots {
		if op != nil {
			g.leaked = append(g.leaked, op)
			g.slots[i] = nil
			if !op.done {
				g.finish(op, err)
			}
		}
	}
	g.free = nil
	g.inflight = 0
	g.toSubmit = 0
}

// AdvanceIovecs drops the first n bytes from iov (after a short writev or pwritev), adjusting
// the first partially written iovec in place. n must not exceed the iovecs' total length.
func AdvanceIovecs(iov []unix.Iovec, n int) []unix.Iovec {
	for n > 0 && len(iov) > 0 {
		l := int(iov[0].Len)
		if n < l {
			iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), n))
			iov[0].SetLen(l - n)
			return iov
		}
		n -= l
		iov = iov[1:]
	}
	if n > 0 {
		panic(fmt.Sprintf("BUG: iouring: kernel reported %d bytes beyond the iovecs", n))
	}
	return iov
}

// Close unmaps the rings and closes the ring fd; later Submits fail with ErrClosed. Close is
// idempotent. After a fatal error the ring stays mapped (the kernel may still reference
// in-flight memory) and its fd is released with the process.
func (g *Ring) Close() error {
	if g.closed {
		return nil
	}
	g.closed = true
	if g.broken != nil {
		return nil
	}
	if err := g.ring.close(); err != nil {
		return fmt.Errorf("iouring: close ring: %w", err)
	}
	return nil
}
