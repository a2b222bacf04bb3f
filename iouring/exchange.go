package iouring

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket operations of an Exchange (include/uapi/linux/io_uring.h).
const (
	opLinkTimeout = 15
	opSend        = 26
	opRecv        = 27

	sqeIOLink = 1 << 2 // IOSQE_IO_LINK: the next SQE starts when this one succeeded

	msgWaitAll  = 0x100  // MSG_WAITALL: a stream socket's short transfer is retried in the kernel
	msgNoSignal = 0x4000 // MSG_NOSIGNAL: a send to a closed peer fails with EPIPE, no SIGPIPE
)

// User data of an Exchange's SQEs.
const (
	udSend = iota + 1
	udRecv
	udTimeout
)

// ErrExchangeBroken is wrapped by the error of every Round after io_uring_enter failed
// unexpectedly: the operations in flight then may never complete, so their buffers stay
// referenced and the Exchange is not used again.
var ErrExchangeBroken = errors.New("iouring: exchange broken")

// Exchange sends a request on one stream socket and receives its answer with one system call:
// a SEND linked to a RECV (and to a LINK_TIMEOUT when the round has a deadline), submitted by
// one io_uring_enter that does not wait. The goroutine then waits for their completions on the
// ring's descriptor through the runtime's poller, as it would wait for the socket: a client
// that writes a request and then waits for the response (a follower's replica fetch) makes one
// system call per round instead of a write and a read, and is woken the same way.
//
// Waiting inside io_uring_enter instead (min_complete) would block the goroutine's thread with
// its P: on a host with few cores the process's other goroutines then wait for the runtime to
// take the P back, milliseconds under load. BenchmarkPingPong compares the ways.
//
// To end a round early, shut the socket down (shutdown(2)): its receive then completes at once.
// Closing the socket's descriptor does not end it (the kernel holds the file while the
// operation is in flight).
//
// An Exchange is used by one goroutine at a time (Round); Close may be called from another
// and waits for a round in progress.
type Exchange struct {
	mu     sync.Mutex
	r      *ring
	f      *os.File // the ring's descriptor, in the runtime's poller
	wait   syscall.RawConn
	reapFn func(ud uint64, v int32)
	waitFn func(fd uintptr) bool // the wait's callback: reaps, true when the round is complete
	want   int                   // completions the round waits for
	got    int                   // completions reaped in this round
	res    [4]int32              // their results by user data
	ts     unix.Timespec         // the link timeout's: its address is in an SQE during a round
	out    []byte                // the round's buffers, referenced while the kernel may use them
	in     []byte
	broken error
	closed bool
}

// NewExchange sets up a ring of 4 entries for one socket's rounds.
func NewExchange() (*Exchange, error) {
	r, err := setup(4)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(r.fd, true); err != nil {
		r.close()
		return nil, fmt.Errorf("iouring: exchange: %w", err)
	}
	x := &Exchange{r: r, f: os.NewFile(uintptr(r.fd), "io_uring")}
	if x.wait, err = x.f.SyscallConn(); err != nil {
		x.f.Close()
		r.fd = -1
		r.close()
		return nil, fmt.Errorf("iouring: exchange: %w", err)
	}
	x.reapFn = func(ud uint64, v int32) {
		if ud < uint64(len(x.res)) {
			x.res[ud] = v
		}
		x.got++
	}
	x.waitFn = func(uintptr) bool {
		x.r.reap(x.reapFn)
		return x.got >= x.want
	}
	return x, nil
}

// RoundResult is what one Round did: the bytes sent and received, and how many
// io_uring_enter calls it took (more than one only when the kernel did not take every SQE at
// once: a signal, or a transient shortage).
type RoundResult struct {
	Sent, Received, Enters int
}

// Round sends out on the socket fd (nothing when out is empty) and then receives into in:
// the receive starts once the whole of out was sent, and completes with the bytes available
// then (at least one), or with exactly len(in) bytes when waitAll. timeout bounds the receive
// (0: unbounded); when it passes the error wraps os.ErrDeadlineExceeded. A receive of 0 bytes
// (the peer closed, or the socket was shut down) is io.EOF's case and reported as
// Received 0 with no error. The caller keeps fd open until Round returns.
func (x *Exchange) Round(fd int, out, in []byte, waitAll bool, timeout time.Duration) (RoundResult, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var res RoundResult
	switch {
	case x.closed:
		return res, ErrClosed
	case x.broken != nil:
		return res, x.broken
	case len(in) == 0:
		return res, errors.New("iouring: exchange: empty receive buffer")
	}
	r := x.r
	x.out, x.in = out, in
	want := 0
	if len(out) > 0 {
		s := r.nextSQE()
		s.opcode, s.flags, s.fd, s.userData = opSend, sqeIOLink, int32(fd), udSend
		s.addr, s.len, s.rwFlags = uint64(uintptr(unsafe.Pointer(&out[0]))), uint32(len(out)), msgWaitAll|msgNoSignal
		want++
	}
	s := r.nextSQE()
	s.opcode, s.fd, s.userData = opRecv, int32(fd), udRecv
	s.addr, s.len = uint64(uintptr(unsafe.Pointer(&in[0]))), uint32(len(in))
	if waitAll {
		s.rwFlags = msgWaitAll
	}
	want++
	if timeout > 0 {
		s.flags = sqeIOLink
		x.ts = unix.NsecToTimespec(int64(timeout))
		t := r.nextSQE()
		t.opcode, t.fd, t.userData = opLinkTimeout, -1, udTimeout
		t.addr, t.len = uint64(uintptr(unsafe.Pointer(&x.ts))), 1
		want++
	}
	r.publish()

	x.want, x.got, x.res = want, 0, [4]int32{}
	for toSubmit := r.sqLocalTail - atomic.LoadUint32(r.sqHead); toSubmit > 0; toSubmit = r.sqLocalTail - atomic.LoadUint32(r.sqHead) {
		_, err := r.enter(toSubmit, 0, 0)
		res.Enters++
		switch err {
		case nil, unix.EINTR, unix.EAGAIN, unix.EBUSY:
		default:
			return res, x.breakRound(fmt.Errorf("io_uring_enter: %w", err))
		}
	}
	r.reap(x.reapFn)
	if x.got < want {
		// Wait for the rest on the ring's descriptor: readable when completions are queued.
		if err := x.wait.Read(x.waitFn); err != nil {
			return res, x.breakRound(fmt.Errorf("waiting for completions: %w", err))
		}
	}
	x.out, x.in = nil, nil
	sendRes, recvRes, timeoutRes := x.res[udSend], x.res[udRecv], x.res[udTimeout]
	if len(out) > 0 {
		if sendRes < 0 {
			return res, os.NewSyscallError("send", unix.Errno(-sendRes))
		}
		res.Sent = int(sendRes)
		if res.Sent < len(out) {
			// Only on a kernel that does not retry a short stream send (MSG_WAITALL): the
			// linked receive was canceled.
			return res, fmt.Errorf("iouring: exchange: short send, %d of %d bytes", res.Sent, len(out))
		}
	}
	switch {
	case recvRes >= 0:
		res.Received = int(recvRes)
		return res, nil
	case unix.Errno(-recvRes) == unix.ECANCELED && timeout > 0 && unix.Errno(-timeoutRes) == unix.ETIME:
		return res, fmt.Errorf("iouring: exchange: nothing received within %v: %w", timeout, os.ErrDeadlineExceeded)
	}
	return res, os.NewSyscallError("recv", unix.Errno(-recvRes))
}

// breakRound makes err the Exchange's fatal error: the operations of the round may still be in
// flight, so their buffers stay referenced (x.out, x.in, x.ts) and the ring is not used again.
func (x *Exchange) breakRound(err error) error {
	x.broken = fmt.Errorf("%w: %w", ErrExchangeBroken, err)
	return x.broken
}

// Close tears the ring down, after the round in progress (shut the socket down first to end
// it). Later rounds fail with ErrClosed. A broken Exchange keeps its ring mapped: the kernel
// may still use the buffers of its operations.
func (x *Exchange) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	if x.broken != nil {
		return nil
	}
	err := x.f.Close() // the ring's descriptor
	x.r.fd = -1
	x.r.close()
	return err
}
