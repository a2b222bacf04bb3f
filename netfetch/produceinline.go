package netfetch

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/isrbench/isrbench/core/broker"
)

// Answering acks=all produces inline (isrbench.produce.answer.inline, default true).
//
// An acks=all produce completes on another goroutine than its connection's: the one that
// advances the HW past its batches (the leader's handling of a follower's fetch), or that
// changes the ISR or the leadership. With the classic path that goroutine wakes the
// connection's, which builds and writes the response: one scheduler round trip on the path
// of every acknowledgement. Inline, the completing goroutine builds the response and writes
// it itself with one non-blocking write (broker.AckWaiter); the connection's goroutine,
// still muted for its next request (responses stay in request order), wakes afterwards,
// writes what the socket did not take, if anything, and reads on. A paused server leaves
// the write to it too (it waits for Resume). Plaintext connections only (a TLS connection's
// records are written by its own goroutine); transactional produces that were verified with
// their coordinator (KIP-890) take the classic path. isrbench.produce.answer.inline=false
// keeps the classic path everywhere (the ablation).

// inlineAnswer is the acks=all produce being answered inline: set by produceInline, filled
// by answerProduce on the completing goroutine, read by produceInline after the wait.
type inlineAnswer struct {
	h      reqHeader
	req    *kmsg.ProduceRequest
	frame  []byte    // the framed response
	sent   int       // bytes of frame the completer wrote
	err    error     // its write's error
	sendAt time.Time // when the completer began the answer
	at     time.Time // when it was answered (handle's end of the request; zero: not inline)

	fn func() // answerProduce, bound once

	// The non-blocking write (writeNow), its state for the bound callback.
	writeFn func(fd uintptr) bool
	wbuf    []byte
	wn      int
	werr    error
}

// answersInline reports whether an acks=all produce on c is answered by the goroutine that
// completes it.
func (c *conn) answersInline() bool {
	return !c.s.cfg.AnswerOnWake && c.tls == nil && c.sr != nil
}

// produceInline appends c.produceParts for req and waits for the acks=all partitions, which
// the completing goroutine answers (answerProduce). done: the response is written (or err
// says why not); not done: nothing waited, or the wait expired, and the outputs are final
// for the caller to answer.
func (c *conn) produceInline(h reqHeader, req *kmsg.ProduceRequest, timeout time.Duration) (done bool, err error) {
	in := &c.inl
	if c.ack == nil {
		c.ack = broker.NewAckWaiter()
		in.fn = c.answerProduce
		in.writeFn = c.writeStep
	}
	in.h, in.req, in.frame, in.sent, in.err, in.sendAt, in.at = h, req, nil, 0, nil, time.Time{}, time.Time{}
	wait, waited := c.s.cfg.Broker.ProduceStart(c.ctx, req.Acks, c.produceParts, c.ack, in.fn)
	c.waited = waited
	if !wait {
		return false, nil
	}
	t1 := time.Now()
	answered, at := c.ack.Wait(c.ctx, timeout)
	if !answered {
		c.waited += time.Since(t1)
		return false, nil
	}
	c.waited += max(0, in.sendAt.Sub(t1)) // zero when it completed before the wait
	c.sendAt = in.sendAt
	frame, sent := in.frame, in.sent
	in.req, in.frame = nil, nil
	if in.err != nil {
		return true, fmt.Errorf("writing Produce response: %w", in.err)
	}
	if sent == len(frame) {
		in.at = at
		return true, nil
	}
	// The socket took only part of it, or the server is paused: the rest is ours.
	if !c.s.waitUnpaused() {
		return true, net.ErrClosed
	}
	c.s.stats.cost.countSocketWrite(len(frame) - sent)
	if _, err := c.nc.Write(frame[sent:]); err != nil {
		return true, fmt.Errorf("writing Produce response: %w", err)
	}
	return true, nil
}

// answerProduce builds the response of the produce being answered inline and writes what the
// socket takes now (broker.AckWaiter's answer: on the completing goroutine, which must not
// block; the connection's goroutine is parked in the wait meanwhile).
func (c *conn) answerProduce() {
	in := &c.inl
	in.sendAt = time.Now()
	resp := c.produceResponse(in.req, nil)
	resp.SetVersion(in.h.version)
	in.frame = c.frameResponse(in.h, resp)
	if c.s.paused.Load() != nil {
		return // written by the connection's goroutine after Resume
	}
	c.s.stats.inline.Add(1) // before the client can see the answer
	c.s.stats.cost.countSocketWrite(len(in.frame))
	in.sent, in.err = c.writeNow(in.frame)
}

// writeNow writes what the socket takes of b now without waiting for it to be writable (a
// full socket buffer ends it early) and returns how much that was.
func (c *conn) writeNow(b []byte) (int, error) {
	in := &c.inl
	in.wbuf, in.wn, in.werr = b, 0, nil
	err := c.raw.Write(in.writeFn)
	n, werr := in.wn, in.werr
	in.wbuf, in.werr = nil, nil
	if werr == nil {
		werr = err
	}
	return n, werr
}

// writeStep is writeNow's RawConn.Write callback: it never waits (it returns true).
func (c *conn) writeStep(fd uintptr) bool {
	in := &c.inl
	for in.wn < len(in.wbuf) {
		k, err := unix.Write(int(fd), in.wbuf[in.wn:])
		switch err {
		case nil:
			in.wn += k
			continue
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return true
		}
		in.werr = os.NewSyscallError("write", err)
		return true
	}
	return true
}
