package netfetch

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one client connection, owned by its serve goroutine.
type conn struct {
	s   *Server
	nc  net.Conn // the TCP connection, or its TLS connection after the handshake
	raw syscall.RawConn
	// lis is the listener the connection came in on (nil: the server's own, PLAINTEXT); tls
	// is set once its TLS handshake is done; sasl is its SASL state (security.go).
	lis  *listener
	tls  *tls.Conn
	sasl saslState
	br   *bufio.Reader
	// sr is br's socket reader while br reads the bare TCP socket (nil after a TLS
	// handshake): it can read from inside RawConn.Read (readready.go).
	sr  *sockReader
	ctx context.Context // canceled when the connection ends
	ip  netip.Addr      // the client's address (max.connections.per.ip)

	// rdl is the read deadline set on nc now (zero = none).
	rdl time.Time
	// reqStart is when the first byte of the request being read arrived (zero: none yet):
	// isrbench.request.read.timeout.ms counts from it. waitFor is what readRequest waits
	// for: waitIdle (the next request, under connections.max.idle.ms), waitSize (its size
	// prefix) or the byte count of the request.
	reqStart time.Time
	waitFor  int
	// rawEnd is set by readyStep when the connection is to end (the reason logged).
	rawEnd  bool
	readyFn func(fd uintptr) bool // readyStep, bound once
	// peeked is the size of the request read in place in br (size prefix
	// included), discarded once it is handled; 0 when it was read into req.
	peeked int

	req   []byte // reused request body buffer for requests larger than br
	held  int64  // bytes of req reserved in the server's memory pool
	out   []byte // reused response buffer
	fetch fetchState

	// Reused request objects for the hot APIs: kmsg's ReadFrom resets every
	// field and refills the slices within their capacity. A request (and the
	// bytes it aliases in req) is dead once its response is written.
	fetchReq   *kmsg.FetchRequest
	produceReq *kmsg.ProduceRequest
	// produceParts and produceResp are handleProduce's reused broker
	// request (its entries alias req like produceReq does) and response.
	produceParts []broker.ProducePartition
	producePre   []error // per request partition: refused before the append (00_produce.go)
	// txnVerified lists the request partitions verified with their transaction coordinator
	// (txnverify.go), with the verification guard's sequence each had before its verification.
	txnVerified []broker.TxnVerified
	produceResp *kmsg.ProduceResponse
	// ack and inl are produceInline's (produceinline.go): the acks=all wait completed and
	// answered by the goroutine that completes it.
	ack *broker.AckWaiter
	inl inlineAnswer
	// wakes are the followers' wake-ups an acks=0/1 produce owes once its response is
	// written (isrbench.produce.wake.after.response): handle pays them on every path.
	wakes broker.FollowerWakes

	// The request being handled, for the request-time counters (cost.go costCounters.countReqTime): its
	// kind (a Fetch sets replica or consumer), the time its handler waited (Broker.Produce's
	// and Broker.Fetch's result) and when its response started to be written (zero: not yet).
	kind   reqKind
	waited time.Duration
	sendAt time.Time
}

func newConn(s *Server, tc *net.TCPConn, ip netip.Addr, lis *listener) (*conn, error) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("syscall conn: %w", err)
	}
	c := &conn{s: s, nc: tc, raw: raw, ip: ip, lis: lis}
	rd := newSockReader(tc, &s.stats.cost)
	c.sr, _ = rd.(*sockReader)
	c.br = bufio.NewReaderSize(rd, readBufferSize)
	return c, nil
}

// reqHeader is a decoded request header (v1 or v2).
type reqHeader struct {
	key, version int16
	corr         int32
	clientID     string
}

// errClose asks the connection loop to close the connection (with the reason logged).
type errClose struct{ reason string }

func (e *errClose) Error() string { return e.reason }

func closef(format string, args ...any) error {
	return &errClose{reason: fmt.Sprintf(format, args...)}
}

// peerGone reports whether err only says that the connection went away (the client hung
// up, also in the middle of a request, or the server is closing): nothing worth a log line.
// The read and the handling of requests share it.
func peerGone(err error) bool {
	var ce *errClose
	if errors.As(err, &ce) {
		return false
	}
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

func (c *conn) serve() {
	s := c.s
	ctx, cancel := context.WithCancel(context.Background())
	c.ctx = ctx
	defer func() {
		cancel()
		c.dropReq() // before the close: a client that sees it sees the memory and
		s.mu.Lock() // the connection count released
		delete(s.mu.conns, c)
		s.leave(c.ip)
		s.mu.Unlock()
		c.nc.Close()
		if s.cfg.onConnDone != nil {
			s.cfg.onConnDone()
		}
		s.wg.Done()
	}()
	go func() { // end long polls when the server closes
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := c.secure(); err != nil {
		if !peerGone(err) {
			s.cfg.Logf("netfetch: broker %d: closing connection from %s: %v", s.cfg.BrokerID, c.nc.RemoteAddr(), err)
		}
		return
	}
	if c.sr != nil && c.tls == nil && !s.cfg.ReadBeforeWait {
		c.serveWhenReady()
		return
	}
	for {
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

// readFailed counts and logs why reading a request ended the connection.
func (c *conn) readFailed(err error) {
	s := c.s
	if errors.Is(err, errIdle) {
		s.idleClosed.Add(1) // normal: a client that stopped using its connection
		return
	}
	var me *errMemory
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &me) {
		s.readTimeouts.Add(1)
	}
	if !peerGone(err) {
		s.cfg.Logf("netfetch: broker %d: closing connection from %s: %v", s.cfg.BrokerID, c.nc.RemoteAddr(), err)
	}
}

// serveOne answers the request body (read by readRequest) and releases its buffer; false
// ends the connection (the reason logged).
func (c *conn) serveOne(body []byte) bool {
	s := c.s
	if !s.waitUnpaused() {
		return false
	}
	if err := c.handle(body); err != nil {
		// Every reason is logged (a bad request, a response that could not be built or
		// read from the log) except the peer or the server going away.
		if !peerGone(err) {
			s.cfg.Logf("netfetch: broker %d: closing connection from %s: %v", s.cfg.BrokerID, c.nc.RemoteAddr(), err)
		}
		return false
	}
	if c.peeked > 0 {
		c.br.Discard(c.peeked)
		c.peeked = 0
	} else if _, _, held := s.mem.usage(); c.held > maxRetainedRequestBuffer || held > s.mem.limit/2 {
		// Do not pin a large buffer after one large request, nor keep one while
		// requests being read need the pool (the reused produce objects go too:
		// their records alias it).
		c.dropReq()
	}
	return true
}

// maxRetainedRequestBuffer is the largest request buffer a connection keeps
// for its next request (while the pool is at most half used).
const maxRetainedRequestBuffer = 8 << 20

// dropReq returns the request buffer to the pool and drops the reused objects aliasing it.
func (c *conn) dropReq() {
	c.s.mem.recycle(c.req)
	c.req, c.produceReq, c.produceParts = nil, nil, nil
	c.held = 0
}

// parseHeader decodes the request header; the kmsg request returned has
// its version set and body not yet read.
func parseHeader(body []byte) (reqHeader, kmsg.Request, []byte, error) {
	return parseHeaderWith(body, kmsg.RequestForKey)
}

// parseHeaderWith is parseHeader with the request object for a key coming
// from newReq (a connection reuses its Fetch and Produce objects).
func parseHeaderWith(body []byte, newReq func(key int16) kmsg.Request) (reqHeader, kmsg.Request, []byte, error) {
	var h reqHeader
	r := kbin.Reader{Src: body}
	h.key = r.Int16()
	h.version = r.Int16()
	h.corr = r.Int32()
	if l := r.Int16(); l >= 0 { // a nullable string, aliasing body (no allocation)
		h.clientID = kbin.UnsafeString(r.Span(int(l)))
	}
	if err := r.Complete(); err != nil {
		return h, nil, nil, fmt.Errorf("request header truncated: %w", err)
	}
	req := newReq(h.key)
	if req == nil {
		return h, nil, r.Src, nil
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		skipTags(&r)
		if err := r.Complete(); err != nil {
			return h, nil, nil, fmt.Errorf("request header tagged fields truncated: %w", err)
		}
	}
	return h, req, r.Src, nil
}

// handle decodes one request, answers it (answer) and counts its time: local, remote (what
// the handler reports it waited) and send (from markSend to the end).
func (c *conn) handle(body []byte) error {
	start := time.Now()
	c.kind, c.waited, c.sendAt = kindOther, 0, time.Time{}
	c.inl.at = time.Time{}
	err := c.answer(body)
	if h := c.s.onProduceAnswered.Load(); h != nil && c.kind == kindProduce {
		(*h)()
	}
	if c.wakes.Pending() > 0 { // acks=0/1: the response is written (or there is none)
		c.wakes.Wake()
	}
	end := time.Now()
	if !c.inl.at.IsZero() { // answered by the goroutine that completed it, at inl.at
		end = c.inl.at
	}
	send := time.Duration(0)
	if !c.sendAt.IsZero() {
		send = end.Sub(c.sendAt)
	}
	c.s.stats.cost.countReqTime(c.kind, end.Sub(start), c.waited, send)
	return err
}

// markSend records that the handler is done and the response is about to be written (before
// a fault-injection pause, which then counts as send time).
func (c *conn) markSend() { c.sendAt = time.Now() }

// answer decodes one request and answers it through the API registered for its key
// (registry.go; each NN_name.go registers its key, versions and handler).
func (c *conn) answer(body []byte) error {
	if c.sasl.raw && c.sasl.mech != nil { // after a v0 SaslHandshake: a bare token
		return c.answerRawToken(body)
	}
	h, req, rest, err := parseHeaderWith(body, c.requestFor)
	if err != nil {
		return closef("%v", err)
	}
	if err := c.authorize(h.key); err != nil {
		return err
	}
	if h.key >= 0 && int(h.key) < maxAPIKey {
		c.s.stats.requests[h.key].Add(1)
	}
	a := lookupAPI(h.key)
	if a == nil || req == nil {
		return closef("unsupported API key %d (%s) version %d from client %q", h.key, kmsg.NameForKey(h.key), h.version, h.clientID)
	}
	if a.raw != nil { // ApiVersions: answered even for versions we do not support
		return a.raw(c, h, req, rest)
	}
	if h.version < a.min || h.version > a.max {
		return closef("unsupported %s version %d (supported %d..%d) from client %q", kmsg.NameForKey(h.key), h.version, a.min, a.max, h.clientID)
	}
	if err := req.ReadFrom(rest); err != nil {
		return closef("malformed %s v%d request from client %q: %v", kmsg.NameForKey(h.key), h.version, h.clientID, err)
	}
	pprof.SetGoroutineLabels(c.s.labelsFor(a))
	if a.serve != nil {
		return a.serve(c, h, req)
	}
	resp, err := a.handle(c, h, req)
	if err != nil {
		return err
	}
	if resp == nil { // acks=0 produce: no response at all
		return nil
	}
	c.markSend()
	if c.wakes.Pending() > 0 && c.s.paused.Load() != nil {
		c.wakes.Wake() // a paused server delays the answer, not the followers' wake-up
	}
	if !c.s.waitUnpaused() {
		return net.ErrClosed
	}
	resp.SetVersion(h.version)
	return c.writeResponse(h, resp)
}

// writeResponse frames resp (header v0 for ApiVersions and non-flexible
// versions, v1 otherwise) into the reused buffer and writes it.
func (c *conn) writeResponse(h reqHeader, resp kmsg.Response) error {
	buf := c.frameResponse(h, resp)
	c.s.stats.cost.countSocketWrite(len(buf))
	if _, err := c.nc.Write(buf); err != nil {
		return fmt.Errorf("writing %s response: %w", kmsg.NameForKey(h.key), err)
	}
	return nil
}

// frameResponse frames resp (header v0 for ApiVersions and non-flexible versions, v1
// otherwise) into the reused buffer c.out and returns the frame (valid until the next call).
func (c *conn) frameResponse(h reqHeader, resp kmsg.Response) []byte {
	buf := append(c.out[:0], 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(h.corr))
	if resp.IsFlexible() && h.key != 18 {
		buf = append(buf, 0) // empty header tagged fields
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf[:4], uint32(len(buf)-4))
	c.out = buf
	if cap(c.out) > 8<<20 {
		c.out = nil
	}
	return buf
}

// errCode maps an error to its Kafka error code: nil -> 0, a wrapped
// *kerr.Error -> its code, anything else -> UNKNOWN_SERVER_ERROR.
func errCode(err error) int16 {
	if err == nil {
		return 0
	}
	for e := err; e != nil; e = errors.Unwrap(e) { // allocation-free fast path for %w chains
		if ke, ok := e.(*kerr.Error); ok {
			return ke.Code
		}
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// errMessage is the error text for responses that carry one (nil when no error).
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
