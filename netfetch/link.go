package netfetch

import (
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/controller"
)

// LinkFault describes the replica link from a source (leader) broker to a
// fetching (follower) broker. The zero value is a healthy link. A value:
// SetLink copies it.
type LinkFault struct {
	// Latency is added once per direction per request: before the request
	// is written and before its response is read (RTT grows by 2*Latency).
	Latency time.Duration
	// Jitter adds a uniformly random [0, Jitter) to each Latency delay.
	Jitter time.Duration
	// BandwidthBytesPerSec caps each connection's throughput in each
	// direction with a token bucket (64 KiB burst); 0 = unlimited.
	BandwidthBytesPerSec int64
	// Down partitions the link: dials fail and reads/writes on existing
	// connections fail with ErrLinkDown.
	Down bool
}

func (f LinkFault) isZero() bool { return f == LinkFault{} }

// ErrLinkDown is returned by dials and I/O on a link set Down.
var ErrLinkDown = errors.New("netfetch: replica link is down (injected fault)")

// link is the state of one directed (source -> follower) replica link.
type link struct {
	fault atomic.Pointer[LinkFault] // nil = healthy (connections unwrapped)
	mu    sync.Mutex
	conns map[*fetchConn]struct{}
}

// links holds every link of a cluster; safe for concurrent use.
type links struct {
	mu sync.Mutex
	m  map[[2]int32]*link
}

func (ls *links) get(from, to int32) *link {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = map[[2]int32]*link{}
	}
	l := ls.m[[2]int32{from, to}]
	if l == nil {
		l = &link{conns: map[*fetchConn]struct{}{}}
		ls.m[[2]int32{from, to}] = l
	}
	return l
}

// set installs a fault. Connections are closed (the fetcher re-dials) when
// the link switches between healthy and faulty, so that healthy links use
// the bare TCP connection and faulty ones the wrapper, and when it goes Down.
func (ls *links) set(from, to int32, f LinkFault) {
	l := ls.get(from, to)
	var nf *LinkFault
	if !f.isZero() {
		nf = &f
	}
	old := l.fault.Swap(nf)
	if (old == nil) != (nf == nil) || f.Down {
		l.mu.Lock()
		for c := range l.conns {
			c.nc.Close()
		}
		l.mu.Unlock()
	}
}

// LinkFaults holds the faults of the replica links between a set of brokers (an embedded
// cluster's): transports made with NewFaultyTransport read them on every dial and
// connection. The zero value has no fault. Safe for concurrent use.
type LinkFaults struct{ ls links }

// Set injects f on the replica link from broker from (the source serving the data) to
// broker to (the follower fetching it); the zero LinkFault heals it. Switching between
// healthy and faulty closes that link's fetch connections, which the follower re-dials.
func (f *LinkFaults) Set(from, to int32, l LinkFault) { f.ls.set(from, to, l) }

// FaultyLink is one replica link with a fault (a value).
type FaultyLink struct {
	From, To int32 // the source (leader) serving the data, the follower fetching it
	Fault    LinkFault
}

// Faulty returns every link with a fault, sorted by (from, to).
func (f *LinkFaults) Faulty() []FaultyLink {
	f.ls.mu.Lock()
	keys := make([][2]int32, 0, len(f.ls.m))
	for k, l := range f.ls.m {
		if l.fault.Load() != nil {
			keys = append(keys, k)
		}
	}
	f.ls.mu.Unlock()
	slices.SortFunc(keys, func(a, b [2]int32) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	})
	out := make([]FaultyLink, 0, len(keys))
	for _, k := range keys {
		l := f.ls.get(k[0], k[1]).fault.Load()
		if l == nil {
			continue
		}
		out = append(out, FaultyLink{From: k[0], To: k[1], Fault: *l})
	}
	return out
}

// NewFaultyTransport returns a transport for broker self whose replica links take their
// faults from f; sessions false turns incremental fetch sessions off
// (isrbench.fetch.sessions=false: every replica fetch names every partition). Each replica
// request waits for its answer up to replica.socket.timeout.ms of s.
func NewFaultyTransport(self int32, ctrl *controller.Controller, f *LinkFaults, sessions bool, s config.Settings) *Transport {
	return &Transport{self: self, ctrl: ctrl, links: &f.ls, noSessions: !sessions, timeout: s.Ms("replica.socket.timeout.ms"), costs: new(costCounters)}
}

// faultConn delays, throttles or fails I/O of a replica fetch connection
// according to its link's current fault. Used by one fetcher goroutine
// (Read and Write are not called concurrently); Close may be called from
// any goroutine.
type faultConn struct {
	net.Conn
	l          *link
	closed     chan struct{}
	closeOnce  sync.Once
	afterWrite bool
	rnext      time.Time
	wnext      time.Time
}

func newFaultConn(c net.Conn, l *link) *faultConn {
	return &faultConn{Conn: c, l: l, closed: make(chan struct{})}
}

func (c *faultConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// wait sleeps d unless the connection is closed first.
func (c *faultConn) wait(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.closed:
		return net.ErrClosed
	}
}

func latency(f *LinkFault) time.Duration {
	d := f.Latency
	if f.Jitter > 0 {
		d += rand.N(f.Jitter)
	}
	return d
}

// pace advances the token-bucket cursor by n bytes and returns how long to wait (never
// negative: the burst allowance must not cancel a link's latency, to which the wait is added).
func pace(next *time.Time, n int, bw int64) time.Duration {
	if bw <= 0 || n <= 0 {
		return 0
	}
	now := time.Now()
	burst := time.Duration(int64(64<<10) * int64(time.Second) / bw)
	if next.Before(now.Add(-burst)) {
		*next = now.Add(-burst)
	}
	*next = next.Add(time.Duration(int64(n) * int64(time.Second) / bw))
	return max(next.Sub(now), 0)
}

func (c *faultConn) Write(p []byte) (int, error) {
	if f := c.l.fault.Load(); f != nil {
		if f.Down {
			return 0, ErrLinkDown
		}
		if err := c.wait(latency(f) + pace(&c.wnext, len(p), f.BandwidthBytesPerSec)); err != nil {
			return 0, err
		}
	}
	c.afterWrite = true
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if f := c.l.fault.Load(); f != nil {
		if f.Down {
			return 0, ErrLinkDown
		}
		var d time.Duration
		if n > 0 && c.afterWrite {
			c.afterWrite = false
			d = latency(f)
		}
		d += pace(&c.rnext, n, f.BandwidthBytesPerSec)
		if werr := c.wait(d); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}
