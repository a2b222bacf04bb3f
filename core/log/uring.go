package log

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/isrbench/isrbench/iouring"
)

// UringWriter is the "uring" write path: the writes and fsyncs of every Log go through one
// io_uring instance (iouring.Ring), group-committed by a committer, so concurrent calls from
// many Logs (many partitions) share each io_uring_enter. Each caller holds its file's
// descriptor (os.File SyscallConn().Control) until its operation completed, so a concurrent
// Close of the file cannot let the kernel write into a recycled descriptor.
//
// Safe for concurrent use. NewWriter("uring") returns the process-wide one.
type UringWriter struct {
	ring        *iouring.Ring // touched only by the committer
	c           committer[*uringReq]
	pulled      []*uringReq // the committer's scratch
	beforeBatch func(n int) // tests: called by the committer before each Step, with the operations not done

	stats struct { // the ring's counters after the last commit
		sync.Mutex
		s iouring.Stats
	}
}

// uringReq is one WriteAt or Fsync call in the UringWriter's queue.
type uringReq struct {
	turn
	w   *UringWriter
	cnt *Counters        // the caller's (CountedWriter), nil: not counted
	op  iouring.Op       // op.Owner is the request itself
	idx int              // index in the commit's group, -1 when pulled in (committer only)
	ctl func(fd uintptr) // r.control, bound once (no allocation per call)
}

func (r *uringReq) control(fd uintptr) {
	r.op.Fd = int(fd)
	r.w.c.do(r)
}

// newUringWriter sets up a ring of entries SQ entries (<= 0: iouring.DefaultEntries).
func newUringWriter(entries int) (*UringWriter, error) {
	ring, err := iouring.NewRing(entries)
	if err != nil {
		return nil, err
	}
	w := &UringWriter{ring: ring}
	w.c.commit = w.commit
	return w, nil
}

// Name returns "uring", the isrbench.io value selecting this writer.
func (w *UringWriter) Name() string { return "uring" }

// Stats returns the ring's counters (SQEs per io_uring_enter is the batching factor).
func (w *UringWriter) Stats() iouring.Stats {
	w.stats.Lock()
	defer w.stats.Unlock()
	return w.stats.s
}

// WriteAt writes bufs contiguously at file offset off (bytes [off, off+total) of f), with one
// IORING_OP_WRITEV (consecutive ones beyond IOV_MAX buffers), resubmitting a short write for
// the remainder; a write that makes no progress fails wrapping io.ErrShortWrite. bufs must not
// change until WriteAt returns.
func (w *UringWriter) WriteAt(f *os.File, off int64, bufs [][]byte) error {
	return w.writeAt(f, off, bufs, nil)
}

// writeAt is WriteAt counting its bytes, and the io_uring_enter calls it leads as committer,
// in c (nil: not counted).
func (w *UringWriter) writeAt(f *os.File, off int64, bufs [][]byte, c *Counters) error {
	if off < 0 {
		return fmt.Errorf("iouring: negative offset %d", off)
	}
	if f == nil {
		return errors.New("iouring: nil file")
	}
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total == 0 {
		return nil
	}
	if c != nil {
		c.bytes.Add(int64(total))
	}
	r := w.get()
	r.op.Fsync, r.op.Off, r.op.Bufs, r.cnt = false, off, bufs, c
	return w.do(f, r)
}

// Fsync flushes f's data and metadata through IORING_OP_FSYNC.
func (w *UringWriter) Fsync(f *os.File) error { return w.fsync(f, nil) }

// fsync is Fsync counting the io_uring_enter calls it leads as committer in c (nil: not
// counted).
func (w *UringWriter) fsync(f *os.File, c *Counters) error {
	r := w.get()
	r.op.Fsync, r.op.Off, r.op.Bufs, r.cnt = true, 0, nil, c
	return w.do(f, r)
}

func (w *UringWriter) get() *uringReq {
	r, ok := w.c.get()
	if !ok {
		r = &uringReq{turn: newTurn(), w: w}
		r.op.Owner = r
		r.ctl = r.control
	}
	return r
}

// do runs r on f's descriptor.
func (w *UringWriter) do(f *os.File, r *uringReq) error {
	if f == nil {
		return errors.New("iouring: nil file")
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("iouring: %s: %w", f.Name(), err)
	}
	if err := rc.Control(r.ctl); err != nil {
		// Control fails only when the descriptor is closed or closing.
		return fmt.Errorf("iouring: %s: %w (%v)", f.Name(), os.ErrClosed, err)
	}
	runtime.KeepAlive(r)
	opErr := r.op.Err
	// A failed op is not recycled: after a fatal ring error the kernel may still read it.
	if opErr == nil {
		r.op.Bufs, r.cnt = nil, nil
		w.c.put(r)
	}
	if opErr != nil && !errors.Is(opErr, iouring.ErrClosed) {
		return fmt.Errorf("%w (file %s)", opErr, f.Name())
	}
	return opErr
}

// commit runs a group of queued operations through the ring (committer only). While the
// committer's own operation is in flight it keeps the ring fed: each io_uring_enter waits
// for one completion, the callers whose operations completed are woken at once, and
// operations queued meanwhile are pulled in and submitted with the next enter. Once its own
// operation is done it takes nothing more and waits for what is in flight; requests queued
// after that go to the next committer.
func (w *UringWriter) commit(group []*uringReq) {
	own := group[0]
	for i, r := range group {
		r.idx = i
		w.ring.Add(&r.op)
	}
	left := len(group) // operations of this commit not done
	ownDone := false
	done := func(op *iouring.Op) {
		r := op.Owner.(*uringReq)
		left--
		switch {
		case r == own:
			ownDone = true
		case r.idx >= 0:
			group[r.idx] = nil
			w.c.finish(r)
		default:
			w.c.finish(r)
		}
	}
	for left > 0 {
		if w.beforeBatch != nil {
			w.beforeBatch(left)
		}
		enters := w.ring.Stats().Enters
		w.ring.Step(1, done) // a fatal error reaches every op through its Err
		if c := own.cnt; c != nil {
			c.uringEnter.Add(w.ring.Stats().Enters - enters) // the committer's calls: its owner's
		}
		if !ownDone {
			w.pulled = w.c.pull(w.pulled[:0])
			for _, r := range w.pulled {
				r.idx = -1
				w.ring.Add(&r.op)
			}
			left += len(w.pulled)
			clear(w.pulled)
		}
	}
	st := w.ring.Stats()
	w.stats.Lock()
	w.stats.s = st
	w.stats.Unlock()
}

// close releases the ring; no call may be running or follow (tests: the shared writer is
// never closed).
func (w *UringWriter) close() error { return w.ring.Close() }

// sharedUring is the process-wide io_uring writer: one ring shared by every Log, set up on
// first use, never closed.
var sharedUring = sync.OnceValues(func() (*UringWriter, string) {
	if ok, reason := iouring.Available(); !ok {
		return nil, "io_uring unavailable, using pwritev: " + reason
	}
	w, err := newUringWriter(0)
	if err != nil {
		return nil, "io_uring setup failed, using pwritev: " + err.Error()
	}
	return w, ""
})
