package netfetch

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/log"
)

// sendFetch writes the encoded response with the records of each
// partition in place: sendfile(2) from the segment file at the slice's
// position (ZeroCopy), or one pread into a reused buffer and one write.
func (c *conn) sendFetch(parts []broker.FetchPartition) error {
	e := &c.fetch.enc
	if !c.s.cfg.ZeroCopy || c.tls != nil { // sendfile cannot write through TLS
		out := c.fetch.copy[:0]
		prev := 0
		var copied int64
		for i := range parts {
			out = append(out, e.buf[prev:e.marks[i]]...)
			prev = e.marks[i]
			s := parts[i].Records
			if parts[i].Err != nil || s.Size <= 0 {
				continue
			}
			var err error
			before := len(out)
			out, err = appendSlice(out, s)
			if err != nil {
				return fmt.Errorf("reading %s-%d records for fetch: %w", parts[i].Topic, parts[i].Partition, err)
			}
			copied += int64(len(out) - before)
		}
		out = append(out, e.buf[prev:]...)
		c.fetch.copy = out
		if cap(out) > 64<<20 {
			c.fetch.copy = nil
		}
		c.s.stats.cost.countSocketWrite(len(out))
		if _, err := c.nc.Write(out); err != nil {
			return fmt.Errorf("writing fetch response: %w", err)
		}
		c.s.stats.copyBytes.Add(copied)
		if c.tls != nil {
			c.s.stats.tlsCopyBytes.Add(copied)
			c.s.stats.cost.tlsCopyBytes.Add(copied)
		}
		return nil
	}
	return c.sendZeroCopy(parts)
}

// outSeg is one piece of a zero-copy response: bytes of the staging
// buffer (file < 0; hi is where they end in it until the buffer is final,
// then b holds them) or n bytes of a segment file from off.
type outSeg struct {
	b    []byte
	hi   int
	file int
	off  int64
	n    int64
}

// maxSmallCopy bounds the bytes one response copies instead of sending
// them with sendfile: a response of many small partitions stays zero-copy
// past it.
const maxSmallCopy = 1 << 20

// sendZeroCopy writes the response as staged bytes interleaved with
// sendfile(2) of each partition's slice, all inside one RawConn.Write
// callback (EAGAIN returns false so the poller waits for writability; the
// loop resumes where it stopped). The staging buffer holds the encoder's
// bytes and, read with pread, the slices smaller than
// isrbench.zero.copy.min.bytes: below a few pages a copy costs less than
// the sendfile call and the extra TCP segment it makes, and a response
// with no large slice leaves in one write. Staged bytes that more pieces
// follow go with MSG_MORE, so the kernel holds them to fill a segment with
// what comes next instead of pushing a small one (what TCP_CORK would do
// with two more setsockopt calls per response).
func (c *conn) sendZeroCopy(parts []broker.FetchPartition) error {
	e := &c.fetch.enc
	minZC := c.s.cfg.ZeroCopyMinBytes
	out := c.fetch.copy[:0]
	segs := c.fetch.segs[:0]
	prev := 0
	var copied int64
	for i := range parts {
		s := parts[i].Records
		if parts[i].Err != nil || s.Size <= 0 {
			continue
		}
		out = append(out, e.buf[prev:e.marks[i]]...)
		prev = e.marks[i]
		if s.Size < minZC && copied+s.Size <= maxSmallCopy {
			before := len(out)
			var err error
			if out, err = appendSlice(out, s); err != nil {
				return fmt.Errorf("reading %s-%d records for fetch: %w", parts[i].Topic, parts[i].Partition, err)
			}
			copied += int64(len(out) - before)
			continue
		}
		segs = append(segs, outSeg{file: -1, hi: len(out)})
		segs = append(segs, outSeg{file: int(s.File.Fd()), off: s.Pos, n: s.Size})
	}
	out = append(out, e.buf[prev:]...)
	segs = append(segs, outSeg{file: -1, hi: len(out)})
	lo := 0
	for j := range segs {
		if segs[j].file < 0 {
			segs[j].b = out[lo:segs[j].hi]
			lo = segs[j].hi
		}
	}
	c.fetch.segs = segs
	c.fetch.copy = out
	if cap(out) > 64<<20 {
		c.fetch.copy = nil
	}
	c.s.stats.copyBytes.Add(copied)
	zw := &c.fetch.zw
	*zw = zcWriter{segs: segs, stats: c.s.stats}
	if c.fetch.zwFn == nil {
		c.fetch.zwFn = zw.write // bound once: a closure per response allocated
	}
	werr := c.raw.Write(c.fetch.zwFn)
	serr := zw.err
	zw.segs = nil
	for j := range segs {
		segs[j].b = nil
	}
	for i := range parts { // the slices' files must stay open until here
		runtime.KeepAlive(parts[i].Records.File)
	}
	if serr != nil {
		return fmt.Errorf("sending fetch response: %w", serr)
	}
	if werr != nil {
		return fmt.Errorf("sending fetch response: %w", werr)
	}
	return nil
}

// zcWriter is the state of one zero-copy response write inside
// RawConn.Write: it resumes at segs[idx] after an EAGAIN.
type zcWriter struct {
	segs  []outSeg
	idx   int
	err   error
	stats *counters
}

func (z *zcWriter) write(fd uintptr) bool {
	sock := int(fd)
	for z.idx < len(z.segs) {
		sg := &z.segs[z.idx]
		var n int
		var err error
		if sg.file < 0 {
			if len(sg.b) == 0 {
				z.idx++
				continue
			}
			if z.idx < len(z.segs)-1 {
				n, err = unix.SendmsgN(sock, sg.b, nil, nil, unix.MSG_MORE)
				z.stats.cost.sendmsg.Add(1)
				z.stats.cost.writeBytes.Add(int64(max(n, 0)))
			} else {
				n, err = unix.Write(sock, sg.b)
				z.stats.cost.countSocketWrite(max(n, 0))
			}
			if n > 0 {
				sg.b = sg.b[n:]
			}
		} else {
			if sg.n == 0 {
				z.idx++
				continue
			}
			n, err = unix.Sendfile(sock, sg.file, &sg.off, int(min(sg.n, 1<<30)))
			z.stats.cost.sendfile.Add(1)
			if n > 0 {
				sg.n -= int64(n)
				z.stats.sendfileBytes.Add(int64(n))
				z.stats.sendfileCalls.Add(1)
				z.stats.cost.sendfileBytes.Add(int64(n))
			} else if err == nil {
				z.err = fmt.Errorf("%w: %d bytes missing at position %d", errShortFile, sg.n, sg.off)
				return true
			}
		}
		switch err {
		case nil:
		case unix.EAGAIN:
			return false
		case unix.EINTR:
		default:
			z.err = err
			return true
		}
	}
	return true
}

// appendSlice appends the slice's bytes to dst with pread (Slice.ReadAll
// appends, growing dst only when its capacity is short).
func appendSlice(dst []byte, s log.Slice) ([]byte, error) {
	if cap(dst)-len(dst) < int(s.Size) {
		nb := make([]byte, len(dst), len(dst)+int(s.Size)+len(dst)/2)
		copy(nb, dst)
		dst = nb
	}
	return s.ReadAll(dst)
}

var errShortFile = errors.New("segment file ended before the slice did")
