package netfetch

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/iouring"
)

// Transport is the TCP implementation of broker.Transport for the broker
// self: it resolves a source broker's address from the controller's
// BrokerInfo and opens one connection per (source, fetcher index). Dial is
// safe for concurrent use.
type Transport struct {
	self  int32
	ctrl  *controller.Controller
	links *links // may be nil: no fault injection
	// noSessions turns incremental fetch sessions off (isrbench.fetch.sessions=false):
	// every replica fetch names every partition.
	noSessions bool
	// readBeforeWait is isrbench.socket.read.when.ready=false (SetReadWhenReady): every
	// response is waited for with a read that finds the socket empty first.
	readBeforeWait bool
	// uring is isrbench.replica.fetch.uring (SetUring): each round trip of a plaintext
	// connection is one io_uring_enter (replica_fetch_uring.go).
	uring bool
	// sec is the inter-broker listener's client security (replica_fetch_security.go).
	sec ClientSecurity
	// timeout is replica.socket.timeout.ms: how long a replica request may wait for its
	// answer (0: unbounded, NewTransport's).
	timeout time.Duration
	// costs count the fetchers' socket calls and replica fetches (SetCounters; its own until
	// then).
	costs *costCounters
}

// NewTransport returns a transport for broker self without fault injection
// (a Cluster builds its transports with its links), using fetch sessions.
func NewTransport(self int32, ctrl *controller.Controller) *Transport {
	return &Transport{self: self, ctrl: ctrl, costs: new(costCounters)}
}

// SetCounters makes the connections the transport dials from now on count their socket calls
// and replica fetches in c (Counters.Cost): a cluster gives its brokers' transports the
// Counters of its wire servers. Call it before the broker starts.
func (t *Transport) SetCounters(c *Counters) { t.costs = &c.c.cost }

// SetReadWhenReady is isrbench.socket.read.when.ready (default true): a connection the
// transport dials from now on writes each request and waits for its response inside one
// RawConn.Read (readready.go); false reads the socket before every wait. Call it before the
// broker starts.
func (t *Transport) SetReadWhenReady(on bool) { t.readBeforeWait = !on }

// SetUring is isrbench.replica.fetch.uring (default false): a plaintext connection the
// transport dials from now on sends each request and receives its response with one
// io_uring_enter (replica_fetch_uring.go), where the kernel allows io_uring. Call it before the
// broker starts.
func (t *Transport) SetUring(on bool) { t.uring = on }

var _ broker.Transport = (*Transport)(nil)

// Dial connects to source's listener. With a fault on the (source, self)
// link the connection is wrapped (latency, bandwidth, down); otherwise it
// is the bare TCP connection.
func (t *Transport) Dial(ctx context.Context, source int32, fetcherIndex int) (broker.FetchConn, error) {
	var addr string
	for _, b := range t.ctrl.Brokers() {
		if b.ID == source {
			addr = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("replica fetcher %d->%d: broker %d is not registered with the controller: %w", t.self, source, source, kerr.BrokerNotAvailable)
	}
	var l *link
	if t.links != nil {
		l = t.links.get(source, t.self)
		if f := l.fault.Load(); f != nil && f.Down {
			return nil, fmt.Errorf("replica fetcher %d->%d dial %s: %w", t.self, source, addr, ErrLinkDown)
		}
	}
	d := net.Dialer{Timeout: replicaDialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("replica fetcher %d->%d dial %s: %w", t.self, source, addr, err)
	}
	fc := &fetchConn{
		self:     t.self,
		source:   source,
		clientID: fmt.Sprintf("isrbench-replica-fetcher-%d-%d-%d", t.self, source, fetcherIndex),
		l:        l,
		sess:     sessionClient{enabled: !t.noSessions},
		timeout:  t.timeout,
		costs:    t.costs,
	}
	fc.nc = nc
	if l != nil {
		l.mu.Lock()
		if l.fault.Load() != nil {
			fc.nc = newFaultConn(nc, l)
		}
		l.conns[fc] = struct{}{}
		l.mu.Unlock()
	}
	rd := newSockReader(fc.nc, fc.costs)
	fc.br = bufio.NewReaderSize(rd, 64<<10)
	if sr, ok := rd.(*sockReader); ok {
		fc.raw = sr.raw
		if !t.readBeforeWait {
			fc.sr, fc.rtFn = sr, fc.roundTripStep
		}
		if t.uring {
			fc.x = newExchange() // nil where io_uring is unavailable: the poller's way
			fc.ur.fn = fc.uringStep
		}
	}
	if err := t.secureReplicaConn(ctx, fc, hostOf(addr)); err != nil {
		fc.Close()
		return nil, err
	}
	return fc, nil
}

// fetchConn is one replica fetch connection; used by one fetcher goroutine
// (Close may be called concurrently, e.g. by a link change).
type fetchConn struct {
	self, source int32
	clientID     string
	nc           net.Conn
	br           *bufio.Reader
	costs        *costCounters // the Transport's
	// sr: br reads the bare TCP socket through sr, and round trips run inside raw.Read
	// (roundTripReady); nil: the classic reads (TLS, a faulty link, the ablation). raw is the
	// bare TCP socket's (nil under TLS or a faulty link).
	sr   *sockReader
	raw  syscall.RawConn
	rtFn func(fd uintptr) bool // roundTripStep, bound once
	// The round trip in progress inside raw.Read: its request frame (written on the first
	// call), the response size (-1 until its prefix is read), the body bytes read so far, and
	// the result.
	rtOut     []byte
	rtWritten bool
	rtSize    int32
	rtHave    int
	rtBody    []byte
	rtErr     error
	rtReq     kmsg.Request
	// x, when set, runs each round trip as one io_uring_enter on raw's socket, receiving the
	// whole frame into rbuf (isrbench.replica.fetch.uring, replica_fetch_uring.go).
	x         *iouring.Exchange
	ur        uringRound
	l         *link
	corr      int32
	wbuf      []byte
	rbuf      []byte // response body (the io_uring way: its frame); Records alias it until the next call
	closeOnce sync.Once

	// Reused per call (owned by the fetcher goroutine): the Fetch request and
	// response objects, the returned response, and the context whose
	// cancellation breaks the socket I/O (registered once, not per call).
	freq         *kmsg.FetchRequest
	replicaState []byte // the encoded ReplicaState tag of freq
	out          []broker.FetchPartition
	ctx          context.Context
	ctxStop      func() bool
	sess         sessionClient // the connection's fetch session (KIP-227)
	timeout      time.Duration // replica.socket.timeout.ms, 0: unbounded
}

var _ broker.FetchConn = (*fetchConn)(nil)

func (c *fetchConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		if c.x != nil {
			// A round in the kernel holds the socket: shutting it down ends the round.
			c.shutdown()
		}
		err = c.nc.Close()
		if c.x != nil {
			c.x.Close()
		}
		if stop := c.ctxStop; stop != nil {
			stop()
		}
		if c.l != nil {
			c.l.mu.Lock()
			delete(c.l.conns, c)
			c.l.mu.Unlock()
		}
	})
	return err
}

// roundTrip writes req (request header v1/v2) and reads its response into
// resp. The context's deadline and cancellation apply to the socket I/O.
func (c *fetchConn) roundTrip(ctx context.Context, req kmsg.Request, resp kmsg.Response) error {
	body, err := c.roundTripBody(ctx, req)
	if err != nil {
		return err
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("replica fetcher %d->%d: decoding %s response: %w", c.self, c.source, kmsg.NameForKey(req.Key()), err)
	}
	return nil
}

// roundTripBody writes req and returns its response body after the
// response header (aliasing c.rbuf until the next call).
func (c *fetchConn) roundTripBody(ctx context.Context, req kmsg.Request) ([]byte, error) {
	// The request's deadline: replica.socket.timeout.ms from now, or the context's if sooner.
	var dl time.Time
	if c.timeout > 0 {
		dl = time.Now().Add(c.timeout)
	}
	if cdl, ok := ctx.Deadline(); ok && (dl.IsZero() || cdl.Before(dl)) {
		dl = cdl
	}
	c.nc.SetDeadline(dl)
	if ctx != c.ctx {
		// One AfterFunc per context, not per call (the fetcher passes the
		// same context every time): cancellation breaks any blocked I/O.
		if c.ctxStop != nil {
			c.ctxStop()
		}
		c.ctx = ctx
		c.ctxStop = context.AfterFunc(ctx, func() {
			c.nc.SetDeadline(time.Unix(1, 0))
			if c.x != nil {
				c.shutdown()
			}
		})
	}
	// Checked after SetDeadline: a context canceled earlier has had its
	// AfterFunc's past deadline overwritten above, and the I/O below would
	// block until the peer answers.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replica fetcher %d->%d: %s: %w", c.self, c.source, kmsg.NameForKey(req.Key()), err)
	}

	c.corr++
	b := append(c.wbuf[:0], 0, 0, 0, 0)
	b = kbin.AppendInt16(b, req.Key())
	b = kbin.AppendInt16(b, req.GetVersion())
	b = kbin.AppendInt32(b, c.corr)
	b = kbin.AppendString(b, c.clientID)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b[:4], uint32(len(b)-4))
	c.wbuf = b
	var body []byte
	if c.x != nil {
		var err error
		if body, err = c.roundTripUring(ctx, req, b, dl); err != nil {
			return nil, err
		}
	} else if c.sr != nil {
		var err error
		if body, err = c.roundTripReady(ctx, req, b); err != nil {
			return nil, err
		}
	} else {
		c.costs.countSocketWrite(len(b))
		if _, err := c.nc.Write(b); err != nil {
			return nil, c.ioErr(ctx, "writing", req, err)
		}
		c.rtSize, c.rtHave = -1, 0
		var err error
		if body, err = c.readFrame(req); err != nil {
			return nil, err
		}
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return nil, fmt.Errorf("replica fetcher %d->%d: response correlation id %d, want %d", c.self, c.source, corr, c.corr)
	}
	r := kbin.Reader{Src: body[4:]}
	if req.IsFlexible() { // response header v1 (not used for ApiVersions here)
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("replica fetcher %d->%d: %s response header: %w", c.self, c.source, kmsg.NameForKey(req.Key()), err)
	}
	return r.Src, nil
}

// readFrame reads one size-prefixed response into c.rbuf, resuming at c.rtSize/c.rtHave
// (reset them first): restartable after errWouldBlock (returned bare) inside raw.Read.
func (c *fetchConn) readFrame(req kmsg.Request) ([]byte, error) {
	if c.rtSize < 0 {
		szb, err := c.br.Peek(4)
		if err == errWouldBlock {
			return nil, err
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(szb) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, c.ioErr(c.ctx, "reading", req, err)
		}
		size := int32(binary.BigEndian.Uint32(szb))
		if err := c.checkResponseSize(req, size); err != nil {
			return nil, err
		}
		c.br.Discard(4)
		c.rtSize, c.rtHave = size, 0
		if cap(c.rbuf) < int(size) {
			c.rbuf = make([]byte, size)
		}
	}
	body := c.rbuf[:c.rtSize]
	for c.rtHave < len(body) {
		n, err := c.br.Read(body[c.rtHave:])
		c.rtHave += n
		if err == errWouldBlock {
			return nil, err
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, c.ioErr(c.ctx, "reading", req, err)
		}
	}
	return body, nil
}

// checkResponseSize refuses a response size prefix out of [4, maxReplicaResponseBytes].
func (c *fetchConn) checkResponseSize(req kmsg.Request, size int32) error {
	if size < 4 || size > maxReplicaResponseBytes {
		return fmt.Errorf("replica fetcher %d->%d: %s response size %d out of range [4, %d]", c.self, c.source, kmsg.NameForKey(req.Key()), size, maxReplicaResponseBytes)
	}
	return nil
}

func (c *fetchConn) ioErr(ctx context.Context, what string, req kmsg.Request, err error) error {
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return fmt.Errorf("replica fetcher %d->%d: %s %s: %w", c.self, c.source, what, kmsg.NameForKey(req.Key()), err)
}

// Fetch sends a Fetch v12 with replica_id set and decodes the response;
// the returned Records alias the connection's buffer until the next call.
// With fetch sessions (KIP-227) the request names only the partitions whose
// position changed and the response carries only those with news; the
// partitions left out have nothing new (no records, the same HW and log start).
func (c *fetchConn) Fetch(ctx context.Context, rf *broker.FetchRequest) ([]broker.FetchPartition, error) {
	out, err := c.fetchOnce(ctx, rf)
	if c.sess.enabled && (errors.Is(err, kerr.FetchSessionIDNotFound) || errors.Is(err, kerr.InvalidFetchSessionEpoch)) {
		// The leader lost the session (it restarted, or evicted it): start a new one.
		c.sess.reset()
		out, err = c.fetchOnce(ctx, rf)
	}
	return out, err
}

func (c *fetchConn) fetchOnce(ctx context.Context, rf *broker.FetchRequest) ([]broker.FetchPartition, error) {
	// The request, response and result objects are reused: the Fetch path
	// of a fetcher allocates nothing per call once they have grown (except
	// the response's topic names).
	req := c.freq
	if req == nil {
		req = kmsg.NewPtrFetchRequest()
		c.freq = req
	}
	topics := req.Topics[:0]
	forgotten := req.ForgottenTopics[:0]
	*req = kmsg.FetchRequest{}
	req.Default()
	req.SetVersion(replicaFetchVersion)
	req.ReplicaID = rf.ReplicaID
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(rf.MaxWait/time.Millisecond), rf.MinBytes, rf.MaxBytes
	req.SessionID, req.SessionEpoch = c.sess.requestIDs()
	c.replicaState = appendReplicaState(c.replicaState[:0], rf.ReplicaID, rf.ReplicaEpoch)
	req.UnknownTags.Set(replicaStateTag, c.replicaState)
	full := req.SessionEpoch <= 0
	// A fetcher that reused its plan sends what this session already holds but for the
	// entries that moved: name those that changed and forget nothing, without looking at
	// each partition.
	reused := !full && rf.Reused && c.sess.holds(len(rf.Partitions))
	if reused {
		for _, i := range rf.Moved {
			if i >= 0 && i < len(rf.Partitions) && c.sess.changed(rf.Partitions[i]) {
				topics = appendFetchPartition(topics, rf.Partitions[i])
			}
		}
	} else {
		for _, p := range rf.Partitions {
			if full || c.sess.changed(p) {
				topics = appendFetchPartition(topics, p)
			}
		}
	}
	req.Topics = topics
	if !full && !reused {
		forgotten = c.sess.appendForgotten(forgotten)
	}
	req.ForgottenTopics = forgotten
	c.costs.followerFetch.Add(1)
	body, err := c.roundTripBody(ctx, req)
	if err != nil {
		return nil, err
	}
	out, err := decodeReplicaFetchResponse(body, rf, c.out[:0])
	c.out = out
	if err != nil {
		return nil, fmt.Errorf("replica fetcher %d->%d: %w", c.self, c.source, err)
	}
	c.sess.answered(req, responseSessionID(body))
	c.costs.followerFetched.Add(1)
	return out, nil
}

// ListOffsets sends a ListOffsets v7 as replica replicaID (the leader answers its log start
// for -2 and its LEO for -1).
func (c *fetchConn) ListOffsets(ctx context.Context, replicaID int32, q []broker.OffsetQuery) ([]broker.OffsetAnswer, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(replicaListOffsetsVersion)
	req.ReplicaID = replicaID
	req.Topics = groupByTopic(req.Topics, q, func(p broker.OffsetQuery) string { return p.Topic },
		func(topic string) kmsg.ListOffsetsRequestTopic {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = topic
			return t
		},
		func(t *kmsg.ListOffsetsRequestTopic, p broker.OffsetQuery) {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p.Partition, p.CurrentLeaderEpoch, p.Timestamp
			t.Partitions = append(t.Partitions, rp)
		})
	resp := kmsg.NewPtrListOffsetsResponse()
	if err := c.roundTrip(ctx, req, resp); err != nil {
		return nil, err
	}
	// One answer per query, in query order (a topic-partition may be asked twice).
	out := make([]broker.OffsetAnswer, 0, len(q))
	next := map[[2]any]int{}
	for _, p := range q {
		ans := broker.OffsetAnswer{Topic: p.Topic, Partition: p.Partition, Timestamp: p.Timestamp, Offset: -1,
			Err: fmt.Errorf("ListOffsets response lacks %s-%d: %w", p.Topic, p.Partition, kerr.UnknownServerError)}
		k := [2]any{p.Topic, p.Partition}
		seen := 0
		for i := range resp.Topics {
			t := &resp.Topics[i]
			if t.Topic != p.Topic {
				continue
			}
			for j := range t.Partitions {
				rp := &t.Partitions[j]
				if rp.Partition != p.Partition {
					continue
				}
				if seen == next[k] {
					ans.Offset, ans.Err = rp.Offset, kerr.ErrorForCode(rp.ErrorCode)
				}
				seen++
			}
		}
		next[k]++
		out = append(out, ans)
	}
	return out, nil
}

// OffsetForLeaderEpoch sends an OffsetForLeaderEpoch v4 with replica_id set.
func (c *fetchConn) OffsetForLeaderEpoch(ctx context.Context, q []broker.EpochQuery) ([]broker.EpochAnswer, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(replicaEpochVersion)
	req.ReplicaID = c.self
	req.Topics = groupByTopic(req.Topics, q, func(p broker.EpochQuery) string { return p.Topic },
		func(topic string) kmsg.OffsetForLeaderEpochRequestTopic {
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = topic
			return t
		},
		func(t *kmsg.OffsetForLeaderEpochRequestTopic, p broker.EpochQuery) {
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p.Partition, p.CurrentLeaderEpoch, p.LeaderEpoch
			t.Partitions = append(t.Partitions, rp)
		})
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	if err := c.roundTrip(ctx, req, resp); err != nil {
		return nil, err
	}
	out := make([]broker.EpochAnswer, 0, len(q))
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			out = append(out, broker.EpochAnswer{Topic: t.Topic, Partition: p.Partition, Err: kerr.ErrorForCode(p.ErrorCode), LeaderEpoch: p.LeaderEpoch, EndOffset: p.EndOffset})
		}
	}
	return out, nil
}

// groupByTopic appends the queries q to topics, one request topic per run of consecutive
// queries of one topic (newTopic starts it, add appends a query's partition to it), as the
// replica requests name each topic once per run.
func groupByTopic[Q, T any](topics []T, q []Q, topicOf func(Q) string, newTopic func(string) T, add func(*T, Q)) []T {
	last := ""
	for i, p := range q {
		if name := topicOf(p); i == 0 || name != last {
			topics = append(topics, newTopic(name))
			last = name
		}
		add(&topics[len(topics)-1], p)
	}
	return topics
}
