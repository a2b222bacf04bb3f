package netfetch

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/isrbench/isrbench/iouring"
)

// A replica fetch round trip through io_uring (isrbench.replica.fetch.uring, off by default).
//
// A follower's fetcher writes a request and waits for its answer: on the runtime's poller that
// is a write(2), a wait in epoll, and a read(2). With the setting on, a plaintext connection
// submits a SEND of the request linked to a RECV of the answer (and a LINK_TIMEOUT for
// replica.socket.timeout.ms) with one io_uring_enter that does not wait, then waits for their
// completions on the ring's descriptor through the runtime's poller (iouring.Exchange): one
// system call per round, counted as io_uring_enter in the cost table. A response larger than
// the first receive took is received with MSG_WAITALL once its size is known (one more call).
//
// Measured on the default spec (README, "What it measures"): 12.4-12.9 cluster system calls per
// record against 14.4-15.0, but more latency and CPU, since the receive completes as task work
// on the submitting thread before the ring's descriptor turns readable: one wake-up more per
// round. Hence off by default.
//
// A request larger than uringSendMax (a full fetch over many partitions) is written the
// classic way, bounded by the connection's deadline, and only its response received through
// the ring: the link timeout bounds the receive, and a send that a leader which stopped reading
// could hold up must not be left without one. A smaller request fits the socket's send buffer
// (a fetcher has one request in flight), so its send completes at once.
//
// Ending a round early: Close and a canceled context shut the socket down, which completes the
// receive at once (closing the descriptor would not: the kernel holds the file while the
// operation is in flight). TLS, SASL_SSL, a faulty link and a host without io_uring keep the
// poller's way.

// ReplicaFetchUringFallback returns why isrbench.replica.fetch.uring=true leaves the replica
// fetchers on the poller's way in this process ("" when io_uring is available).
func ReplicaFetchUringFallback() string {
	if ok, reason := iouring.Available(); !ok {
		return reason
	}
	return ""
}

// uringSendMax is the largest request frame sent through the ring (the kernel's default
// initial TCP send buffer, tcp_wmem's middle value).
var uringSendMax = 16 << 10

// newExchange returns an io_uring exchange for one connection, or nil where io_uring is
// unavailable or refused.
func newExchange() *iouring.Exchange {
	if ReplicaFetchUringFallback() != "" {
		return nil
	}
	x, err := iouring.NewExchange()
	if err != nil {
		return nil
	}
	return x
}

// uringRound is the io_uring round in progress on a connection: its arguments and result, and
// the callback running it inside raw.Control, bound once (no allocation per round).
type uringRound struct {
	out, in []byte
	waitAll bool
	timeout time.Duration
	res     iouring.RoundResult
	err     error
	fn      func(fd uintptr)
}

// uringStep runs c.ur on the socket fd.
func (c *fetchConn) uringStep(fd uintptr) {
	u := &c.ur
	u.res, u.err = c.x.Round(int(fd), u.out, u.in, u.waitAll, u.timeout)
}

// shutdown shuts the connection's socket down for both directions: a round in progress ends.
func (c *fetchConn) shutdown() {
	if c.raw != nil {
		c.raw.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RDWR) })
	}
}

// roundTripUring sends the request frame b and receives its response frame with c.x (one
// io_uring_enter when the first receive takes all of it), returning the body after the size
// prefix (aliasing c.rbuf until the next call). dl is the round trip's deadline (zero: none).
// The connection's buffered reader is never used this way.
func (c *fetchConn) roundTripUring(ctx context.Context, req kmsg.Request, b []byte, dl time.Time) ([]byte, error) {
	if cap(c.rbuf) < 64<<10 {
		c.rbuf = make([]byte, 64<<10)
	}
	in := c.rbuf[:cap(c.rbuf)]
	out, have, need := b, 0, -1
	if len(b) > uringSendMax {
		c.costs.countSocketWrite(len(b))
		if _, err := c.nc.Write(b); err != nil {
			return nil, c.ioErr(ctx, "writing", req, err)
		}
		out = nil
	}
	for {
		var timeout time.Duration
		if !dl.IsZero() {
			if timeout = time.Until(dl); timeout <= 0 {
				return nil, c.ioErr(ctx, "reading", req, os.ErrDeadlineExceeded)
			}
		}
		buf, waitAll := in[have:], false
		if need >= 0 {
			buf, waitAll = in[have:need], true
		}
		u := &c.ur
		u.out, u.in, u.waitAll, u.timeout, u.res, u.err = out, buf, waitAll, timeout, iouring.RoundResult{}, nil
		cerr := c.raw.Control(u.fn)
		res, rerr := u.res, u.err
		u.out, u.in = nil, nil
		c.costs.uringEnter.Add(int64(res.Enters))
		c.costs.writeBytes.Add(int64(res.Sent))
		c.costs.readBytes.Add(int64(res.Received))
		switch {
		case cerr != nil:
			return nil, c.ioErr(ctx, "writing", req, cerr)
		case rerr != nil && len(out) > 0 && res.Sent < len(out):
			return nil, c.ioErr(ctx, "writing", req, rerr)
		case rerr != nil:
			return nil, c.ioErr(ctx, "reading", req, rerr)
		case res.Received == 0:
			return nil, c.ioErr(ctx, "reading", req, io.ErrUnexpectedEOF)
		}
		out = nil
		have += res.Received
		if need < 0 && have >= 4 {
			size := int32(binary.BigEndian.Uint32(in))
			if err := c.checkResponseSize(req, size); err != nil {
				return nil, err
			}
			need = 4 + int(size)
			if need > len(in) {
				grown := make([]byte, need)
				copy(grown, in[:have])
				c.rbuf, in = grown, grown
			}
		}
		if need >= 0 && have >= need {
			if have > need {
				return nil, fmt.Errorf("replica fetcher %d->%d: %s response followed by %d unexpected bytes", c.self, c.source, kmsg.NameForKey(req.Key()), have-need)
			}
			return in[4:need], nil
		}
	}
}
