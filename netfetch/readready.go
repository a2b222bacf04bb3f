package netfetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/twmb/franz-go/pkg/kmsg"

	"golang.org/x/sys/unix"
)

// Reading when ready (isrbench.socket.read.when.ready, default true).
//
// Go's net.Conn reads a socket before every wait: a read that finds it empty (EAGAIN) arms the
// wait, because each Read (RawConn.Read) first forgets the readiness the runtime poller saw
// before it. On a connection where each message is answered before the next one comes (a
// follower's fetches, a producer's requests, a fetcher reading responses) that is one wasted
// read(2) per message.
//
// The poller is edge-triggered: every arrival of bytes is an event. Within one RawConn.Read
// call no event is forgotten, so after a read that returned less than it asked for (the socket
// was empty at that moment; any byte arriving later is a new event) the connection can wait at
// once. The wire server therefore reads and answers its requests inside one RawConn.Read
// callback (serveWhenReady), and a replica fetcher writes its request and reads the response
// inside one (fetchConn.roundTripReady). A request larger than the read buffer is read outside
// the callback, the classic way. isrbench.socket.read.when.ready=false keeps the classic read
// everywhere (the ablation: the cost table's read count shows what it buys).

// errWouldBlock is returned by a sockReader inside a read callback when the socket has nothing
// to read now: the callback returns false so that RawConn.Read waits for readability.
var errWouldBlock = errors.New("netfetch: socket not readable yet")

// errLargeRequest is readRequest's answer inside the read callback for a request larger than
// the read buffer: it is read outside the callback.
var errLargeRequest = errors.New("netfetch: request larger than the read buffer")

// What readRequest waits for (conn.waitFor; a positive value is a request's byte count).
const (
	waitIdle = -1
	waitSize = 0
)

// readNow is Read inside a read callback (r.inRaw): one read(2) on r.fd unless the last one
// emptied the socket, errWouldBlock when there is nothing to read now.
func (r *sockReader) readNow(p []byte) (int, error) {
	if r.drained {
		return 0, errWouldBlock
	}
	for {
		n, err := unix.Read(r.fd, p)
		r.costs.read.Add(1)
		switch err {
		case nil:
			if n == 0 {
				return 0, io.EOF
			}
			r.costs.readBytes.Add(int64(n))
			r.drained = n < len(p)
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			r.drained = true
			return 0, errWouldBlock
		}
		return 0, os.NewSyscallError("read", err)
	}
}

// serveWhenReady is the connection loop of a plaintext connection: requests are read and
// answered inside RawConn.Read's callback (readyStep), which returns false to wait whenever the
// socket is empty. It returns when the connection ends.
func (c *conn) serveWhenReady() {
	if c.readyFn == nil {
		c.readyFn = c.readyStep
	}
	for {
		c.rawEnd = false
		c.sr.inRaw = true
		err := c.raw.Read(c.readyFn)
		c.sr.inRaw = false
		switch {
		case err != nil: // the wait failed: a deadline, or the connection closed
			c.readFailed(c.waitErr(err))
			return
		case c.rawEnd:
			return
		}
		// A request larger than the read buffer: read it outside the callback.
		body, err := c.readRequest()
		if err != nil {
			c.readFailed(err)
			return
		}
		if !c.serveOne(body) {
			return
		}
	}
}

// readyStep runs in RawConn.Read: first, and again each time the socket became readable. It
// reads and answers requests until a read would block (false: wait), the connection ends or a
// large request is next (true).
func (c *conn) readyStep(fd uintptr) bool {
	c.sr.fd, c.sr.drained = int(fd), false // called first or woken: the socket may hold bytes
	for {
		body, err := c.readRequest()
		switch {
		case errors.Is(err, errWouldBlock):
			return false
		case errors.Is(err, errLargeRequest):
			return true
		case err != nil:
			c.readFailed(err)
			c.rawEnd = true
			return true
		}
		if !c.serveOne(body) {
			c.rawEnd = true
			return true
		}
	}
}

// waitErr is the error of a wait for readability that failed: a deadline that passed is
// errIdle between requests, else the request read timeout for what was being waited for.
func (c *conn) waitErr(err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	switch c.waitFor {
	case waitIdle:
		return errIdle
	case waitSize:
		return fmt.Errorf("request size not received within isrbench.request.read.timeout.ms (%d ms): %w", c.s.cfg.Limits.RequestReadTimeout.Milliseconds(), err)
	}
	return fmt.Errorf("%d-byte request not received within isrbench.request.read.timeout.ms (%d ms): %w", c.waitFor, c.s.cfg.Limits.RequestReadTimeout.Milliseconds(), err)
}

// roundTripReady writes the request frame b and reads its response inside one raw.Read
// (readready.go): no read finds the socket empty before the wait for the response when the
// previous response's last read had emptied it.
func (c *fetchConn) roundTripReady(ctx context.Context, req kmsg.Request, b []byte) ([]byte, error) {
	c.rtOut, c.rtWritten, c.rtSize, c.rtHave, c.rtBody, c.rtErr, c.rtReq = b, false, -1, 0, nil, nil, req
	c.sr.inRaw = true
	err := c.raw.Read(c.rtFn)
	c.sr.inRaw = false
	body, rerr := c.rtBody, c.rtErr
	c.rtOut, c.rtBody, c.rtErr, c.rtReq = nil, nil, nil, nil
	switch {
	case err != nil: // the wait failed: the deadline (the context) or a close
		return nil, c.ioErr(ctx, "reading", req, err)
	case rerr != nil:
		return nil, rerr
	}
	return body, nil
}

// roundTripStep runs in raw.Read: the first call writes the request, every call reads what
// the socket holds of the response; false waits for readability.
func (c *fetchConn) roundTripStep(fd uintptr) bool {
	c.sr.fd = int(fd)
	if !c.rtWritten {
		c.rtWritten = true
		c.costs.countSocketWrite(len(c.rtOut))
		if _, err := c.nc.Write(c.rtOut); err != nil {
			c.rtErr = c.ioErr(c.ctx, "writing", c.rtReq, err)
			return true
		}
		// sr.drained is still what the previous response's last read found: nothing is
		// sent to a fetcher between its round trips, so an empty socket then is one now.
	} else {
		c.sr.drained = false // woken: the socket may hold bytes
	}
	body, err := c.readFrame(c.rtReq)
	if err == errWouldBlock {
		return false
	}
	c.rtBody, c.rtErr = body, err
	return true
}
