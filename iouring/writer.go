package iouring

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by every call on a Writer after Close.
var ErrClosed = errors.New("iouring: writer closed")

// DefaultEntries is the SQ size NewWriter uses when entries <= 0.
const DefaultEntries = 256

// maxEntries is the kernel's IORING_MAX_ENTRIES.
const maxEntries = 32768

// Stats counts the work a Writer did since NewWriter. The batching factor
// of the group submission path is SQEs/Enters.
type Stats struct {
	Requests  int64 // WriteAt + Fsync calls that reached the ring
	SQEs      int64 // SQEs consumed by the kernel (including resubmissions)
	Enters    int64 // io_uring_enter calls
	MaxBatch  int64 // most SQEs consumed by one io_uring_enter
	Resubmits int64 // SQEs queued again after a short write or an IOV_MAX-sized chunk
}

// Writer writes byte slices to files through one io_uring instance using
// IORING_OP_WRITEV. It implements core/log's Writer method set.
//
// All methods are safe for concurrent use. Concurrent WriteAt/Fsync callers
// are group-submitted: each caller enqueues its request; the caller that
// holds the submitter role puts every pending request into the SQ, submits
// them with one io_uring_enter, reaps the CQEs and wakes the callers whose
// requests completed. When the submitter's own request completes it submits
// whatever is still pending and hands the role to a waiting caller.
type Writer struct {
	ring  *ring // touched only by the caller holding the submitter role (mu.submitting)
	hooks testHooks

	mu struct {
		sync.Mutex
		pending    []*request // not yet in the SQ (FIFO)
		slots      []*request // in the SQ or in the kernel, indexed by user_data
		free       []uint32   // free slot indexes
		inflight   int        // slots in use
		toSubmit   uint32     // SQEs published to the SQ tail but not yet consumed by io_uring_enter
		submitting bool       // a caller holds the submitter role
		closed     bool
		broken     error         // fatal ring error; every later call fails with it
		drained    chan struct{} // Close waits on it for in-flight work; closed by the last submitter
		stats      Stats
	}
}

// testHooks lets tests observe and perturb the submission path.
type testHooks struct {
	enqueued    func(pending int)                // under mu, after a caller enqueued (must not block)
	beforeEnter func()                           // submitter, mu not held, before io_uring_enter
	cqeRes      func(res int32, chunk int) int32 // rewrites a successful WRITEV result (short-write simulation)
}

// request is one WriteAt or Fsync call. Its iovecs live in Go memory; the
// SQE holds their address while the request is in flight, and the request is
// reachable from mu.slots (and from its caller's stack) until its CQE is reaped.
type request struct {
	w     *Writer
	op    uint8
	fd    int32
	off   int64        // file offset of the next byte to write
	iov   []unix.Iovec // iovecs not yet written (advanced on short writes)
	bufs  [][]byte     // the caller's buffers, kept reachable until done
	chunk int          // bytes described by the in-flight SQE
	done  bool
	err   error
	wake  chan struct{} // capacity 1: "done" or "take the submitter role"

	iovBuf []unix.Iovec     // reusable backing array for iov
	ctl    func(fd uintptr) // req.control, bound once (no allocation per call)
	opErr  error            // result handed back from ctl
}

// maxPooledIovecs bounds the iovec array a pooled request keeps.
const maxPooledIovecs = 64

var requestPool = sync.Pool{New: func() any {
	r := &request{wake: make(chan struct{}, 1)}
	r.ctl = r.control
	return r
}}

// getRequest returns a reset request from the pool.
func (w *Writer) getRequest(op uint8) *request {
	r := requestPool.Get().(*request)
	select {
	case <-r.wake: // drop a stale token left by a previous use
	default:
	}
	r.w, r.op, r.done, r.err, r.opErr, r.off, r.chunk = w, op, false, nil, nil, 0, 0
	return r
}

// putRequest recycles r once no ring structure references it (its caller
// saw it done under the mutex). Failed requests are not recycled: after a
// fatal ring error the kernel may still read their memory.
func putRequest(r *request) {
	if r.err != nil || cap(r.iovBuf) > maxPooledIovecs {
		return
	}
	r.bufs, r.iov, r.w = nil, nil, nil
	clear(r.iovBuf[:cap(r.iovBuf)])
	requestPool.Put(r)
}

func (r *request) control(fd uintptr) {
	r.fd = int32(fd)
	r.opErr = r.w.do(r)
}

// NewWriter sets up a ring with entries SQ entries (rounded up to a power of
// two; <= 0 means DefaultEntries). At most that many requests are in flight;
// more callers queue. Errors wrap ErrUnavailable when io_uring cannot be used.
func NewWriter(entries int) (*Writer, error) {
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
	w := &Writer{ring: r}
	n := r.p.sqEntries
	w.mu.slots = make([]*request, n)
	w.mu.free = make([]uint32, 0, n)
	for i := int(n) - 1; i >= 0; i-- {
		w.mu.free = append(w.mu.free, uint32(i))
	}
	return w, nil
}

// Name returns "uring", the isrbench.io value selecting this writer.
func (w *Writer) Name() string { return "uring" }

// Entries is the SQ size the kernel granted.
func (w *Writer) Entries() int { return int(w.ring.p.sqEntries) }

// Stats returns a snapshot of the counters.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.stats
}

// WriteAt writes bufs contiguously at file offset off (bytes [off, off+total)
// of f) with one IORING_OP_WRITEV SQE; more than IOV_MAX (1024) buffers are
// written as consecutive SQEs. A short write is resubmitted for the remainder;
// a write that makes no progress fails wrapping io.ErrShortWrite. bufs must
// not be modified until WriteAt returns. f stays open until the write
// completes (Close on f waits for it).
func (w *Writer) WriteAt(f *os.File, off int64, bufs [][]byte) error {
	if off < 0 {
		return fmt.Errorf("iouring: negative offset %d", off)
	}
	n, total := 0, 0
	for _, b := range bufs {
		if len(b) > 0 {
			n++
			total += len(b)
		}
	}
	if n == 0 {
		return w.checkOpen()
	}
	writeBytes.Add(int64(total))
	req := w.getRequest(opWritev)
	req.off, req.bufs = off, bufs
	if cap(req.iovBuf) < n {
		req.iovBuf = make([]unix.Iovec, 0, n)
	}
	req.iov = req.iovBuf[:0]
	for _, b := range bufs {
		if len(b) > 0 {
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			req.iov = append(req.iov, v)
		}
	}
	return w.run(f, req)
}

// Fsync flushes f's data and metadata through IORING_OP_FSYNC.
func (w *Writer) Fsync(f *os.File) error {
	return w.run(f, w.getRequest(opFsync))
}

func (w *Writer) checkOpen() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return ErrClosed
	}
	return w.mu.broken
}

// run executes req on f's descriptor. The fd is held (os.File reference
// count) until the request completes, so a concurrent f.Close cannot let the
// kernel write into a reused descriptor.
func (w *Writer) run(f *os.File, req *request) error {
	if f == nil {
		return errors.New("iouring: nil file")
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("iouring: %s: %w", f.Name(), err)
	}
	if err := rc.Control(req.ctl); err != nil {
		// RawControl fails only when the descriptor is closed or closing.
		return fmt.Errorf("iouring: %s: %w (%v)", f.Name(), os.ErrClosed, err)
	}
	runtime.KeepAlive(req)
	opErr := req.opErr
	putRequest(req)
	if opErr != nil && !errors.Is(opErr, ErrClosed) {
		return fmt.Errorf("%w (file %s)", opErr, f.Name())
	}
	return opErr
}

// do enqueues req and waits for it, taking the submitter role when free.
func (w *Writer) do(req *request) error {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	if err := w.mu.broken; err != nil {
		w.mu.Unlock()
		return err
	}
	w.mu.stats.Requests++
	w.mu.pending = append(w.mu.pending, req)
	if h := w.hooks.enqueued; h != nil {
		h(len(w.mu.pending))
	}
	for !req.done {
		if !w.mu.submitting {
			w.mu.submitting = true
			w.driveLocked(req)
			w.mu.submitting = false
			w.handoffLocked()
			break
		}
		w.mu.Unlock()
		<-req.wake
		w.mu.Lock()
	}
	err := req.err
	w.mu.Unlock()
	return err
}

// driveLocked is the submitter loop; it returns once me is done. Called and
// returns with mu held; drops mu around io_uring_enter.
func (w *Writer) driveLocked(me *request) {
	for {
		w.fillLocked()
		if me.done {
			// Put whatever is already in the SQ in flight before handing off.
			if w.mu.toSubmit > 0 {
				w.enterLocked(0)
			}
			return
		}
		if w.mu.inflight == 0 {
			panic("BUG: iouring: submitter's request neither in flight nor done")
		}
		if !w.enterLocked(1) {
			return // broken: me failed too
		}
		w.reapLocked(me)
	}
}

// enterLocked submits the published SQEs and, when minComplete > 0, waits for
// that many completions. It reports false when the ring is broken.
func (w *Writer) enterLocked(minComplete uint32) bool {
	toSubmit := w.mu.toSubmit
	var flags uint32
	if minComplete > 0 {
		flags = enterGetEvents
	}
	w.mu.Unlock()
	if h := w.hooks.beforeEnter; h != nil {
		h()
	}
	got, err := w.ring.enter(toSubmit, minComplete, flags)
	w.mu.Lock()
	w.mu.stats.Enters++
	w.mu.stats.SQEs += int64(got)
	w.mu.stats.MaxBatch = max(w.mu.stats.MaxBatch, int64(got))
	w.mu.toSubmit -= uint32(got)
	switch err {
	case nil, unix.EINTR, unix.EAGAIN, unix.EBUSY:
		// EINTR: a signal (Go's preemption) interrupted the wait; EAGAIN/EBUSY:
		// transient kernel resource shortage. Reap and retry.
		return true
	}
	w.failLocked(fmt.Errorf("iouring: io_uring_enter: %w", err))
	return false
}

// fillLocked moves pending requests into free SQ slots and publishes them.
func (w *Writer) fillLocked() {
	n := uint32(0)
	for len(w.mu.pending) > 0 && len(w.mu.free) > 0 {
		r := w.mu.pending[0]
		w.mu.pending[0] = nil
		w.mu.pending = w.mu.pending[1:]
		slot := w.mu.free[len(w.mu.free)-1]
		w.mu.free = w.mu.free[:len(w.mu.free)-1]
		w.mu.slots[slot] = r
		s := w.ring.nextSQE()
		s.opcode = r.op
		s.fd = r.fd
		s.userData = uint64(slot)
		if r.op == opWritev {
			k := min(len(r.iov), iovMax)
			s.off = uint64(r.off)
			s.addr = uint64(uintptr(unsafe.Pointer(&r.iov[0])))
			s.len = uint32(k)
			r.chunk = 0
			for _, v := range r.iov[:k] {
				r.chunk += int(v.Len)
			}
		}
		n++
	}
	if len(w.mu.pending) == 0 {
		w.mu.pending = w.mu.pending[:0:0] // drop the consumed backing array
	}
	if n > 0 {
		w.ring.publish()
		w.mu.toSubmit += n
		w.mu.inflight += int(n)
	}
}

// reapLocked completes every available CQE.
func (w *Writer) reapLocked(me *request) {
	w.ring.reap(func(ud uint64, res int32) {
		if ud >= uint64(len(w.mu.slots)) || w.mu.slots[ud] == nil {
			panic(fmt.Sprintf("BUG: iouring: CQE for unknown slot %d", ud))
		}
		r := w.mu.slots[ud]
		w.mu.slots[ud] = nil
		w.mu.free = append(w.mu.free, uint32(ud))
		w.mu.inflight--
		w.completeLocked(r, res, me)
	})
}

func (w *Writer) completeLocked(r *request, res int32, me *request) {
	switch {
	case res < 0:
		errno := unix.Errno(-res)
		if errno == unix.EINTR || errno == unix.EAGAIN {
			w.requeueLocked(r)
			return
		}
		if r.op == opFsync {
			r.err = fmt.Errorf("iouring: fsync: %w", errno)
		} else {
			r.err = fmt.Errorf("iouring: writev of %d bytes at offset %d: %w", r.chunk, r.off, errno)
		}
	case r.op == opFsync:
	case res == 0:
		r.err = fmt.Errorf("iouring: writev wrote 0 of %d bytes at offset %d: %w", r.chunk, r.off, io.ErrShortWrite)
	default:
		if h := w.hooks.cqeRes; h != nil {
			res = h(res, r.chunk)
		}
		r.off += int64(res)
		r.iov = AdvanceIovecs(r.iov, int(res))
		if len(r.iov) > 0 {
			w.requeueLocked(r)
			return
		}
	}
	r.done = true
	r.bufs = nil
	if r != me {
		wake(r)
	}
}

func (w *Writer) requeueLocked(r *request) {
	w.mu.stats.Resubmits++
	w.mu.pending = append(w.mu.pending, r)
}

// handoffLocked runs when a submitter leaves: if work remains, a waiting
// caller is woken to take the role; otherwise a pending Close is released.
func (w *Writer) handoffLocked() {
	if len(w.mu.pending) > 0 {
		wake(w.mu.pending[0])
		return
	}
	if w.mu.inflight > 0 {
		for _, r := range w.mu.slots {
			if r != nil {
				wake(r)
				return
			}
		}
	}
	if w.mu.drained != nil {
		close(w.mu.drained)
		w.mu.drained = nil
	}
}

// failLocked poisons the writer after an unexpected io_uring_enter error.
// Requests not yet handed to the kernel fail; requests in flight fail too but
// stay referenced from their slots forever, so the memory the kernel may
// still read stays alive.
func (w *Writer) failLocked(err error) {
	w.mu.broken = err
	for _, r := range w.mu.pending {
		r.err, r.done = err, true
		wake(r)
	}
	w.mu.pending = nil
	for _, r := range w.mu.slots {
		if r != nil && !r.done {
			r.err, r.done = err, true
			wake(r)
		}
	}
	w.mu.free = nil
	w.mu.inflight = 0
	w.mu.toSubmit = 0
}

func wake(r *request) {
	select {
	case r.wake <- struct{}{}:
	default: // a token is already queued; the waiter re-checks state under mu
	}
}

// AdvanceIovecs drops the first n bytes from iov (after a short writev or
// pwritev), adjusting the first partially written iovec in place. n must not
// exceed the iovecs' total length.
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

// Close waits for in-flight requests, then unmaps the rings and closes the
// ring fd. Later calls fail with ErrClosed. Close is idempotent.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return nil
	}
	w.mu.closed = true
	if w.mu.broken == nil && (w.mu.submitting || w.mu.inflight > 0 || len(w.mu.pending) > 0) {
		ch := make(chan struct{})
		w.mu.drained = ch
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
	defer w.mu.Unlock()
	if w.mu.broken != nil {
		// The kernel may still reference in-flight memory: keep the ring mapped;
		// the fd is released with the process.
		return nil
	}
	if err := w.ring.close(); err != nil {
		return fmt.Errorf("iouring: close ring: %w", err)
	}
	return nil
}
