package netfetch

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/records"
)

// logSink collects a server's log lines and signals each one.
type logSink struct {
	mu    sync.Mutex
	lines []string
	ch    chan string
}

func newLogSink() *logSink { return &logSink{ch: make(chan string, 1<<16)} }

func (l *logSink) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	select {
	case l.ch <- line:
	default:
	}
}

// waitFor returns the first line logged that contains want, failing after 20 s.
func (l *logSink) waitFor(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line := <-l.ch:
			if strings.Contains(line, want) {
				return line
			}
		case <-timeout:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("no log line with %q in 20 s; logged %q", want, l.lines)
		}
	}
}

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

// apiVersionsFrame is a size-prefixed ApiVersions v3 request.
func apiVersionsFrame() []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName = "isrbench-limits-test"
	req.ClientSoftwareVersion = "1.0.0"
	b := []byte{0, 0, 0, 0}
	b = kbin.AppendInt16(b, 18)
	b = kbin.AppendInt16(b, 3)
	b = kbin.AppendInt32(b, 1)
	b = kbin.AppendString(b, "slow")
	b = append(b, 0)
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// answered sends an ApiVersions request on a new connection to addr and reports whether it
// was answered (false: the connection was closed without an answer).
func answered(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) { // closed at once, before connect returned
		return false
	}
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(apiVersionsFrame()); err != nil {
		return false
	}
	var sz [4]byte
	_, err = io.ReadFull(c, sz[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: neither answered nor closed in 20 s", addr)
	}
	return err == nil
}

// TestSlowlorisClosedAfterReadTimeout: a client that sends a request one byte at a time is
// closed once isrbench.request.read.timeout.ms has passed since its first byte, before it
// could finish; a client that sends the same request at once is answered.
func TestSlowlorisClosedAfterReadTimeout(t *testing.T) {
	logs := newLogSink()
	srv := startServer(t, ServerConfig{Logf: logs.logf, Limits: ConnLimits{RequestReadTimeout: 300 * time.Millisecond}})
	addr := srv.Addr().String()
	if !answered(t, addr) {
		t.Fatal("a prompt ApiVersions request was not answered")
	}

	frame := apiVersionsFrame() // 50-odd bytes: at one byte per 40 ms, 2 s to send
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
	line := logs.waitFor(t, "closing connection")
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
	logs := newLogSink()
	const maxIdle = time.Second
	srv := startServer(t, ServerConfig{Logf: logs.logf, Limits: ConnLimits{ConnectionsMaxIdle: maxIdle}})
	addr := srv.Addr().String()

	idle := dialRaw(t, addr)
	busy := dialRaw(t, addr)
	closed := make(chan error, 1)
	go func() {
		_, err := idle.c.Read(make([]byte, 1))
		closed <- err
	}()
	// busy sends requests one after the other for over twice the idle time; each is answered
	// (back to back, not paced: a loaded machine may serve a timer late by more than maxIdle).
	for start := time.Now(); time.Since(start) < 2*maxIdle+maxIdle/2; {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		busy.roundTrip(req, kmsg.NewPtrApiVersionsResponse())
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
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.lines) != 0 {
		t.Errorf("logged %q, want nothing for an idle close", logs.lines)
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
	logs := newLogSink()
	waits := make(chan struct{}, conns*4)
	srv := startServer(t, ServerConfig{
		Logf: logs.logf, SocketRequestMaxBytes: size,
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
	if !answered(t, addr) {
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
	line := logs.waitFor(t, "queued.max.request.bytes")
	if !strings.Contains(line, "did not fit queued.max.request.bytes 8388608") {
		t.Errorf("log %q, want the pool named", line)
	}
}

// TestRequestLargerThanPoolIsRefused: with queued.max.request.bytes unbounded (-1) a large
// request is read; with a pool smaller than the request the connection is closed at once,
// naming the setting.
func TestRequestLargerThanPoolIsRefused(t *testing.T) {
	logs := newLogSink()
	srv := startServer(t, ServerConfig{Logf: logs.logf, SocketRequestMaxBytes: 4 << 20, Limits: ConnLimits{QueuedMaxRequestBytes: 1 << 20}})
	rc := dialRaw(t, srv.Addr().String())
	var sz [4]byte
	binary.BigEndian.PutUint32(sz[:], 2<<20)
	rc.c.Write(sz[:])
	rc.expectClosed()
	if line := logs.waitFor(t, "closing connection"); !strings.Contains(line, "request size 2097152 exceeds queued.max.request.bytes 1048576") {
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
	logs := newLogSink()
	done := make(chan struct{}, 16)
	srv := startServer(t, ServerConfig{Logf: logs.logf, Limits: ConnLimits{MaxConnections: 3, MaxConnectionsPerIP: 2},
		onConnDone: func() { done <- struct{}{} }})
	addr := srv.Addr().String()
	dial := func(src string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		return d.Dial("tcp", addr)
	}
	dialFrom := func(src string) *rawClient {
		c, err := dial(src)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return &rawClient{t: t, c: c, br: bufio.NewReader(c)}
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
		rc := &rawClient{t: t, c: c, br: bufio.NewReader(c)}
		rc.c.Write(apiVersionsFrame())
		rc.expectClosed()
	}
	ok := func(rc *rawClient) {
		t.Helper()
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		rc.roundTrip(req, kmsg.NewPtrApiVersionsResponse())
	}
	a1, a2 := dialFrom("127.0.0.1"), dialFrom("127.0.0.1")
	ok(a1)
	ok(a2)
	refused("127.0.0.1")
	if line := logs.waitFor(t, "at once"); !strings.Contains(line, "2 connections open from 127.0.0.1, max.connections.per.ip 2") {
		t.Errorf("log %q", line)
	}
	b1 := dialFrom("127.0.0.2")
	ok(b1)
	refused("127.0.0.2")
	if st := srv.ConnStats(); st.Open != 3 || st.Refused != 2 || st.Limit != 3 {
		t.Errorf("stats %+v, want 3 open, 2 refused, limit 3", st)
	}
	// The second refusal came within a second of the first: counted, not logged.
	logs.mu.Lock()
	n := len(logs.lines)
	logs.mu.Unlock()
	if n != 1 {
		t.Errorf("%d log lines, want 1 (refusals are logged at most once a second)", n)
	}
	// a1 leaves: its address has room again (once the server has seen it go).
	a1.c.Close() // (refused connections never had a serve loop: this is the first done)
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

// floodEnv names the environment of the flood helper process: the address to flood and the
// number of connections.
const floodEnv = "ISRBENCH_TEST_FLOOD"

// TestFloodHelper is not a test: run by TestConnectionFloodLeavesOtherBrokersAccepting as a
// separate client process, it opens N connections to ADDR ($ISRBENCH_TEST_FLOOD="ADDR N"),
// sends ApiVersions on each, prints how many were answered and how many closed, and holds
// the connections until its stdin is closed.
func TestFloodHelper(t *testing.T) {
	spec := os.Getenv(floodEnv)
	if spec == "" {
		t.Skip("helper process of TestConnectionFloodLeavesOtherBrokersAccepting")
	}
	addr, ns, _ := strings.Cut(spec, " ")
	n, _ := strconv.Atoi(ns)
	frame := apiVersionsFrame()
	conns := make([]net.Conn, 0, n)
	ans, closed := 0, 0
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 20*time.Second)
		if errors.Is(err, syscall.ECONNRESET) { // closed before connect returned
			closed++
			continue
		}
		if err != nil {
			fmt.Printf("dial %d: %v\n", i, err)
			os.Exit(3)
		}
		c.SetDeadline(time.Now().Add(60 * time.Second))
		c.Write(frame) // a refused connection may already be reset: its read says so
		conns = append(conns, c)
	}
	for i, c := range conns {
		var sz [4]byte
		_, err := io.ReadFull(c, sz[:])
		var ne net.Error
		switch {
		case err == nil:
			ans++
			io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(sz[:])))
		case errors.As(err, &ne) && ne.Timeout():
			fmt.Printf("connection %d: neither answered nor closed\n", i)
			os.Exit(3)
		default:
			closed++
		}
	}
	fmt.Printf("answered=%d closed=%d\n", ans, closed)
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestConnectionFloodLeavesOtherBrokersAccepting: a client process opens 10,000 connections
// to broker 0 of a 3-broker cluster in a process whose RLIMIT_NOFILE is lowered to 3000 for
// the test (so that, unbounded, they would take every descriptor and every listener of the
// process would fail with EMFILE). Broker 0 takes its guaranteed and the shared
// file-descriptor share and closes the rest at once; brokers 1 and 2 keep accepting and
// answering; a second flood on broker 1 gets its guaranteed share and broker 2 still
// answers; the process keeps descriptors free.
func TestConnectionFloodLeavesOtherBrokersAccepting(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 10,000 connections")
	}
	const flood = 10000
	const nofile = 3000
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Cur < nofile {
		t.Skipf("RLIMIT_NOFILE %d is below the %d this test lowers it to", old.Cur, nofile)
	}
	lowered := old
	lowered.Cur = nofile
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })

	logs := newLogSink()
	c := testCluster(t, 3, func(cfg *ClusterConfig) { cfg.Logf = logs.logf })
	share := fdShareOf(noFile(), 3) // the cluster's 3 servers register as they start serving
	if share.NoFile != nofile {
		t.Fatalf("share %+v, want RLIMIT_NOFILE %d", share, nofile)
	}

	flood0 := startFlood(t, c.Addr(0), flood)
	st := c.nodes[0].srv.Load().ConnStats()
	t.Logf("flood of %d on broker 0: %d answered, %d closed; broker 0 %+v; %d descriptors open of %d", flood, flood0.answered, flood0.closed, st, openFDs(t), nofile)
	if want := share.MaxPerServer(); int64(flood0.answered) != want || flood0.answered+flood0.closed != flood || st.Open != want || st.Refused != int64(flood0.closed) {
		t.Errorf("broker 0 answered %d and closed %d, stats %+v; want exactly its guaranteed and the shared share, %d", flood0.answered, flood0.closed, st, want)
	}
	for _, id := range []int32{1, 2} {
		if !answered(t, c.Addr(id)) {
			t.Errorf("broker %d did not answer during the flood of broker 0", id)
		}
	}
	if answered(t, c.Addr(0)) {
		t.Error("broker 0 answered a connection over its share")
	}
	if line := logs.waitFor(t, "at once"); !strings.Contains(line, "guaranteed share of file descriptors (375) is used and the shared 1125 are taken (RLIMIT_NOFILE 3000 - headroom 750, half split over 3 brokers") {
		t.Errorf("log %q, want the share named", line)
	}
	// A flood of broker 1 now gets its guaranteed share only: the shared one is broker 0's.
	flood1 := startFlood(t, c.Addr(1), 1000)
	if int64(flood1.answered) != share.Guaranteed {
		t.Errorf("broker 1 answered %d of 1000 with the shared share taken, want its guaranteed %d", flood1.answered, share.Guaranteed)
	}
	if !answered(t, c.Addr(2)) {
		t.Error("broker 2 did not answer during the floods of brokers 0 and 1")
	}
	if n := openFDs(t); int64(n) > nofile-share.Headroom/2 {
		t.Errorf("%d descriptors open, want the headroom (%d of %d) mostly free", n, share.Headroom, nofile)
	}
}

type floodResult struct{ answered, closed int }

// startFlood runs the flood helper against addr with n connections, held until the test ends.
func startFlood(t *testing.T, addr string, n int) floodResult {
	t.Helper()
	helper := exec.Command(os.Args[0], "-test.run=^TestFloodHelper$", "-test.v=false")
	helper.Env = append(os.Environ(), floodEnv+"="+addr+" "+strconv.Itoa(n))
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		helper.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v (%q)", err, line)
	}
	var r floodResult
	if _, err := fmt.Sscanf(line, "answered=%d closed=%d", &r.answered, &r.closed); err != nil {
		t.Fatalf("helper said %q", line)
	}
	return r
}

// TestLargeProducesThroughThePool: produce requests larger than the read buffer, one as large
// as queued.max.request.bytes allows, and small ones in between, all decode from pool
// buffers, are appended, and leave nothing held once the connection closes.
func TestLargeProducesThroughThePool(t *testing.T) {
	const pool = 4 << 20
	c := testCluster(t, 1, func(cfg *ClusterConfig) {
		cfg.SocketRequestMaxBytes = pool
		cfg.Limits.QueuedMaxRequestBytes = pool
	})
	// max.message.bytes above the largest batch, so that only the pool bounds the request.
	if err := c.CreateTopic("big", 1, 1, map[string]string{"max.message.bytes": "8388608"}); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, c.Addr(0))
	var next int64
	for _, size := range []int{100 << 10, 3 << 20, 10, 1 << 20, pool - 300, 70 << 10} {
		batch := records.AppendBatch(nil, 0, 0, time.Now().UnixMilli(), []records.Record{{Value: make([]byte, size)}})
		resp := newProduceResp()
		rc.roundTrip(newProduce("big", 1, batch), resp)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != next {
			t.Fatalf("%d-byte record: error %d base offset %d, want 0 and %d", size, p.ErrorCode, p.BaseOffset, next)
		}
		next++
	}
	srv := c.nodes[0].srv.Load()
	if st := srv.ConnStats(); st.MemoryPeak > pool || st.MemoryWaits != 0 {
		t.Errorf("pool %+v: want a peak within %d and no waits", st, pool)
	}
	srv.Close() // waits for the connection to end
	if st := srv.ConnStats(); st.MemoryHeld != 0 || st.MemoryUsed != 0 {
		t.Fatalf("pool after close: %+v, want nothing held or kept", st)
	}
}
