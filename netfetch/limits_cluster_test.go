package netfetch_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/internal/kafkatest"
	"github.com/isrbench/isrbench/netfetch"
)

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
	frame := kafkatest.APIVersionsFrame()
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

	logs := kafkatest.NewLogSink()
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.Logf = logs.Logf })
	share := netfetch.FDShareOf(netfetch.NoFile(), 3) // the cluster's 3 servers register as they start serving
	if share.NoFile != nofile {
		t.Fatalf("share %+v, want RLIMIT_NOFILE %d", share, nofile)
	}

	flood0 := startFlood(t, c.Addr(0), flood)
	st := c.Server(0).ConnStats()
	t.Logf("flood of %d on broker 0: %d answered, %d closed; broker 0 %+v; %d descriptors open of %d", flood, flood0.answered, flood0.closed, st, openFDs(t), nofile)
	if want := share.MaxPerServer(); int64(flood0.answered) != want || flood0.answered+flood0.closed != flood || st.Open != want || st.Refused != int64(flood0.closed) {
		t.Errorf("broker 0 answered %d and closed %d, stats %+v; want exactly its guaranteed and the shared share, %d", flood0.answered, flood0.closed, st, want)
	}
	for _, id := range []int32{1, 2} {
		if !kafkatest.Answered(t, c.Addr(id)) {
			t.Errorf("broker %d did not answer during the flood of broker 0", id)
		}
	}
	if kafkatest.Answered(t, c.Addr(0)) {
		t.Error("broker 0 answered a connection over its share")
	}
	if line := logs.WaitFor(t, "at once"); !strings.Contains(line, "guaranteed share of file descriptors (375) is used and the shared 1125 are taken (RLIMIT_NOFILE 3000 - headroom 750, half split over 3 brokers") {
		t.Errorf("log %q, want the share named", line)
	}
	// A flood of broker 1 now gets its guaranteed share only: the shared one is broker 0's.
	flood1 := startFlood(t, c.Addr(1), 1000)
	if int64(flood1.answered) != share.Guaranteed {
		t.Errorf("broker 1 answered %d of 1000 with the shared share taken, want its guaranteed %d", flood1.answered, share.Guaranteed)
	}
	if !kafkatest.Answered(t, c.Addr(2)) {
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
	c := clustertest.Start(t, 1, func(cfg *cluster.Config) {
		cfg.SocketRequestMaxBytes = pool
		cfg.Limits.QueuedMaxRequestBytes = pool
	})
	// max.message.bytes above the largest batch, so that only the pool bounds the request.
	if err := c.CreateTopic("big", 1, 1, map[string]string{"max.message.bytes": "8388608"}); err != nil {
		t.Fatal(err)
	}
	rc := kafkatest.Dial(t, c.Addr(0))
	var next int64
	for _, size := range []int{100 << 10, 3 << 20, 10, 1 << 20, pool - 300, 70 << 10} {
		batch := records.AppendBatch(nil, 0, 0, time.Now().UnixMilli(), []records.Record{{Value: make([]byte, size)}})
		resp := kafkatest.NewProduceResp()
		rc.RoundTrip(kafkatest.NewProduce("big", 1, batch), resp)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != next {
			t.Fatalf("%d-byte record: error %d base offset %d, want 0 and %d", size, p.ErrorCode, p.BaseOffset, next)
		}
		next++
	}
	srv := c.Server(0)
	if st := srv.ConnStats(); st.MemoryPeak > pool || st.MemoryWaits != 0 {
		t.Errorf("pool %+v: want a peak within %d and no waits", st, pool)
	}
	srv.Close() // waits for the connection to end
	if st := srv.ConnStats(); st.MemoryHeld != 0 || st.MemoryUsed != 0 {
		t.Fatalf("pool after close: %+v, want nothing held or kept", st)
	}
}
