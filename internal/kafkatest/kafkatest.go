package kafkatest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/records"
)

// Client speaks the Kafka framing directly, for wire-level tests: one request at a time
// from the test's goroutine.
type Client struct {
	t    testing.TB
	Conn net.Conn      // the connection (closed at cleanup)
	R    *bufio.Reader // reads Conn
	corr int32
}

// Dial connects to the Kafka listener at addr (20 s deadline for everything after).
func Dial(t testing.TB, addr string) *Client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return New(t, c)
}

// New returns a Client on the open connection c.
func New(t testing.TB, c net.Conn) *Client {
	return &Client{t: t, Conn: c, R: bufio.NewReader(c)}
}

// Send writes req with request header v1/v2 and returns its correlation id.
func (r *Client) Send(req kmsg.Request) int32 {
	r.corr++
	b := []byte{0, 0, 0, 0}
	b = kbin.AppendInt16(b, req.Key())
	b = kbin.AppendInt16(b, req.GetVersion())
	b = kbin.AppendInt32(b, r.corr)
	b = kbin.AppendString(b, "raw-test")
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := r.Conn.Write(b); err != nil {
		r.t.Fatal(err)
	}
	return r.corr
}

// Recv reads one response frame and returns its body after the correlation id.
func (r *Client) Recv() (int32, []byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r.R, sz[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(r.R, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// RoundTrip sends req and reads its response into resp, failing the test on any error.
func (r *Client) RoundTrip(req kmsg.Request, resp kmsg.Response) {
	r.t.Helper()
	corr := r.Send(req)
	got, body, err := r.Recv()
	if err != nil {
		r.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if got != corr {
		r.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 {
		rd := kbin.Reader{Src: body}
		kmsg.SkipTags(&rd)
		body = rd.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("%s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
}

// ExpectClosed asserts the server closes the connection without answering.
func (r *Client) ExpectClosed() {
	r.t.Helper()
	r.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := r.Recv()
	if err == nil {
		r.t.Fatal("got a response, want the connection closed")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatal("connection still open after 10 s, want it closed")
	}
}

// Batch is one uncompressed RecordBatch at base offset base with one record ("v").
func Batch(base int64) []byte {
	return records.AppendBatch(nil, base, 0, time.Now().UnixMilli(), []records.Record{{Value: []byte("v")}})
}

// NewProduce is a Produce v9 request of batch to partition 0 of topic with acks.
func NewProduce(topic string, acks int16, batch []byte) *kmsg.ProduceRequest {
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.Acks = acks
	p.TimeoutMillis = 10000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch
	pt.Partitions = append(pt.Partitions, pp)
	p.Topics = append(p.Topics, pt)
	return p
}

// NewProduceResp is an empty Produce response to read one into.
func NewProduceResp() *kmsg.ProduceResponse { return kmsg.NewPtrProduceResponse() }

// APIVersionsFrame is a size-prefixed ApiVersions v3 request.
func APIVersionsFrame() []byte {
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

// Answered sends an ApiVersions request on a new connection to addr and reports whether it
// was answered (false: the connection was closed without an answer).
func Answered(t *testing.T, addr string) bool {
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
	if _, err := c.Write(APIVersionsFrame()); err != nil {
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

// LogSink collects a server's log lines (give Logf as its Logf) and signals each one.
// Safe for concurrent use.
type LogSink struct {
	mu    sync.Mutex
	lines []string
	ch    chan string
}

// NewLogSink returns an empty sink.
func NewLogSink() *LogSink { return &LogSink{ch: make(chan string, 1<<16)} }

// Logf records one line.
func (l *LogSink) Logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	select {
	case l.ch <- line:
	default:
	}
}

// WaitFor returns the first line logged that contains want, failing after 20 s.
func (l *LogSink) WaitFor(t *testing.T, want string) string {
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

// Lines returns the lines logged so far.
func (l *LogSink) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// WaitFor polls cond every few milliseconds until it holds or the deadline passes.
func WaitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}
