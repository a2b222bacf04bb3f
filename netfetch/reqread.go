package netfetch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Reading requests: the size prefix and body of each request, under connections.max.idle.ms,
// isrbench.request.read.timeout.ms and queued.max.request.bytes (see ConnLimits).

// readBufferSize is each connection's read buffer: a request that fits it
// is read and decoded in place, with no memory from the pool.
const readBufferSize = 64 << 10

// errIdle: no request started within connections.max.idle.ms.
var errIdle = errors.New("idle for connections.max.idle.ms")

// idleSlack is how much later than connections.max.idle.ms (maxIdle) after its last request
// a connection may be closed: 1/16 of it.
func idleSlack(maxIdle time.Duration) time.Duration { return maxIdle / 16 }

// setReadDeadline sets nc's read deadline unless it is already t.
func (c *conn) setReadDeadline(t time.Time) error {
	if t.Equal(c.rdl) {
		return nil
	}
	c.rdl = t
	return c.nc.SetReadDeadline(t)
}

// readRequest reads one size-prefixed request: it waits up to
// connections.max.idle.ms (plus at most idleSlack/2) for its first byte, then up to
// isrbench.request.read.timeout.ms for the rest. A request that fits the
// read buffer is returned in place (c.peeked > 0: discarded after it is
// handled). A larger one is read into c.req, which grows only as bytes
// actually arrive (a lying size prefix cannot make it allocate more than was
// sent, plus 1 MiB) and only with memory reserved from the server's pool
// (queued.max.request.bytes), waiting for it if the pool is spent.
//
// Inside serveWhenReady's read callback a read that would block returns errWouldBlock, with
// the bytes read so far kept in br and c.waitFor saying what the wait is for, and a request
// larger than br returns errLargeRequest before any of it is consumed: readRequest is called
// again from the start once the socket is readable, or outside the callback.
func (c *conn) readRequest() ([]byte, error) {
	lim := &c.s.cfg.Limits
	c.waitFor = waitIdle
	if c.br.Buffered() == 0 {
		var idle time.Time
		if lim.ConnectionsMaxIdle > 0 {
			idle = time.Now().Add(lim.ConnectionsMaxIdle)
			// The idle bound needs no precision (Kafka's selector checks it lazily too): a
			// deadline already set within idleSlack after it stays, so that a busy connection
			// moves its deadline (a runtime timer update) once per idleSlack, not per request.
			if slack := idleSlack(lim.ConnectionsMaxIdle); c.rdl.Before(idle) || c.rdl.After(idle.Add(slack)) {
				idle = idle.Add(slack / 2)
			} else {
				idle = c.rdl
			}
		}
		if err := c.setReadDeadline(idle); err != nil {
			return nil, err
		}
		if _, err := c.br.Peek(1); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, errIdle
			}
			return nil, err
		}
	}
	var deadline time.Time // of this request, once its first byte is here
	if lim.RequestReadTimeout > 0 {
		if c.reqStart.IsZero() {
			c.reqStart = time.Now()
		}
		deadline = c.reqStart.Add(lim.RequestReadTimeout)
	}
	timedOut := func(err error, what string) error {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("%s not received within isrbench.request.read.timeout.ms (%d ms): %w", what, lim.RequestReadTimeout.Milliseconds(), err)
		}
		return err
	}
	if c.br.Buffered() < 4 {
		if err := c.setReadDeadline(deadline); err != nil {
			return nil, err
		}
	}
	c.waitFor = waitSize
	szb, err := c.br.Peek(4)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, timedOut(err, "request size")
	}
	size := int32(binary.BigEndian.Uint32(szb))
	if size < 8 {
		return nil, closef("request size %d is smaller than a request header (8 bytes)", size)
	}
	if size > c.s.cfg.SocketRequestMaxBytes {
		return nil, closef("request size %d exceeds socket.request.max.bytes %d", size, c.s.cfg.SocketRequestMaxBytes)
	}
	n := int(size)
	c.waitFor = n
	if 4+n <= c.br.Size() { // in place, no pool memory
		if c.br.Buffered() < 4+n {
			if err := c.setReadDeadline(deadline); err != nil {
				return nil, err
			}
		}
		b, err := c.br.Peek(4 + n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, timedOut(err, fmt.Sprintf("%d-byte request", n))
		}
		c.peeked = 4 + n
		c.reqStart = time.Time{}
		return b[4:], nil
	}
	if c.sr != nil && c.sr.inRaw {
		return nil, errLargeRequest
	}
	if int64(n) > c.s.mem.limit {
		return nil, closef("request size %d exceeds queued.max.request.bytes %d", n, c.s.mem.limit)
	}
	c.br.Discard(4)
	if err := c.setReadDeadline(deadline); err != nil {
		return nil, err
	}
	buf := c.req[:0]
	const step = 1 << 20
	for len(buf) < n {
		want := min(n, len(buf)+step)
		if cap(buf) < want {
			nb, oldDropped, err := c.s.mem.acquire(c.s.mem.capFor(max(want, 2*cap(buf)), n), buf, deadline, c.s.done, c.s.cfg.onMemoryWait)
			if err != nil {
				c.req = buf
				return nil, err
			}
			nb = append(nb, buf...)
			if !oldDropped {
				c.s.mem.recycle(buf)
			}
			buf, c.held = nb, int64(cap(nb))
			c.produceReq, c.produceParts = nil, nil // they alias the old buffer
		}
		got := len(buf)
		buf = buf[:want]
		if _, err := io.ReadFull(c.br, buf[got:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			c.req = buf[:got]
			return nil, timedOut(fmt.Errorf("reading %d-byte request body (%d bytes read): %w", n, got, err), fmt.Sprintf("%d-byte request", n))
		}
	}
	c.req = buf
	c.reqStart = time.Time{}
	return buf, nil
}
