package netfetch

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/netip"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/core/txn"
)

// DefaultSocketRequestMaxBytes is socket.request.max.bytes' default (100 MiB).
const DefaultSocketRequestMaxBytes = 100 << 20

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
	// Pending, if set, reports whether broker id runs but has not yet applied its
	// leadership of topic-partition (of the topic incarnation topicID) in leaderEpoch, so
	// that it cannot take produce requests for it yet (the embedded cluster asks its
	// broker: broker.Leads). Metadata
	// does not send clients to such a leader (see handleMetadata). nil: no leader is
	// pending; a broker that does not run is not pending either (clients learn of it by
	// its connection failing, until the controller fences it).
	Pending func(id int32, topic string, topicID controller.TopicID, partition, leaderEpoch int32) bool
	// ZeroCopy is isrbench.zero.copy (default true): Fetch records are sent
	// with sendfile(2) from the segment file; false = pread into a buffer + write.
	ZeroCopy bool
	// ZeroCopyMinBytes is isrbench.zero.copy.min.bytes: with ZeroCopy, a
	// partition's records smaller than this are copied into the response
	// instead (pread), which costs less than a sendfile call below a few
	// pages; 0 sends every slice with sendfile.
	ZeroCopyMinBytes int64
	// ReadBeforeWait is isrbench.socket.read.when.ready=false (the ablation): every wait
	// for a request is preceded by a read(2) that finds the socket empty (EAGAIN), as Go's
	// net.Conn reads. The default (false) waits for readability at once after a read that
	// emptied the socket (readready.go).
	ReadBeforeWait bool
	// AnswerOnWake is isrbench.produce.answer.inline=false (the ablation): an acks=all
	// produce is answered by its connection's goroutine, woken by the HW advance that
	// completes it. The default (false) answers it from the completing goroutine
	// (produceinline.go).
	AnswerOnWake bool
	// WakeBeforeResponse is isrbench.produce.wake.after.response=false (the setting's
	// default): an acks=0/1 produce's appends wake the followers' parked fetches before its
	// response is written. False here writes the response first, as Kafka does (00_produce.go).
	WakeBeforeResponse bool
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
	// Groups is this broker's group coordinator, built, started and closed by the caller
	// (the cluster); the server routes the group APIs to it. nil: those APIs answer
	// COORDINATOR_NOT_AVAILABLE, and FindCoordinator locates groups with group.DefaultConfig.
	Groups *group.Coordinator
	// Txn is the transaction coordinator (core/txn) the server answers the transaction APIs
	// with; the server closes it. Nil with a Broker and a Controller: the server builds one
	// from TxnConfig that writes markers to partitions this broker leads only.
	Txn       *txn.Coordinator
	TxnConfig txn.Config
	// VerifyTxn routes KIP-890's produce-side verification to a transactional id's
	// coordinator (the embedded cluster: the leader of its __transaction_state partition);
	// nil: this server's own coordinator (VerifyTxnPartitions). Used only while the Broker's
	// transaction.partition.verification.enable is true (Kafka's default).
	VerifyTxn TxnVerifier
	// Limits bound the connections, their idle time, the time to send a request and the
	// memory of requests being read (zero fields = defaults, see ConnLimits).
	Limits ConnLimits

	// ListenerName and Security are the name and security of the server's listener ln (the
	// one the broker registers; zero: PLAINTEXT). Listeners are the broker's other
	// listeners, served by Serve and closed by Close (security.go).
	ListenerName string
	Security     Security
	Listeners    []Listener

	// Counters are the wire-server counters this server adds to: several servers (an
	// embedded cluster's brokers, across restarts) may share one; nil = its own.
	Counters *Counters
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
	// TLSCopyBytes is the part of CopyBytes sent on TLS connections: with zero copy on,
	// bytes that would have been sent with sendfile but for TLS.
	TLSCopyBytes int64
	// IncrementalFetches counts Fetch requests served on an incremental fetch session
	// (KIP-227); FetchPartitionsOmitted the session partitions their responses left out
	// (nothing new for them).
	IncrementalFetches     int64
	FetchPartitionsOmitted int64
	// ProducesAnsweredInline counts acks=all produces answered by the goroutine that
	// completed them (isrbench.produce.answer.inline).
	ProducesAnsweredInline int64
	// Requests counts requests by API name (kmsg.NameForKey, e.g. "Produce", "Fetch").
	Requests map[string]int64
}

const maxAPIKey = 100

type counters struct {
	sendfileBytes atomic.Int64
	sendfileCalls atomic.Int64
	copyBytes     atomic.Int64
	tlsCopyBytes  atomic.Int64 // the part of copyBytes copied because the connection is TLS
	incremental   atomic.Int64
	omitted       atomic.Int64
	inline        atomic.Int64 // ProducesAnsweredInline
	requests      [maxAPIKey]atomic.Int64
	producerID    atomic.Int64 // last producer id handed out by InitProducerId
	cost          costCounters // Cost's (cost.go)
}

// Counters are wire-server counters that servers given them in ServerConfig.Counters add
// to. Safe for concurrent use.
type Counters struct{ c *counters }

// NewCounters returns zeroed counters (producer ids start at the wall clock, see newCounters).
func NewCounters() *Counters { return &Counters{c: newCounters()} }

// NextProducerID hands out the next producer id of the servers sharing these counters
// (InitProducerId, idempotent and transactional alike).
func (c *Counters) NextProducerID() int64 { return c.c.nextProducerID() }

func (c *counters) nextProducerID() int64 { return c.producerID.Add(1) }

// Snapshot returns the counters' current values.
func (c *Counters) Snapshot() ServerStats { return c.c.snapshot() }

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
		TLSCopyBytes:  c.tlsCopyBytes.Load(),
		Requests:      map[string]int64{},

		IncrementalFetches:     c.incremental.Load(),
		FetchPartitionsOmitted: c.omitted.Load(),
		ProducesAnsweredInline: c.inline.Load(),
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
	groups *group.Coordinator // ServerConfig.Groups: the caller's, nil without one
	txns   *txn.Coordinator   // nil without a Broker and a Controller
	// verifyTxn asks the coordinator (ServerConfig.VerifyTxn or VerifyTxnPartitions) when
	// the broker says a batch needs it (transaction.partition.verification.enable,
	// broker.TxnVerificationNeeded).
	verifyTxn TxnVerifier
	// onTxnVerified, if set, is called after a produce's partition passed its verification,
	// before its append (tests: a marker in between).
	onTxnVerified atomic.Pointer[func(txn.TP)]
	// onProduceAnswered, if set, is called once a produce request is handled (its response
	// written, if any), before the followers' wake-ups it owes (tests).
	onProduceAnswered atomic.Pointer[func()]

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
	if cfg.Logf == nil {
		cfg.Logf = stdlog.Printf
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	s := &Server{cfg: cfg, ln: ln, done: make(chan struct{}), groups: cfg.Groups,
		mem: newMemoryPool(cfg.Limits.QueuedMaxRequestBytes), now: time.Now}
	if cfg.Counters != nil {
		s.stats = cfg.Counters.c
	} else {
		s.stats = newCounters()
	}
	if cfg.FetchSessionCacheSlots > 0 {
		s.sessions = newFetchSessions(cfg.FetchSessionCacheSlots, time.Now, cfg.Broker.NewFetchSession)
	}
	id := strconv.Itoa(int(cfg.BrokerID))
	bg := context.Background()
	s.labelsProduce = pprof.WithLabels(bg, pprof.Labels("broker", id, "role", "produce"))
	s.labelsFetch = pprof.WithLabels(bg, pprof.Labels("broker", id, "role", "fetch-serve"))
	s.labelsOther = pprof.WithLabels(bg, pprof.Labels("broker", id, "role", "admin"))
	s.mu.conns = map[*conn]struct{}{}
	if cfg.Broker != nil && cfg.Controller != nil {
		s.txns = cfg.Txn
		if s.txns == nil {
			tcfg := cfg.TxnConfig
			if tcfg.ProducerIDs == nil {
				tcfg.ProducerIDs = s.stats.nextProducerID
			}
			if tcfg.Markers == nil {
				tcfg.Markers = s.localMarkers
			}
			if tcfg.OffsetsTopicNumPartitions <= 0 {
				tcfg.OffsetsTopicNumPartitions = s.groupConfig().OffsetsTopicNumPartitions
			}
			s.txns = txn.NewCoordinator(tcfg, cfg.Broker, cfg.Controller, nil)
			s.txns.Start()
		}
	}
	s.verifyTxn = cfg.VerifyTxn
	if s.verifyTxn == nil {
		s.verifyTxn = s.VerifyTxnPartitions
	}
	s.mu.adm.perIP = map[netip.Addr]int{}
	if ln != nil {
		s.register() // in the process's file-descriptor shares from now until Close
	}
	return s
}

// Groups returns the group coordinator the server was given (ServerConfig.Groups), or nil.
func (s *Server) Groups() *group.Coordinator { return s.groups }

// groupConfig is the group coordinator's config, group.DefaultConfig without one.
func (s *Server) groupConfig() group.Config {
	if s.groups != nil {
		return s.groups.Config()
	}
	return group.DefaultConfig()
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
// error ends Serve with that error. Each listener has its own loop, so an
// accept error of one broker never stops another's.
//
// A connection over max.connections, max.connections.per.ip or the
// broker's file-descriptor share (see FDShare) is closed as soon as it is
// accepted, with a log line (at most one a second) naming the bound.
//
// Serve also accepts on ServerConfig.Listeners, each on its own goroutine (an accept error
// that ends one is logged).
func (s *Server) Serve() error {
	s.register()
	for _, l := range s.cfg.Listeners {
		lis := &listener{name: l.Name, sec: l.Security, advertise: l.Advertise}
		s.wg.Add(1)
		go func(ln net.Listener) {
			defer s.wg.Done()
			if err := s.acceptLoop(ln, lis); err != nil {
				s.cfg.Logf("netfetch: broker %d: listener %s: %v", s.cfg.BrokerID, l.Name, err)
			}
		}(l.Ln)
	}
	return s.acceptLoop(s.ln, &listener{name: s.cfg.ListenerName, sec: s.cfg.Security})
}

// acceptLoop accepts connections on ln, a listener with lis's security, until Close.
func (s *Server) acceptLoop(ln net.Listener, lis *listener) error {
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
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
		c, err := newConn(s, tc, ip, lis)
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
		for _, l := range s.cfg.Listeners {
			l.Ln.Close()
		}
		for c := range s.mu.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		if s.txns != nil {
			s.txns.Close()
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
