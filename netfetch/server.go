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
	"net/netip"
	"os"
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
	"github.com/isrbench/isrbench/core/group"
)

// DefaultSocketRequestMaxBytes is socket.request.max.bytes' default (100 MiB).
const DefaultSocketRequestMaxBytes = 100 << 20

// DefaultMessageMaxBytes is message.max.bytes' default (1 MiB + 12 bytes of batch overhead).
const DefaultMessageMaxBytes = 1048588

// DefaultZeroCopyMinBytes is isrbench.zero.copy.min.bytes' default: record
// slices below it are copied into the response rather than sent with
// sendfile (see BenchmarkFetchSmall for where the two cross).
const DefaultZeroCopyMinBytes = 32 << 10

// ServerConfig configures one broker's Kafka wire server. A value: NewServer
// copies it.
type ServerConfig struct {
	BrokerID   int32
	Broker     *broker.Broker
	Controller *controller.Controller
	// ZeroCopy is isrbench.zero.copy (default true): Fetch records are sent
	// with sendfile(2) from the segment file; false = pread into a buffer + write.
	ZeroCopy bool
	// ZeroCopyMinBytes is isrbench.zero.copy.min.bytes: with ZeroCopy, a
	// partition's records smaller than this are copied into the response
	// instead (pread), which costs less than a sendfile call below a few
	// pages; 0 sends every slice with sendfile.
	ZeroCopyMinBytes int64
	// FetchSessionCacheSlots is max.incremental.fetch.session.cache.slots: how many
	// incremental fetch sessions (KIP-227) the broker keeps; 0 = none, every fetch is full.
	FetchSessionCacheSlots int
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
	// BrokerConfigs are the broker's static configs (what it was started with, where it
	// differs from Kafka's default or was set explicitly), reported by DescribeConfigs as
	// STATIC_BROKER_CONFIG; the others are Kafka's defaults (DEFAULT_CONFIG) unless a
	// dynamic config overrides them.
	BrokerConfigs map[string]string
	// MessageMaxBytes is message.max.bytes (default 1048588): the largest record batch a
	// Produce may carry (MESSAGE_TOO_LARGE); a topic's max.message.bytes overrides it.
	MessageMaxBytes int32
	// Group configures the group coordinator (group.* and offsets.* configs); a server with
	// a Broker and a Controller runs one.
	Group group.Config
	// Limits bound the connections, their idle time, the time to send a request and the
	// memory of requests being read (zero fields = defaults, see ConnLimits).
	Limits ConnLimits

	stats *counters // shared across restarts by Cluster; nil = private
	// onMemoryWait, if set, is called when a request starts waiting for
	// queued.max.request.bytes; onConnDone when a connection's accounting is
	// released (tests).
	onMemoryWait, onConnDone func()
}

// ServerStats are cumulative wire-server counters (a snapshot value).
type ServerStats struct {
	SendfileBytes int64 // record bytes sent with sendfile(2) (zero copy)
	SendfileCalls int64 // sendfile(2) system calls that moved bytes
	CopyBytes     int64 // record bytes copied through user space (pread + write)
	// IncrementalFetches counts Fetch requests served on an incremental fetch session
	// (KIP-227); FetchPartitionsOmitted the session partitions their responses left out
	// (nothing new for them).
	IncrementalFetches     int64
	FetchPartitionsOmitted int64
	// Requests counts requests by API name (kmsg.NameForKey, e.g. "Produce", "Fetch").
	Requests map[string]int64
}

const maxAPIKey = 100

type counters struct {
	sendfileBytes atomic.Int64
	sendfileCalls atomic.Int64
	copyBytes     atomic.Int64
	incremental   atomic.Int64
	omitted       atomic.Int64
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

// labelsFor is the pprof label set of the goroutine handling a request of API a: its
// registered role (produce, fetch-serve for Fetch and the replica protocol, admin else).
func (s *Server) labelsFor(a *api) context.Context {
	switch a.role {
	case roleProduce:
		return s.labelsProduce
	case roleFetchServe:
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

		IncrementalFetches:     c.incremental.Load(),
		FetchPartitionsOmitted: c.omitted.Load(),
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
	cfg    ServerConfig
	ln     net.Listener
	stats  *counters
	groups *group.Coordinator // nil without a Broker and a Controller

	labelsProduce context.Context
	labelsFetch   context.Context
	labelsOther   context.Context

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup

	// paused holds a channel while the server is paused (closed by Resume);
	// nil when running. Read lock-free on every request.
	paused atomic.Pointer[chan struct{}]

	sessions     *fetchSessions // nil without FetchSessionCacheSlots
	mem          *memoryPool    // queued.max.request.bytes
	idleClosed   atomic.Int64
	readTimeouts atomic.Int64
	now          func() time.Time // the refusal log's clock

	mu struct {
		sync.Mutex
		conns map[*conn]struct{}
		adm   admission
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
	if cfg.MessageMaxBytes <= 0 {
		cfg.MessageMaxBytes = DefaultMessageMaxBytes
	}
	if cfg.Logf == nil {
		cfg.Logf = stdlog.Printf
	}
	cfg.Limits = cfg.Limits.withDefaults()
	s := &Server{cfg: cfg, ln: ln, stats: cfg.stats, done: make(chan struct{}),
		mem: newMemoryPool(cfg.Limits.QueuedMaxRequestBytes), now: time.Now}
	if s.stats == nil {
		s.stats = newCounters()
	}
	if cfg.FetchSessionCacheSlots > 0 {
		s.sessions = newFetchSessions(cfg.FetchSessionCacheSlots, time.Now)
	}
	id := strconv.Itoa(int(cfg.BrokerID))
	bg := context.Background()
	s.labelsProduce = pprof.WithLabels(bg, pprof.Labels("broker", id, "role", "produce"))
	s.labelsFetch = pprof.WithLabels(bg, pprof.Labels("broker", id, "role", "fetch-serve"))
	s.labelsOther = pprof.WithLabels(bg, pprof.Labels("broker", id, "role", "admin"))
	s.mu.conns = map[*conn]struct{}{}
	if cfg.Broker != nil && cfg.Controller != nil {
		gcfg := cfg.Group
		if gcfg.Logf == nil {
			gcfg.Logf = cfg.Logf
		}
		s.groups = group.NewCoordinator(gcfg, cfg.Broker, cfg.Controller, nil)
		s.groups.Start()
	}
	s.mu.adm.perIP = map[netip.Addr]int{}
	if ln != nil {
		s.register() // in the process's file-descriptor shares from now until Close
	}
	return s
}

// Groups returns the server's group coordinator (nil when the server has no broker).
func (s *Server) Groups() *group.Coordinator { return s.groups }

// Addr is the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stats returns the cumulative counters.
func (s *Server) Stats() ServerStats { return s.stats.snapshot() }

// Serve accepts connections until Close; it returns nil after Close. An
// accept error that passes (out of file descriptors, a connection reset
// before it was accepted, no buffer space) is logged and retried after a
// backoff of 5 ms doubling up to 1 s, as a broker keeps serving the
// connections it has while it is out of descriptors; any other accept
// error ends Serve with that error. Each listener has its own loop, so an
// accept error of one broker never stops another's.
//
// A connection over max.connections, max.connections.per.ip or the
// broker's file-descriptor share (see FDShare) is closed as soon as it is
// accepted, with a log line (at most one a second) naming the bound.
func (s *Server) Serve() error {
	s.register()
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
		var ip netip.Addr
		if ta, ok := tc.RemoteAddr().(*net.TCPAddr); ok {
			ip = ta.AddrPort().Addr().Unmap()
		}
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			tc.Close()
			return nil
		default:
		}
		if why := s.admit(ip); why != "" {
			s.refused(tc.RemoteAddr().String(), why)
			s.mu.Unlock()
			tc.SetLinger(0) // no TIME_WAIT left behind by a flood
			tc.Close()
			continue
		}
		s.mu.Unlock()
		c, err := newConn(s, tc, ip)
		if err != nil {
			s.cfg.Logf("netfetch: broker %d: %v", s.cfg.BrokerID, err)
			tc.Close()
			s.mu.Lock()
			s.leave(ip)
			s.mu.Unlock()
			continue
		}
		s.mu.Lock()
		select {
		case <-s.done:
			s.leave(ip)
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
		if s.groups != nil {
			s.groups.Close() // answers parked JoinGroup/SyncGroup requests
		}
	})
	s.wg.Wait()
	s.unregister()
	s.mem.close()
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
	ip  netip.Addr      // the client's address (max.connections.per.ip)

	// rdl is the read deadline set on nc now (zero = none).
	rdl time.Time
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
	produceResp  *kmsg.ProduceResponse
	// limits caches topics' max.message.bytes and segment size (00_produce.go limitsFor).
	limits   map[string]topicLimits
	limitsAt time.Time
}

func newConn(s *Server, tc *net.TCPConn, ip netip.Addr) (*conn, error) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("syscall conn: %w", err)
	}
	return &conn{s: s, nc: tc, raw: raw, br: bufio.NewReaderSize(newSockReader(tc), readBufferSize), ip: ip}, nil
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
	for {
		body, err := c.readRequest()
		if err != nil {
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
		if c.peeked > 0 {
			c.br.Discard(c.peeked)
			c.peeked = 0
		} else if _, _, held := s.mem.usage(); c.held > maxRetainedRequestBuffer || held > s.mem.limit/2 {
			// Do not pin a large buffer after one large request, nor keep one while
			// requests being read need the pool (the reused produce objects go too:
			// their records alias it).
			c.dropReq()
		}
	}
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

// handle decodes one request and answers it through the API registered for its key
// (registry.go; each NN_name.go registers its key, versions and handler).
func (c *conn) handle(body []byte) error {
	h, req, rest, err := parseHeaderWith(body, c.requestFor)
	if err != nil {
		return closef("%v", err)
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
