package netfetch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/internal/kafkatest"
)

// startServer serves a broker-less wire server (enough for ApiVersions and for reading
// requests) with cfg on an ephemeral loopback port; it is closed at cleanup.
func startServer(t *testing.T, cfg ServerConfig) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cfg, ln)
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv
}

// TestSlowlorisClosedAfterReadTimeout: a client that sends a request one byte at a time is
// closed once isrbench.request.read.timeout.ms has passed since its first byte, before it
// could finish; a client that sends the same request at once is answered.
func TestSlowlorisClosedAfterReadTimeout(t *testing.T) {
	logs := kafkatest.NewLogSink()
	srv := startServer(t, ServerConfig{Logf: logs.Logf, Limits: ConnLimits{RequestReadTimeout: 300 * time.Millisecond}})
	addr := srv.Addr().String()
	if !kafkatest.Answered(t, addr) {
		t.Fatal("a prompt ApiVersions request was not answered")
	}

	frame := kafkatest.APIVersionsFrame() // 50-odd bytes: at one byte per 40 ms, 2 s to send
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closed := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1)) // the server answers nothing: this returns when it closes
		closed <- err
	}()
	tick := time.NewTicker(40 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	var readErr error
loop:
	for sent < len(frame) {
		select {
		case readErr = <-closed:
			break loop
		case <-tick.C:
			if _, err := c.Write(frame[sent : sent+1]); err != nil {
				readErr = <-closed
				break loop
			}
			sent++
		}
	}
	if sent == len(frame) {
		readErr = <-closed
		t.Fatalf("the whole %d-byte request went through at one byte per 40 ms (read: %v), want the connection closed after 300 ms", len(frame), readErr)
	}
	if readErr == nil {
		t.Fatal("read a response byte, want the connection closed")
	}
	line := logs.WaitFor(t, "closing connection")
	if !strings.Contains(line, "not received within isrbench.request.read.timeout.ms (300 ms)") {
		t.Errorf("log %q, want the read timeout named", line)
	}
	if st := srv.ConnStats(); st.ReadTimeouts != 1 {
		t.Errorf("ReadTimeouts %d, want 1", st.ReadTimeouts)
	}
}

// TestIdleConnectionClosed: a connection with no request for connections.max.idle.ms is
// closed (without a log line: it is normal); one that keeps sending requests is not.
func TestIdleConnectionClosed(t *testing.T) {
	logs := kafkatest.NewLogSink()
	const maxIdle = time.Second
	srv := startServer(t, ServerConfig{Logf: logs.Logf, Limits: ConnLimits{ConnectionsMaxIdle: maxIdle}})
	addr := srv.Addr().String()

	idle := kafkatest.Dial(t, addr)
	busy := kafkatest.Dial(t, addr)
	closed := make(chan error, 1)
	go func() {
		_, err := idle.Conn.Read(make([]byte, 1))
		closed <- err
	}()
	// busy sends requests one after the other for over twice the idle time; each is answered
	// (back to back, not paced: a loaded machine may serve a timer late by more than maxIdle).
	for start := time.Now(); time.Since(start) < 2*maxIdle+maxIdle/2; {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		busy.RoundTrip(req, kmsg.NewPtrApiVersionsResponse())
	}
	select {
	case err := <-closed:
		if err == nil {
			t.Fatal("the idle connection got a byte, want it closed")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the idle connection is still open after 20 s")
	}
	st := srv.ConnStats()
	if st.IdleClosed != 1 || st.Open != 1 {
		t.Errorf("IdleClosed %d Open %d, want 1 and 1 (the busy connection)", st.IdleClosed, st.Open)
	}
	if lines := logs.Lines(); len(lines) != 0 {
		t.Errorf("logged %q, want nothing for an idle close", lines)
	}
}

// heapObjectBytes is the heap held by live and not yet swept objects after a GC.
func heapObjectBytes() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestHalfSentRequestsStayWithinQueuedMaxRequestBytes: 40 connections each announce a 4 MiB
// request and send all of it but its last byte. The request buffers the server holds never pass
// queued.max.request.bytes (8 MiB, checked by the pool's high-water mark and by the heap),
// the connections over it wait, a small request on another connection is still answered,
// and when the read timeout passes every half-sent request is closed and its memory released.
func TestHalfSentRequestsStayWithinQueuedMaxRequestBytes(t *testing.T) {
	const (
		conns  = 40
		budget = 8 << 20
		size   = 4 << 20
		sent   = size - 1
	)
	logs := kafkatest.NewLogSink()
	waits := make(chan struct{}, conns*4)
	srv := startServer(t, ServerConfig{
		Logf: logs.Logf, SocketRequestMaxBytes: size,
		Limits:       ConnLimits{QueuedMaxRequestBytes: budget, RequestReadTimeout: 5 * time.Second},
		onMemoryWait: func() { waits <- struct{}{} },
	})
	addr := srv.Addr().String()
	payload := make([]byte, 4+sent)
	binary.BigEndian.PutUint32(payload, size)
	copy(payload[4:], []byte{0, 0, 0, 0, 0, 0, 0, 1}) // Produce v0 header start; never completed
	before := heapObjectBytes()                       // after the payload: only the server's holdings count
	var wg sync.WaitGroup
	cs := make([]net.Conn, conns)
	for i := range cs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
		defer c.Close()
		wg.Add(1)
		go func() { // the write may block once the server stops reading: do not wait for it
			defer wg.Done()
			c.Write(payload)
		}()
	}
	// All but at most two connections (8 MiB hold two whole 4 MiB buffers) end up waiting
	// for the pool.
	for i := 0; i < conns-budget/size; i++ {
		select {
		case <-waits:
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d connections waited for the pool in 20 s; stats %+v", i, conns, srv.ConnStats())
		}
	}
	st := srv.ConnStats()
	if st.MemoryPeak > budget || st.MemoryUsed > budget || st.MemoryLimit != budget {
		t.Fatalf("pool used %d peak %d limit %d, want at most %d", st.MemoryUsed, st.MemoryPeak, st.MemoryLimit, budget)
	}
	if st.MemoryUsed < budget/2 {
		t.Errorf("pool used %d: the half-sent requests should hold most of the %d-byte budget", st.MemoryUsed, budget)
	}
	// The heap holds the pool's buffers plus fixed per-connection costs (the 64 KiB read
	// buffers of both ends), not 40 x 4 MiB; the slack covers what goroutines of earlier
	// tests still allocate.
	grown := heapObjectBytes() - before
	if bound := int64(budget + 2*conns*readBufferSize + 8<<20); grown > bound {
		t.Errorf("heap grew %d bytes with %d half-sent requests, want at most %d (pool %d + read buffers + slack)", grown, conns, bound, budget)
	}
	if !kafkatest.Answered(t, addr) {
		t.Error("a small request was not answered while the pool was spent")
	}

	// The read timeout closes them all; the pool is empty again.
	for i, c := range cs {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection %d: read %v, want it closed by the read timeout", i, err)
		}
	}
	wg.Wait()
	st = srv.ConnStats()
	if st.MemoryHeld != 0 || st.MemoryUsed > budget || st.MemoryPeak > budget || st.ReadTimeouts != conns {
		t.Errorf("after the timeouts: pool held %d, used %d (free for reuse), peak %d, read timeouts %d; want 0 held, at most %d used, %d timeouts",
			st.MemoryHeld, st.MemoryUsed, st.MemoryPeak, st.ReadTimeouts, budget, conns)
	}
	line := logs.WaitFor(t, "queued.max.request.bytes")
	if !strings.Contains(line, "did not fit queued.max.request.bytes 8388608") {
		t.Errorf("log %q, want the pool named", line)
	}
}

// TestRequestLargerThanPoolIsRefused: with queued.max.request.bytes unbounded (-1) a large
// request is read; with a pool smaller than the request the connection is closed at once,
// naming the setting.
func TestRequestLargerThanPoolIsRefused(t *testing.T) {
	logs := kafkatest.NewLogSink()
	srv := startServer(t, ServerConfig{Logf: logs.Logf, SocketRequestMaxBytes: 4 << 20, Limits: ConnLimits{QueuedMaxRequestBytes: 1 << 20}})
	rc := kafkatest.Dial(t, srv.Addr().String())
	var sz [4]byte
	binary.BigEndian.PutUint32(sz[:], 2<<20)
	rc.Conn.Write(sz[:])
	rc.ExpectClosed()
	if line := logs.WaitFor(t, "closing connection"); !strings.Contains(line, "request size 2097152 exceeds queued.max.request.bytes 1048576") {
		t.Errorf("log %q", line)
	}
	if err := (ConnLimits{QueuedMaxRequestBytes: 1 << 20}).Check(4 << 20); err == nil || !strings.Contains(err.Error(), "allowed -1 (unbounded) or at least 4194304") {
		t.Errorf("Check: %v, want Kafka's rule against socket.request.max.bytes", err)
	}
	if err := (ConnLimits{QueuedMaxRequestBytes: -1}).Check(4 << 20); err != nil {
		t.Errorf("Check(-1): %v", err)
	}
}

// TestMaxConnectionsPerIPAndPerBroker: max.connections.per.ip counts connections per client
// address (127.0.0.2 is another client than 127.0.0.1); max.connections counts them all.
// A connection over either is closed at once with a log line naming the bound; closing one
// makes room again.
func TestMaxConnectionsPerIPAndPerBroker(t *testing.T) {
	logs := kafkatest.NewLogSink()
	done := make(chan struct{}, 16)
	srv := startServer(t, ServerConfig{Logf: logs.Logf, Limits: ConnLimits{MaxConnections: 3, MaxConnectionsPerIP: 2},
		onConnDone: func() { done <- struct{}{} }})
	addr := srv.Addr().String()
	dial := func(src string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		return d.Dial("tcp", addr)
	}
	dialFrom := func(src string) *kafkatest.Client {
		c, err := dial(src)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return kafkatest.New(t, c)
	}
	// refused: the connection is closed at once (maybe before connect returned).
	refused := func(src string) {
		t.Helper()
		c, err := dial(src)
		if errors.Is(err, syscall.ECONNRESET) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		rc := kafkatest.New(t, c)
		rc.Conn.Write(kafkatest.APIVersionsFrame())
		rc.ExpectClosed()
	}
	ok := func(rc *kafkatest.Client) {
		t.Helper()
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		rc.RoundTrip(req, kmsg.NewPtrApiVersionsResponse())
	}
	a1, a2 := dialFrom("127.0.0.1"), dialFrom("127.0.0.1")
	ok(a1)
	ok(a2)
	refused("127.0.0.1")
	if line := logs.WaitFor(t, "at once"); !strings.Contains(line, "2 connections open from 127.0.0.1, max.connections.per.ip 2") {
		t.Errorf("log %q", line)
	}
	b1 := dialFrom("127.0.0.2")
	ok(b1)
	refused("127.0.0.2")
	if st := srv.ConnStats(); st.Open != 3 || st.Refused != 2 || st.Limit != 3 {
		t.Errorf("stats %+v, want 3 open, 2 refused, limit 3", st)
	}
	// The second refusal came within a second of the first: counted, not logged.
	n := len(logs.Lines())
	if n != 1 {
		t.Errorf("%d log lines, want 1 (refusals are logged at most once a second)", n)
	}
	// a1 leaves: its address has room again (once the server has seen it go).
	a1.Conn.Close() // (refused connections never had a serve loop: this is the first done)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not see a closed connection go in 20 s")
	}
	if st := srv.ConnStats(); st.Open != 2 {
		t.Fatalf("open connections %d after a close, want 2", st.Open)
	}
	ok(dialFrom("127.0.0.1"))
}

func TestFDShare(t *testing.T) {
	for _, tc := range []struct{ nofile, servers, head, guaranteed, shared int64 }{
		{1024, 3, 256, 128, 384},
		{20000, 3, 5000, 2500, 7500},
		{3000, 3, 750, 375, 1125},
		{1 << 20, 3, 1 << 18, 131072, 393216},
		{100, 1, 50, 25, 25},
		{4, 8, 2, 1, 0},
	} {
		got := fdShareOf(tc.nofile, tc.servers)
		if got.Headroom != tc.head || got.Guaranteed != tc.guaranteed || got.Shared != tc.shared {
			t.Errorf("fdShareOf(%d, %d) = %+v, want headroom %d, guaranteed %d, shared %d", tc.nofile, tc.servers, got, tc.head, tc.guaranteed, tc.shared)
		}
	}
}

// TestReplicaCapacity: the replicas a process may host are the shared part of its file
// descriptors (a broker's guaranteed connections are never theirs), and FilesForReplicas is
// the least file limit that hosts a given number.
func TestReplicaCapacity(t *testing.T) {
	for _, tc := range []struct{ nofile, servers, replicas int64 }{
		{20000, 3, math.MaxInt64}, // 7500 shared: the logs' files fit
		{20000, 1, math.MaxInt64},
		{3000, 3, 1125}, // too few for the logs' files: one per replica
		{1 << 20, 3, math.MaxInt64},
	} {
		if got := fdShareOf(tc.nofile, tc.servers).ReplicaCapacity(); got != tc.replicas {
			t.Errorf("fdShareOf(%d, %d).ReplicaCapacity() = %d, want %d", tc.nofile, tc.servers, got, tc.replicas)
		}
	}
	for _, replicas := range []int64{1, 18, 7500, 7501, 30000, 1 << 20} {
		for _, servers := range []int64{1, 3, 8} {
			n := int64(FilesForReplicas(replicas, servers))
			if fdShareOf(n, servers).ReplicaCapacity() < replicas || n > max(1024, min(replicas, LogFiles)*8/3+16) {
				t.Errorf("FilesForReplicas(%d, %d) = %d: capacity %d there, want at least %d from about %d files", replicas, servers, n,
					fdShareOf(n, servers).ReplicaCapacity(), replicas, replicas*8/3)
			}
		}
	}
	capacity, limit := ReplicaCapacity(3)
	if want := fdShareOf(noFile(), 3).ReplicaCapacity(); capacity != want || !strings.Contains(limit, fmt.Sprintf("RLIMIT_NOFILE %d", noFile())) {
		t.Errorf("ReplicaCapacity(3) = %d, %q; want %d and the limit named", capacity, limit, want)
	}
	fl, err := RaiseFileLimit(3)
	after, _ := ReplicaCapacity(3)
	if err != nil || fl.To != uint64(noFile()) || fl.To < fl.From || fl.Replicas != after || after < capacity ||
		!strings.Contains(fl.String(), "does not bound the partition replicas") {
		t.Errorf("RaiseFileLimit(3) = %+v (%s), %v", fl, fl, err)
	}
}
