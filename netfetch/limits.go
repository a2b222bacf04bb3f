package netfetch

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/isrbench/isrbench/core/log"
)

// Connection bounds of the wire server. Every broker's Server applies them to the clients
// that connect to it; the file-descriptor share and the process-wide connection count are
// shared by every Server of the process (all brokers of `isrbench serve` or of an embedded
// run live in one process and share its RLIMIT_NOFILE).

// Defaults of ConnLimits (Kafka's where Kafka has the setting).
const (
	// DefaultMaxConnections is max.connections' default (Integer.MAX_VALUE).
	DefaultMaxConnections = math.MaxInt32
	// DefaultMaxConnectionsPerIP is max.connections.per.ip's default (Integer.MAX_VALUE).
	DefaultMaxConnectionsPerIP = math.MaxInt32
	// DefaultConnectionsMaxIdle is connections.max.idle.ms' default (600000 ms).
	DefaultConnectionsMaxIdle = 10 * time.Minute
	// DefaultRequestReadTimeout is isrbench.request.read.timeout.ms' default: 30000 ms, the
	// default request.timeout.ms of Kafka's clients (a client gives up on a request after
	// it, so a request that takes longer to arrive is not worth reading).
	DefaultRequestReadTimeout = 30 * time.Second
	// DefaultQueuedMaxRequestBytes is isrbench's default queued.max.request.bytes per
	// broker: 104857600 bytes (100 MiB, socket.request.max.bytes' default, the smallest
	// budget Kafka accepts). Kafka's own default is -1 (unbounded).
	DefaultQueuedMaxRequestBytes = 100 << 20
)

// ConnLimits bounds what the clients of one broker's wire server can hold: connections,
// idle time, the time to send a request, and the memory of requests being read. Zero fields
// take the defaults above. A value: NewServer copies it.
type ConnLimits struct {
	// MaxConnections is max.connections (default 2147483647): connections this broker
	// accepts at once; a connection over it is closed as soon as it is accepted. The
	// process's file-descriptor shares (see FDShare) bound it further.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip (default 2147483647): connections from
	// one client IP address at once; further ones are closed as soon as they are accepted.
	MaxConnectionsPerIP int
	// ConnectionsMaxIdle is connections.max.idle.ms (default 600000 ms): a connection on
	// which no request has started for this long after its last response (or since it was
	// accepted) is closed. Negative = never.
	ConnectionsMaxIdle time.Duration
	// RequestReadTimeout is isrbench.request.read.timeout.ms (default 30000 ms; Kafka has no
	// such setting, its request.timeout.ms bounds the same wait on the client side): once
	// the first byte of a request has arrived, the whole request (size prefix and body) must
	// arrive within this time, including any wait for queued.max.request.bytes, or the
	// connection is closed (a client sending one byte per second cannot hold it). Negative =
	// never.
	RequestReadTimeout time.Duration
	// QueuedMaxRequestBytes is queued.max.request.bytes (isrbench default 104857600;
	// Kafka's -1 = unbounded is allowed): the bytes of request buffers the broker's
	// connections may hold at once. A request that fits the connection's 64 KiB read
	// buffer needs none; a larger one reserves its buffer as it grows and, when the budget
	// is spent, waits (without reading, so TCP pushes back on the client) until memory is
	// released or its RequestReadTimeout passes, then the connection is closed. Kafka
	// requires it to be -1 or at least socket.request.max.bytes (see Check).
	QueuedMaxRequestBytes int64
}

// DefaultConnLimits returns every bound at its default.
func DefaultConnLimits() ConnLimits {
	return ConnLimits{
		MaxConnections:        DefaultMaxConnections,
		MaxConnectionsPerIP:   DefaultMaxConnectionsPerIP,
		ConnectionsMaxIdle:    DefaultConnectionsMaxIdle,
		RequestReadTimeout:    DefaultRequestReadTimeout,
		QueuedMaxRequestBytes: DefaultQueuedMaxRequestBytes,
	}
}

// WithDefaults returns l with its zero fields filled with the defaults.
func (l ConnLimits) WithDefaults() ConnLimits {
	d := DefaultConnLimits()
	if l.MaxConnections <= 0 {
		l.MaxConnections = d.MaxConnections
	}
	if l.MaxConnectionsPerIP <= 0 {
		l.MaxConnectionsPerIP = d.MaxConnectionsPerIP
	}
	if l.ConnectionsMaxIdle == 0 {
		l.ConnectionsMaxIdle = d.ConnectionsMaxIdle
	}
	if l.RequestReadTimeout == 0 {
		l.RequestReadTimeout = d.RequestReadTimeout
	}
	if l.QueuedMaxRequestBytes == 0 {
		l.QueuedMaxRequestBytes = d.QueuedMaxRequestBytes
	}
	return l
}

// Check applies Kafka's cross-setting rule: queued.max.request.bytes is -1 (unbounded) or
// at least socket.request.max.bytes, so that the largest request allowed can be read.
func (l ConnLimits) Check(socketRequestMaxBytes int32) error {
	l = l.WithDefaults()
	if socketRequestMaxBytes <= 0 {
		socketRequestMaxBytes = DefaultSocketRequestMaxBytes
	}
	if l.QueuedMaxRequestBytes > 0 && l.QueuedMaxRequestBytes < int64(socketRequestMaxBytes) {
		return fmt.Errorf("queued.max.request.bytes %d is smaller than socket.request.max.bytes %d; allowed -1 (unbounded) or at least %d",
			l.QueuedMaxRequestBytes, socketRequestMaxBytes, socketRequestMaxBytes)
	}
	return nil
}

// process is what every Server of the process shares: the client connections each serving
// Server holds, for the file-descriptor shares.
var process struct {
	mu    sync.Mutex
	conns map[*Server]int64 // Servers registered by Serve until Close, with their open connections
}

// FDShare describes how the file descriptors of this process (RLIMIT_NOFILE) are shared.
// A headroom is kept for everything else (listeners, replica fetcher and admin connections,
// the metadata log, index and checkpoint files open for a moment, the cache of sealed
// segment files). Half of the rest is split evenly between the serving Servers as their
// guaranteed share for client connections; the other half is shared, first come first
// served, by the connections beyond a broker's guaranteed share and by the segment files
// of the partition replicas the process hosts (at most LogFiles: see ReplicaCapacity). A broker may accept a connection while it holds less than its
// guaranteed share, or while the shared half has room: one broker's clients can take at
// most Guaranteed + Shared descriptors, and every other broker keeps its guaranteed share
// for its own.
type FDShare struct {
	NoFile     int64 // RLIMIT_NOFILE (soft limit)
	Headroom   int64 // max(min(256, NoFile/2), NoFile/4)
	Servers    int64 // Servers serving in this process (at least 1)
	Guaranteed int64 // (NoFile - Headroom) / 2 / Servers, at least 1: each Server's own
	Shared     int64 // NoFile - Headroom - Servers*Guaranteed: first come first served
}

// LogFiles is the most segment files the logs of the process keep open at once, whatever
// the replicas it hosts: its caches of active and sealed segments' files (core/log).
const LogFiles = log.ActiveFileCacheSize + log.SealedFileCacheSize

// ReplicaCapacity is the most partition replicas the brokers of the process may host (the
// controller refuses topics and partitions beyond it), so that hosting them never takes a
// broker's guaranteed connections: unbounded (math.MaxInt64) when the shared part holds
// the logs' open files (LogFiles; a replica keeps no descriptor of its own beyond them), else
// the shared part (each replica may then hold one, its active segment's file).
func (f FDShare) ReplicaCapacity() int64 {
	if f.Shared >= LogFiles {
		return math.MaxInt64
	}
	return f.Shared
}

// ReplicaCapacity returns how many partition replicas the given number of brokers of this
// process may host under its RLIMIT_NOFILE now (FDShare.ReplicaCapacity), and what bounds it,
// for an error message. For controller.Config.ReplicaCapacity.
func ReplicaCapacity(brokers int) (max int64, limit string) {
	share := fdShareOf(noFile(), int64(brokers))
	return share.ReplicaCapacity(), fmt.Sprintf("the file limit of this process (RLIMIT_NOFILE %d, shared by %d brokers: %d kept for sockets, checkpoints and indexes, %d for client connections, %d shared by client connections and segment files, which need %d to host any number of replicas)",
		share.NoFile, share.Servers, share.Headroom, share.Servers*share.Guaranteed, share.Shared, LogFiles)
}

// FilesForReplicas returns the smallest RLIMIT_NOFILE with which the given number of brokers
// of one process may host replicas partition replicas (the inverse of ReplicaCapacity).
func FilesForReplicas(replicas, brokers int64) uint64 {
	if replicas <= 0 {
		return 0
	}
	replicas = min(replicas, LogFiles) // past LogFiles, replicas share the logs' open files
	// ReplicaCapacity is about (NoFile - NoFile/4) / 2 = 3/8 NoFile past 1024 files.
	n := max(1024, replicas*8/3)
	for fdShareOf(n, brokers).ReplicaCapacity() < replicas {
		n++
	}
	return uint64(n)
}

// CurrentFDShare computes the share from the process's RLIMIT_NOFILE now.
func CurrentFDShare() FDShare {
	process.mu.Lock()
	n := int64(len(process.conns))
	process.mu.Unlock()
	return fdShareOf(noFile(), n)
}

// noFile is RLIMIT_NOFILE's soft limit (math.MaxInt64 if unlimited or unknown).
func noFile() int64 {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err == nil && r.Cur != unix.RLIM_INFINITY && r.Cur < math.MaxInt64 {
		return int64(r.Cur)
	}
	return math.MaxInt64
}

func fdShareOf(nofile, servers int64) FDShare {
	servers = max(servers, 1)
	head := max(min(256, nofile/2), nofile/4)
	budget := max(servers, nofile-head)
	g := max(1, budget/2/servers)
	return FDShare{NoFile: nofile, Headroom: head, Servers: servers, Guaranteed: g, Shared: budget - servers*g}
}

// MaxPerServer is the most one Server can hold: its guaranteed share and all the shared one.
func (f FDShare) MaxPerServer() int64 { return f.Guaranteed + f.Shared }

// register adds s to the process's Servers (from Serve); unregister (from Close, once its
// connections are gone) removes it.
func (s *Server) register() {
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.conns == nil {
		process.conns = map[*Server]int64{}
	}
	if _, ok := process.conns[s]; !ok {
		process.conns[s] = 0
	}
}

func (s *Server) unregister() {
	process.mu.Lock()
	delete(process.conns, s)
	process.mu.Unlock()
}

// fdRoom reports whether s may take one more descriptor for a client connection (and takes
// it), or why not.
func (s *Server) fdRoom() (bool, string) {
	process.mu.Lock()
	defer process.mu.Unlock()
	share := fdShareOf(noFile(), int64(len(process.conns)))
	mine := process.conns[s]
	var sharedUsed int64
	for _, n := range process.conns {
		sharedUsed += max(0, n-share.Guaranteed)
	}
	if mine >= share.Guaranteed && sharedUsed >= share.Shared {
		return false, fmt.Sprintf("%d connections open, the broker's guaranteed share of file descriptors (%d) is used and the shared %d are taken (RLIMIT_NOFILE %d - headroom %d, half split over %d brokers of this process)",
			mine, share.Guaranteed, share.Shared, share.NoFile, share.Headroom, share.Servers)
	}
	process.conns[s] = mine + 1
	return true, ""
}

func (s *Server) fdRelease() {
	process.mu.Lock()
	if _, ok := process.conns[s]; ok {
		process.conns[s]--
	}
	process.mu.Unlock()
}

// fdLimit is the most connections s could hold now: its guaranteed share and what the
// other Servers leave of the shared one.
func (s *Server) fdLimit() int64 {
	process.mu.Lock()
	defer process.mu.Unlock()
	share := fdShareOf(noFile(), max(1, int64(len(process.conns))))
	var othersShared int64
	for o, n := range process.conns {
		if o != s {
			othersShared += max(0, n-share.Guaranteed)
		}
	}
	return share.Guaranteed + max(0, share.Shared-othersShared)
}

// ConnStats are one broker's connection figures (a snapshot value).
type ConnStats struct {
	Open    int64 // connections open now
	Limit   int64 // the most Open could reach now: min(max.connections, the broker's FDShare room)
	Refused int64 // connections closed as soon as accepted (over a connection bound)
	// IdleClosed counts connections closed after connections.max.idle.ms without a request.
	IdleClosed int64
	// ReadTimeouts counts connections closed because a request did not arrive within
	// isrbench.request.read.timeout.ms (while being sent or waiting for memory).
	ReadTimeouts int64
	// MemoryUsed is the bytes of request buffers in the queued.max.request.bytes pool now,
	// held by connections or kept free for reuse (never more than MemoryLimit, the pool
	// size; -1 unbounded); MemoryHeld the part connections hold (Kafka's MemoryPoolUsed);
	// MemoryPeak the most MemoryUsed ever was.
	MemoryUsed, MemoryHeld, MemoryPeak, MemoryLimit int64
	// MemoryWaits counts the times a request waited for the pool.
	MemoryWaits int64
}

// errMemory: a request waited for queued.max.request.bytes until its read deadline.
type errMemory struct{ need, used, limit int64 }

func (e *errMemory) Error() string {
	return fmt.Sprintf("request buffer of %d more bytes did not fit queued.max.request.bytes %d (%d held by requests being read) within isrbench.request.read.timeout.ms",
		e.need, e.limit, e.used)
}

// errStopped: the server closed while a connection waited (not worth a log line).
var errStopped = fmt.Errorf("server closing: %w", net.ErrClosed)

// admission is one Server's connection accounting (guarded by Server.mu).
type admission struct {
	open    int64
	perIP   map[netip.Addr]int
	refused atomic.Int64
	// lastRefusalLog and refusedSinceLog rate-limit the refusal log to one line a second.
	lastRefusalLog  time.Time
	refusedSinceLog int64
}

// admit decides whether a new connection from ip may stay, under s.mu. It returns "" to
// admit it (and counts it) or the reason to close it.
func (s *Server) admit(ip netip.Addr) string {
	lim := s.cfg.Limits
	a := &s.mu.adm
	switch {
	case a.open >= int64(lim.MaxConnections):
		return fmt.Sprintf("%d connections open, max.connections %d", a.open, lim.MaxConnections)
	case a.perIP[ip] >= lim.MaxConnectionsPerIP:
		return fmt.Sprintf("%d connections open from %s, max.connections.per.ip %d", a.perIP[ip], ip, lim.MaxConnectionsPerIP)
	}
	if ok, why := s.fdRoom(); !ok {
		return why
	}
	a.open++
	a.perIP[ip]++
	return ""
}

// leave undoes admit's count for a connection from ip, under s.mu.
func (s *Server) leave(ip netip.Addr) {
	a := &s.mu.adm
	a.open--
	if a.perIP[ip]--; a.perIP[ip] <= 0 {
		delete(a.perIP, ip)
	}
	s.fdRelease()
}

// refused counts and logs (at most once a second, with the number left unlogged) a
// connection closed at accept, under s.mu.
func (s *Server) refused(remote, why string) {
	a := &s.mu.adm
	a.refused.Add(1)
	now := s.now()
	if !a.lastRefusalLog.IsZero() && now.Sub(a.lastRefusalLog) < time.Second {
		a.refusedSinceLog++
		return
	}
	more := ""
	if a.refusedSinceLog > 0 {
		more = fmt.Sprintf(" (and %d more refused since the last message)", a.refusedSinceLog)
	}
	a.lastRefusalLog, a.refusedSinceLog = now, 0
	s.cfg.Logf("netfetch: broker %d: closing connection from %s at once: %s%s", s.cfg.BrokerID, remote, why, more)
}

// ConnStats returns this broker's connection figures.
func (s *Server) ConnStats() ConnStats {
	s.mu.Lock()
	open := s.mu.adm.open
	s.mu.Unlock()
	used, peak, held := s.mem.usage()
	limit := s.mem.limit
	if limit == math.MaxInt64 {
		limit = -1
	}
	return ConnStats{
		Open:         open,
		Limit:        min(int64(s.cfg.Limits.MaxConnections), s.fdLimit()),
		Refused:      s.mu.adm.refused.Load(),
		IdleClosed:   s.idleClosed.Load(),
		ReadTimeouts: s.readTimeouts.Load(),
		MemoryUsed:   used,
		MemoryHeld:   held,
		MemoryPeak:   peak,
		MemoryLimit:  limit,
		MemoryWaits:  s.mem.waits.Load(),
	}
}
