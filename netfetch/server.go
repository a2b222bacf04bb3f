package netfetch

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
)

// DefaultSocketRequestMaxBytes is socket.request.max.bytes' default (100 MiB).
const DefaultSocketRequestMaxBytes = 100 << 20

// ServerConfig configures one broker's Kafka wire server. A value: NewServer
// copies it.
type ServerConfig struct {
	BrokerID   int32
	Broker     *broker.Broker
	Controller *controller.Controller
	// ZeroCopy is isrbench.zero.copy (default true): Fetch records are sent
	// with sendfile(2) from the segment file; false = pread into a buffer + write.
	ZeroCopy bool
	// AutoCreateTopics is auto.create.topics.enable: Metadata for an unknown
	// topic creates it with NumPartitions (num.partitions) and
	// DefaultReplicationFactor (default.replication.factor).
	AutoCreateTopics         bool
	NumPartitions            int32
	DefaultReplicationFactor int16
	// SocketRequestMaxBytes is socket.request.max.bytes (default 100 MiB):
	// a request whose size prefix is larger closes the connection before
	// anything is allocated for it.
	SocketRequestMaxBytes int32
	// Logf logs connection-level problems (malformed request, unsupported
	// API); nil = the standard logger.
	Logf func(format string, args ...any)
	// BrokerConfigs are reported by DescribeConfigs for this broker's
	// resource (Kafka config names -> values).
	BrokerConfigs map[string]string

	stats *counters // shared across restarts by Cluster; nil = private
}

// ServerStats are cumulative wire-server counters (a snapshot value).
type ServerStats struct {
	SendfileBytes int64 // record bytes sent with sendfile(2) (zero copy)
	SendfileCalls int64 // sendfile(2) system calls that moved bytes
	CopyBytes     int64 // record bytes copied through user space (pread + write)
	// Requests counts requests by API name (kmsg.NameForKey, e.g. "Produce", "Fetch").
	Requests map[string]int64
}

const maxAPIKey = 100

type counters struct {
	sendfileBytes atomic.Int64
	sendfileCalls atomic.Int64
	copyBytes     atomic.Int64
	requests      [maxAPIKey]atomic.Int64
	producerID    atomic.Int64 // last producer id handed out by InitProducerId
}

// newCounters returns zeroed counters whose producer ids start at the wall
// clock in µs, so ids handed out by InitProducerId stay unique across
// broker and cluster restarts (the partitions keep producer state).
func newCounters() *counters {
	c := new(counters)
	c.producerID.Store(time.Now().UnixMicro())
	return c
}

// labelsFor is the pprof label set of the goroutine handling req: role=produce for
// Produce, fetch-serve for Fetch and OffsetForLeaderEpoch (the replica protocol), admin else.
func (s *Server) labelsFor(req kmsg.Request) context.Context {
	switch req.(type) {
	case *kmsg.ProduceRequest:
		return s.labelsProduce
	case *kmsg.FetchRequest, *kmsg.OffsetForLeaderEpochRequest:
		return s.labelsFetch
	}
	return s.labelsOther
}

func (c *counters) snapshot() ServerStats {
	st := ServerStats{
		SendfileBytes: c.sendfileBytes.Load(),
		SendfileCalls: c.sendfileCalls.Load(),
		CopyBytes:     c.copyBytes.Load(),
		Requests:      map[string]int64{},
	}
	for k := range c.requests {
		if n := c.requests[k].Load(); n > 0 {
			st.Requests[kmsg.NameForKey(int16(k))] += n
		}
	}
	return st
}

// Server is one broker's Kafka protocol listener: one goroutine per
// connection reads a request, handles it and writes its response before
// reading the next (responses in request order, as Kafka's muted channels).
//
// Serve, Close, Pause, Resume and Stats may be called concurrently.
type Server struct {
	cfg   ServerConfig
	ln    net.Listener
	stats *counters

	labelsProduce context.Context
	labelsFetch   context.Context
	labelsOther   context.Context

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup

	// paused holds a channel while the server is paused (closed by Resume);
	// nil when running. Read lock-free on every request.
	paused atomic.Pointer[chan struct{}]

	mu struct {
		sync.Mutex
		conns map[*conn]struct{}
	}
}

// NewServer returns a server that will accept on ln once Serve is called.
func NewServer(cfg ServerConfig, ln net.Listener) *Server {
	if cfg.SocketRequestMaxBytes <= 0 {
		cfg.SocketRequestMaxBytes = DefaultSocketRequestMaxBytes
	}
	if cfg.NumPartitions <= 0 {
		cfg.NumPartitions = 1
	}
	if cfg.Logf == nil {
		cfg.Logf = stdlog.Printf
	}
	s := &Server{cfg: cfg, ln: ln, stats: cfg.stats, done: make(chan struct{})}
	if s.stats == nil {
		s.stats = newCounters()
	}
	id := strconv.Itoa(int(cfg.BrokerID))
	bg := context.Background()
	s.labelsProduce = pprof.WithLabels(bg, pprof.Labels("broker", id, "role", "produce"))
	s.labelsFetch = pprof.WithLabels(bg, pprof.Labels("broker", id, "role", "fetch-serve"))
	s.labelsOther = pprof.WithLabels(bg, pprof.Labels("broker", id, "role", "admin"))
	s.mu.conns = map[*conn]struct{}{}
	return s
}

// Addr is the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stats returns the cumulative counters.
func (s *Server) Stats() ServerStats { return s.stats.snapshot() }

// Serve accepts connections until Close; it returns nil after Close. An
// accept error that passes (out of file descriptors, a connection reset
// before it was accepted, no buffer space) is logged and retried after a
// backoff of 5 ms doubling up to 1 s, as a broker keeps serving the
// connections it has while it is out of descriptors; any other accept
// error ends Serve with that error.
func (s *Server) Serve() error {
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return nil
			default:
			}
			if !transientAcceptError(err) {
				return fmt.Errorf("broker %d: accept: %w", s.cfg.BrokerID, err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.cfg.Logf("netfetch: broker %d: accept: %v (retrying in %v)", s.cfg.BrokerID, err, backoff)
			t := time.NewTimer(backoff)
			select {
			case <-s.done:
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		backoff = 0
		tc, ok := nc.(*net.TCPConn)
		if !ok {
			nc.Close()
			continue
		}
		c, err := newConn(s, tc)
		if err != nil {
			s.cfg.Logf("netfetch: broker %d: %v", s.cfg.BrokerID, err)
			tc.Close()
			continue
		}
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			tc.Close()
			return nil
		default:
		}
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// transientAcceptError reports whether an accept error can pass: a timeout,
// or a shortage (file descriptors, buffers, memory) or a connection aborted
// by the peer before it was accepted.
func transientAcceptError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Close closes the listener and every connection abruptly (in-flight
// requests are abandoned) and waits for the connection goroutines to end.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		close(s.done)
		err = s.ln.Close()
		for c := range s.mu.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
	return err
}

// Pause stops answering: connections stay open, no further request is
// handled and no response (not even of a long poll that completes
// meanwhile) is written until Resume (like a SIGSTOPped broker).
func (s *Server) Pause() {
	s.mu.Lock()
	if s.paused.Load() == nil {
		ch := make(chan struct{})
		s.paused.Store(&ch)
	}
	s.mu.Unlock()
}

// Resume undoes Pause.
func (s *Server) Resume() {
	s.mu.Lock()
	if ch := s.paused.Load(); ch != nil {
		close(*ch)
		s.paused.Store(nil)
	}
	s.mu.Unlock()
}

// waitUnpaused blocks while the server is paused; false = server closed.
func (s *Server) waitUnpaused() bool {
	ch := s.paused.Load()
	if ch == nil {
		return true
	}
	select {
	case <-*ch:
		return true
	case <-s.done:
		return false
	}
}

// conn is one client connection, owned by its serve goroutine.
type conn struct {
	s   *Server
	nc  *net.TCPConn
	raw syscall.RawConn
	br  *bufio.Reader
	ctx context.Context // canceled when the connection ends

	req   []byte // reused request body buffer
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
	produceResp  *kmsg.ProduceResponse
}

// requestFor returns the request object to decode a request of key into:
// the connection's reused one for Fetch and Produce, a new one otherwise.
func (c *conn) requestFor(key int16) kmsg.Request {
	switch key {
	case 1:
		if c.fetchReq == nil {
			c.fetchReq = kmsg.NewPtrFetchRequest()
		}
		topics := c.fetchReq.Topics[:0]
		*c.fetchReq = kmsg.FetchRequest{Topics: topics}
		return c.fetchReq
	case 0:
		if c.produceReq == nil {
			c.produceReq = kmsg.NewPtrProduceRequest()
		}
		topics := c.produceReq.Topics[:0]
		*c.produceReq = kmsg.ProduceRequest{Topics: topics}
		return c.produceReq
	}
	return kmsg.RequestForKey(key)
}

func newConn(s *Server, tc *net.TCPConn) (*conn, error) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("syscall conn: %w", err)
	}
	return &conn{s: s, nc: tc, raw: raw, br: bufio.NewReaderSize(newSockReader(tc), 64<<10)}, nil
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
		c.nc.Close()
		s.mu.Lock()
		delete(s.mu.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	go func() { // end long polls when the server closes
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		body, err := c.readRequest()
		if err != nil {
			if !peerGone(err) {
				s.cfg.Logf("netfetch: broker %d: closing connection from %s: %v", s.cfg.BrokerID, c.nc.RemoteAddr(), err)
			}
			return
		}
		if !s.waitUnpaused() {
			return
		}
		if err := c.handle(body); err != nil {
			// Every reason is logged (a bad request, a response that could not be built or
			// read from the log) except the peer or the server going away.
			if !peerGone(err) {
				s.cfg.Logf("netfetch: broker %d: closing connection from %s: %v", s.cfg.BrokerID, c.nc.RemoteAddr(), err)
			}
			return
		}
		if cap(c.req) > 8<<20 { // do not pin a huge buffer after one large request
			// (nor through the reused produce objects, whose records alias it)
			c.req, c.produceReq, c.produceParts = nil, nil, nil
		}
	}
}

// readRequest reads one size-prefixed request. The buffer grows only as
// bytes actually arrive (a lying size prefix cannot make it allocate more
// than was sent, plus 1 MiB).
func (c *conn) readRequest() ([]byte, error) {
	var szb [4]byte
	if _, err := io.ReadFull(c.br, szb[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(szb[:]))
	if size < 8 {
		return nil, closef("request size %d is smaller than a request header (8 bytes)", size)
	}
	if size > c.s.cfg.SocketRequestMaxBytes {
		return nil, closef("request size %d exceeds socket.request.max.bytes %d", size, c.s.cfg.SocketRequestMaxBytes)
	}
	n := int(size)
	buf := c.req[:0]
	const step = 1 << 20
	for len(buf) < n {
		want := min(n, len(buf)+step)
		if cap(buf) < want {
			nb := make([]byte, len(buf), min(n, max(want, 2*cap(buf))))
			copy(nb, buf)
			buf = nb
		}
		got := len(buf)
		buf = buf[:want]
		if _, err := io.ReadFull(c.br, buf[got:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("reading %d-byte request body: %w", n, err)
		}
	}
	c.req = buf
	return buf, nil
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
	if cid := r.UnsafeNullableString(); cid != nil {
		h.clientID = *cid
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
		kmsg.SkipTags(&r)
		if err := r.Complete(); err != nil {
			return h, nil, nil, fmt.Errorf("request header tagged fields truncated: %w", err)
		}
	}
	return h, req, r.Src, nil
}

func (c *conn) handle(body []byte) error {
	h, req, rest, err := parseHeaderWith(body, c.requestFor)
	if err != nil {
		return closef("%v", err)
	}
	if h.key >= 0 && int(h.key) < maxAPIKey {
		c.s.stats.requests[h.key].Add(1)
	}
	if h.key == 18 { // ApiVersions: answered even for versions we do not support
		return c.handleAPIVersions(h, req, rest)
	}
	vr, ok := supported(h.key)
	if !ok || req == nil {
		return closef("unsupported API key %d (%s) version %d from client %q", h.key, kmsg.NameForKey(h.key), h.version, h.clientID)
	}
	if h.version < vr.min || h.version > vr.max {
		return closef("unsupported %s version %d (supported %d..%d) from client %q", kmsg.NameForKey(h.key), h.version, vr.min, vr.max, h.clientID)
	}
	if err := req.ReadFrom(rest); err != nil {
		return closef("malformed %s v%d request from client %q: %v", kmsg.NameForKey(h.key), h.version, h.clientID, err)
	}
	var resp kmsg.Response
	pprof.SetGoroutineLabels(c.s.labelsFor(req))
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		resp, err = c.handleProduce(r)
	case *kmsg.FetchRequest:
		return c.handleFetch(h, r)
	case *kmsg.ListOffsetsRequest:
		resp, err = c.handleListOffsets(r)
	case *kmsg.MetadataRequest:
		resp, err = c.handleMetadata(r)
	case *kmsg.CreateTopicsRequest:
		resp, err = c.handleCreateTopics(r)
	case *kmsg.InitProducerIDRequest:
		resp, err = c.handleInitProducerID(r)
	case *kmsg.OffsetForLeaderEpochRequest:
		resp, err = c.handleOffsetForLeaderEpoch(r)
	case *kmsg.DescribeConfigsRequest:
		resp, err = c.handleDescribeConfigs(r)
	default:
		return closef("BUG: no handler for supported API key %d", h.key)
	}
	if err != nil {
		return err
	}
	if resp == nil { // acks=0 produce: no response at all
		return nil
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
	countSocketWrite(len(buf))
	if _, err := c.nc.Write(buf); err != nil {
		return fmt.Errorf("writing %s response: %w", kmsg.NameForKey(h.key), err)
	}
	return nil
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
