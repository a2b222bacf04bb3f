package netfetch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

func init() {
	// v13 names topics by id (KIP-516): Metadata hands the ids out, the request's are resolved
	// through the controller's lock-free index (UNKNOWN_TOPIC_ID for one no topic has).
	register(api{key: 1, min: 4, max: 13, role: roleFetchServe, newReq: (*conn).fetchRequest,
		serve: func(c *conn, h reqHeader, req kmsg.Request) error {
			return c.handleFetch(h, req.(*kmsg.FetchRequest))
		}})
}

// fetchRequest returns the connection's reused Fetch request, reset (see produceRequest).
func (c *conn) fetchRequest() kmsg.Request {
	if c.fetchReq == nil {
		c.fetchReq = kmsg.NewPtrFetchRequest()
	}
	topics := c.fetchReq.Topics[:0]
	*c.fetchReq = kmsg.FetchRequest{Topics: topics}
	return c.fetchReq
}

// fetchState is a connection's reused Fetch state: the broker request
// (its Partitions slice keeps its capacity), the topic grouping of the
// request and the response encoder. Owned by the connection goroutine.
type fetchState struct {
	req   broker.FetchRequest
	spans []topicSpan
	// unknownParts and unknownSpans are the partitions of a v13+ request whose topic id no
	// topic has: answered UNKNOWN_TOPIC_ID after the others.
	unknownParts []broker.FetchPartition
	unknownSpans []topicSpan
	enc          fetchEncoder
	copy         []byte   // the whole response (ZeroCopy=false), or the staged bytes of a zero-copy one
	segs         []outSeg // zero-copy path: the pieces of the response

	zw   zcWriter           // zero-copy path: the write in progress
	zwFn func(uintptr) bool // zw.write, bound once
}

// topicSpan is one request topic: Partitions[start:end] of the broker request.
type topicSpan struct {
	topic      string
	id         [16]byte // the topic id a v13+ response names it by
	start, end int
}

// handleFetch runs a consumer or replica Fetch (v4..v13) through the
// broker's long poll and writes the response: header and per-partition
// fields from the reused encoder buffer, records straight from the segment
// files with sendfile(2) (or pread+write when ZeroCopy is off). Every Slice
// is released before returning. A v13 request's topic ids are resolved to names first
// (resolveTopicIDs); the rest runs by name.
func (c *conn) handleFetch(h reqHeader, r *kmsg.FetchRequest) error {
	c.s.stats.cost.countFetch(r.ReplicaID >= 0)
	c.kind = kindConsumerFetch
	if r.ReplicaID >= 0 {
		c.kind = kindReplicaFetch
	}
	st := &c.fetch
	req := &st.req
	req.ReplicaID = r.ReplicaID
	req.ReplicaEpoch = replicaEpochOf(r)
	req.MaxWait = time.Duration(r.MaxWaitMillis) * time.Millisecond
	req.MinBytes, req.MaxBytes, req.IsolationLevel = r.MinBytes, r.MaxBytes, r.IsolationLevel
	req.Partitions = req.Partitions[:0]
	st.spans = st.spans[:0]
	var ix *controller.TopicIDIndex
	if r.Version >= 13 {
		ix = c.resolveTopicIDs(r)
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.Topic == "" && r.Version >= 13 {
			continue // an unknown topic id (resolveTopicIDs)
		}
		start := len(req.Partitions)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			cle := p.CurrentLeaderEpoch
			if r.Version < 9 {
				cle = -1
			}
			ls := p.LogStartOffset
			if r.Version < 5 {
				ls = -1
			}
			req.Partitions = append(req.Partitions, broker.FetchPartition{
				Topic: t.Topic, Partition: p.Partition, FetchOffset: p.FetchOffset,
				CurrentLeaderEpoch: cle, LogStartOffset: ls, MaxBytes: p.PartitionMaxBytes,
				DivergingEpoch: -1, DivergingEndOffset: -1,
			})
		}
		st.spans = append(st.spans, topicSpan{topic: t.Topic, id: t.TopicID, start: start, end: len(req.Partitions)})
	}
	sf := c.s.sessions.begin(r, req)
	if sf.errCode != 0 {
		if err := st.enc.encode(r.Version, h.corr, sf.errCode, 0, nil, nil); err != nil {
			return err
		}
		c.markSend()
		if !c.s.waitUnpaused() {
			return net.ErrClosed
		}
		return c.sendFetch(nil)
	}
	if sf.session != nil {
		// Incremental: the session visits what changed and leaves in req.Partitions, sorted,
		// the partitions the client must hear about.
		c.waited = c.s.cfg.Broker.SessionFetch(c.ctx, sf.session.bs, req)
		st.spans = spansOf(st.spans[:0], req.Partitions)
		c.s.stats.incremental.Add(1)
		c.s.stats.omitted.Add(int64(max(sf.session.bs.Len()-len(req.Partitions), 0)))
	} else {
		c.waited = c.s.cfg.Broker.Fetch(c.ctx, req)
	}
	defer func() {
		for i := range req.Partitions {
			req.Partitions[i].Records.Release()
			req.Partitions[i].Records = log.Slice{}
		}
	}()
	parts, spans := req.Partitions, st.spans
	if c.s.sessions != nil && sf.session == nil {
		c.s.sessions.finish(&sf, req.ReplicaID >= 0, parts)
	}
	if r.Version >= 13 {
		parts, spans = st.withTopicIDs(ix, parts, spans)
	}
	if err := st.enc.encode(r.Version, h.corr, 0, sf.respID, parts, spans); err != nil {
		return err
	}
	c.markSend()
	if !c.s.waitUnpaused() {
		return net.ErrClosed
	}
	return c.s.stats.cost.countFetchResponse(c.sendFetch(parts))
}

// spansOf appends to dst the topic spans of parts (sorted by topic: one span per topic).
func spansOf(dst []topicSpan, parts []broker.FetchPartition) []topicSpan {
	for i := range parts {
		if n := len(dst); n == 0 || dst[n-1].topic != parts[i].Topic {
			dst = append(dst, topicSpan{topic: parts[i].Topic, start: i})
		}
		dst[len(dst)-1].end = i + 1
	}
	return dst
}

// resolveTopicIDs names the topics and forgotten topics of a v13+ Fetch by their ids, from
// the controller's index (lock-free). A topic whose id no topic has keeps the empty name;
// its partitions are noted in the connection's fetch state to be answered UNKNOWN_TOPIC_ID
// (they never enter a fetch session). Forgotten topics of unknown ids are dropped.
func (c *conn) resolveTopicIDs(r *kmsg.FetchRequest) *controller.TopicIDIndex {
	ix := c.s.cfg.Controller.TopicIDIndex()
	st := &c.fetch
	st.unknownParts, st.unknownSpans = st.unknownParts[:0], st.unknownSpans[:0]
	for i := range r.Topics {
		t := &r.Topics[i]
		name, ok := ix.ByID[t.TopicID]
		t.Topic = name
		if ok {
			continue
		}
		start := len(st.unknownParts)
		for j := range t.Partitions {
			st.unknownParts = append(st.unknownParts, broker.FetchPartition{
				Partition: t.Partitions[j].Partition, Err: kerr.UnknownTopicID,
				HighWatermark: -1, LastStableOffset: -1, LogStartOffsetOut: -1, DivergingEpoch: -1, DivergingEndOffset: -1,
			})
		}
		st.unknownSpans = append(st.unknownSpans, topicSpan{id: t.TopicID, start: start, end: len(st.unknownParts)})
	}
	for i := range r.ForgottenTopics {
		ft := &r.ForgottenTopics[i]
		ft.Topic = ix.ByID[ft.TopicID] // "" for an unknown id: matches no session partition
	}
	return ix
}

// withTopicIDs completes a v13+ response: every span gets its topic's id (spans a fetch
// session built carry only names), and the partitions of unknown topic ids follow the
// others. It returns the partitions and spans to encode (parts' backing array may grow).
func (st *fetchState) withTopicIDs(ix *controller.TopicIDIndex, parts []broker.FetchPartition, spans []topicSpan) ([]broker.FetchPartition, []topicSpan) {
	for i := range spans {
		if spans[i].id == ([16]byte{}) {
			spans[i].id = ix.ByName[spans[i].topic]
		}
	}
	if len(st.unknownParts) == 0 {
		return parts, spans
	}
	base := len(parts)
	parts = append(parts, st.unknownParts...)
	for _, sp := range st.unknownSpans {
		sp.start, sp.end = sp.start+base, sp.end+base
		spans = append(spans, sp)
	}
	return parts, spans
}

// fetchEncoder builds a Fetch response (v4..v13) without the record bytes:
// buf holds the size prefix, response header and every field, and marks[i]
// is the position in buf right after partition i's records length, where
// its records (Partitions[i].Records, Size bytes) belong on the wire.
// The buffers are reused; encode allocates nothing once they have grown.
type fetchEncoder struct {
	buf   []byte
	marks []int
	total int64 // size prefix value: len(buf)-4 + sum of record sizes
}

// maxFetchResponse bounds a response so that the int32 size prefix and
// record lengths cannot overflow.
const maxFetchResponse = 1<<31 - 1

// encode builds the response to a Fetch of version: the partitions parts grouped by spans,
// or, with topErr set, a whole-response error without partitions; sessionID is the fetch
// session the response belongs to (0: none; v7+).
func (e *fetchEncoder) encode(version int16, corr int32, topErr int16, sessionID int32, parts []broker.FetchPartition, spans []topicSpan) error {
	if version < 4 || version > 13 {
		return fmt.Errorf("BUG: Fetch response v%d not supported by the encoder", version)
	}
	flex := version >= 12
	b := append(e.buf[:0], 0, 0, 0, 0) // size, patched below
	b = kbin.AppendInt32(b, corr)
	if flex {
		b = append(b, 0) // response header v1: no tagged fields
	}
	b = kbin.AppendInt32(b, 0) // throttle_time_ms (v1+)
	if version >= 7 {
		b = kbin.AppendInt16(b, topErr)
		b = kbin.AppendInt32(b, sessionID) // 0 = no fetch session
	}
	b = appendArrayLen(b, len(spans), flex)
	marks := e.marks[:0]
	var records int64
	for _, sp := range spans {
		switch {
		case version >= 13:
			b = append(b, sp.id[:]...) // topic_id (KIP-516)
		case flex:
			b = kbin.AppendCompactString(b, sp.topic)
		default:
			b = kbin.AppendString(b, sp.topic)
		}
		b = appendArrayLen(b, sp.end-sp.start, flex)
		for i := sp.start; i < sp.end; i++ {
			p := &parts[i]
			b = kbin.AppendInt32(b, p.Partition)
			b = kbin.AppendInt16(b, errCode(p.Err))
			hw, lso, ls := p.HighWatermark, p.LastStableOffset, p.LogStartOffsetOut
			if p.Err != nil {
				hw, lso, ls = -1, -1, -1
			}
			b = kbin.AppendInt64(b, hw)
			b = kbin.AppendInt64(b, lso) // v4+
			if version >= 5 {
				b = kbin.AppendInt64(b, ls)
			}
			switch ab := p.AbortedTransactions; {
			case len(ab) == 0 || p.Err != nil: // aborted_transactions: null
				if flex {
					b = append(b, 0)
				} else {
					b = kbin.AppendInt32(b, -1)
				}
			default:
				b = appendArrayLen(b, len(ab), flex)
				for _, a := range ab {
					b = kbin.AppendInt64(b, a.ProducerID)
					b = kbin.AppendInt64(b, a.FirstOffset)
					if flex {
						b = append(b, 0)
					}
				}
			}
			if version >= 11 {
				b = kbin.AppendInt32(b, -1) // preferred_read_replica
			}
			n := p.Records.Size
			if p.Err != nil || n < 0 {
				n = 0
			}
			if n > 0 && p.Records.File == nil {
				return fmt.Errorf("BUG: fetch of %s-%d returned a %d-byte slice without a file", p.Topic, p.Partition, n)
			}
			records += n
			if records > maxFetchResponse {
				return fmt.Errorf("fetch response records exceed %d bytes", maxFetchResponse)
			}
			if flex {
				b = kbin.AppendUvarint(b, uint32(n+1))
			} else {
				b = kbin.AppendInt32(b, int32(n))
			}
			marks = append(marks, len(b))
			if flex {
				if p.DivergingEndOffset >= 0 {
					b = append(b, 1, 0, 13) // 1 tag: tag 0 (diverging_epoch), 13 bytes
					b = kbin.AppendInt32(b, p.DivergingEpoch)
					b = kbin.AppendInt64(b, p.DivergingEndOffset)
					b = append(b, 0)
				} else {
					b = append(b, 0)
				}
			}
		}
		if flex {
			b = append(b, 0) // topic tagged fields
		}
	}
	if flex {
		b = append(b, 0) // response tagged fields
	}
	total := int64(len(b)-4) + records
	if total > maxFetchResponse {
		return fmt.Errorf("fetch response of %d bytes exceeds the int32 size prefix", total)
	}
	binary.BigEndian.PutUint32(b[:4], uint32(total))
	e.buf, e.marks, e.total = b, marks, total
	return nil
}

func appendArrayLen(b []byte, n int, flex bool) []byte {
	if flex {
		return kbin.AppendUvarint(b, uint32(n+1))
	}
	return kbin.AppendInt32(b, int32(n))
}

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
