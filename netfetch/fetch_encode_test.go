package netfetch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/vfs"
)

// segmentFile writes n batches to a file and returns it with the batch bytes.
func segmentFile(t testing.TB, n int) (*os.File, []byte) {
	t.Helper()
	var blob []byte
	for i := 0; i < n; i++ {
		blob = records.AppendBatch(blob, int64(i*3), 1, 1700000000000, []records.Record{
			{Key: []byte(fmt.Sprintf("k%d", i)), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 100+i)},
			{Value: []byte("second")}, {Value: []byte("third")},
		})
	}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(path, append(make([]byte, 7), blob...), 0o644); err != nil { // 7 junk bytes before: Pos must be honoured
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, blob
}

// fetchParts builds a three-partition, two-topic fetch result over f.
func fetchParts(f *os.File, blob []byte) ([]broker.FetchPartition, []topicSpan) {
	half := 0
	records.Split(blob, func(b []byte, h records.Header) error {
		if half == 0 {
			half = len(b)
		}
		return nil
	})
	parts := []broker.FetchPartition{
		{Topic: "alpha", Partition: 0, HighWatermark: 42, LastStableOffset: 42, LogStartOffsetOut: 0,
			Records: log.Slice{File: vfs.WrapOS(f), Pos: 7, Size: int64(len(blob)), FirstOffset: 0}, DivergingEpoch: -1, DivergingEndOffset: -1},
		{Topic: "alpha", Partition: 1, Err: fmt.Errorf("wrapped: %w", kerr.NotLeaderForPartition), DivergingEpoch: -1, DivergingEndOffset: -1},
		{Topic: "beta", Partition: 7, HighWatermark: 3, LastStableOffset: 3, LogStartOffsetOut: 0,
			Records: log.Slice{File: vfs.WrapOS(f), Pos: 7, Size: int64(half)}, DivergingEpoch: 4, DivergingEndOffset: 17},
	}
	spans := []topicSpan{{topic: "alpha", id: [16]byte{0xa}, start: 0, end: 2}, {topic: "beta", id: [16]byte{0xb}, start: 2, end: 3}}
	return parts, spans
}

// wire assembles what sendFetch puts on the wire, with records read by pread.
func wire(t testing.TB, e *fetchEncoder, parts []broker.FetchPartition) []byte {
	var out []byte
	prev := 0
	for i := range parts {
		out = append(out, e.buf[prev:e.marks[i]]...)
		prev = e.marks[i]
		if parts[i].Err == nil && parts[i].Records.Size > 0 {
			var err error
			if out, err = parts[i].Records.ReadAll(out); err != nil {
				t.Fatal(err)
			}
		}
	}
	return append(out, e.buf[prev:]...)
}

// decodeFetch decodes a framed Fetch response (size, correlation id, header tags, body).
func decodeFetch(t testing.TB, version int16, frame []byte, corr int32) *kmsg.FetchResponse {
	t.Helper()
	if got := int(binary.BigEndian.Uint32(frame)); got != len(frame)-4 {
		t.Fatalf("v%d: size prefix %d, frame has %d bytes after it", version, got, len(frame)-4)
	}
	if got := int32(binary.BigEndian.Uint32(frame[4:])); got != corr {
		t.Fatalf("v%d: correlation id %d, want %d", version, got, corr)
	}
	r := kbin.Reader{Src: frame[8:]}
	if version >= 12 {
		kmsg.SkipTags(&r)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	if err := resp.ReadFrom(r.Src); err != nil {
		t.Fatalf("v%d: kmsg cannot decode the hand-built response: %v", version, err)
	}
	return resp
}

func TestFetchEncoderDecodesWithKmsgAtEveryVersion(t *testing.T) {
	f, blob := segmentFile(t, 5)
	parts, spans := fetchParts(f, blob)
	for v := int16(4); v <= 13; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			var e fetchEncoder
			if err := e.encode(v, 12345, 0, 0, parts, spans); err != nil {
				t.Fatal(err)
			}
			resp := decodeFetch(t, v, wire(t, &e, parts), 12345)
			if v >= 13 { // topics by id (KIP-516)
				if len(resp.Topics) != 2 || resp.Topics[0].TopicID != spans[0].id || resp.Topics[1].TopicID != spans[1].id {
					t.Fatalf("topics = %+v", resp.Topics)
				}
			} else if len(resp.Topics) != 2 || resp.Topics[0].Topic != "alpha" || resp.Topics[1].Topic != "beta" {
				t.Fatalf("topics = %+v", resp.Topics)
			}
			a0, a1, b7 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1], resp.Topics[1].Partitions[0]
			if a0.Partition != 0 || a0.ErrorCode != 0 || a0.HighWatermark != 42 || a0.LastStableOffset != 42 {
				t.Errorf("alpha-0 = %+v", a0)
			}
			if !bytes.Equal(a0.RecordBatches, blob) {
				t.Errorf("alpha-0 records differ (%d bytes, want %d)", len(a0.RecordBatches), len(blob))
			}
			if a1.Partition != 1 || a1.ErrorCode != kerr.NotLeaderForPartition.Code || len(a1.RecordBatches) != 0 || a1.HighWatermark != -1 {
				t.Errorf("alpha-1 = %+v", a1)
			}
			if b7.Partition != 7 || !bytes.Equal(b7.RecordBatches, blob[:parts[2].Records.Size]) {
				t.Errorf("beta-7 = %+v", b7)
			}
			if v >= 12 && (b7.DivergingEpoch.Epoch != 4 || b7.DivergingEpoch.EndOffset != 17) {
				t.Errorf("beta-7 diverging epoch = %+v, want 4/17", b7.DivergingEpoch)
			}
			if v >= 12 && (a0.DivergingEpoch.Epoch != -1 || a0.DivergingEpoch.EndOffset != -1) {
				t.Errorf("alpha-0 diverging epoch = %+v, want none", a0.DivergingEpoch)
			}
			if v >= 11 && a0.PreferredReadReplica != -1 {
				t.Errorf("preferred read replica = %d", a0.PreferredReadReplica)
			}
			// The records must split into valid batches (what a consumer does).
			n := 0
			if err := records.Split(a0.RecordBatches, func([]byte, records.Header) error { n++; return nil }); err != nil || n != 5 {
				t.Errorf("records split: %d batches, %v", n, err)
			}
		})
	}
}

func TestFetchEncoderAllocatesNothing(t *testing.T) {
	f, blob := segmentFile(t, 3)
	parts, spans := fetchParts(f, blob)
	var e fetchEncoder
	if err := e.encode(12, 1, 0, 0, parts, spans); err != nil { // grow buffers once
		t.Fatal(err)
	}
	for _, v := range []int16{4, 11, 12, 13} {
		allocs := testing.AllocsPerRun(100, func() {
			if err := e.encode(v, 1, 0, 0, parts, spans); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("v%d: encode allocated %.1f times per response, want 0", v, allocs)
		}
	}
}

func TestFetchEncoderRejectsBadInput(t *testing.T) {
	var e fetchEncoder
	if err := e.encode(3, 1, 0, 0, nil, nil); err == nil {
		t.Error("v3 encoded, want error")
	}
	if err := e.encode(14, 1, 0, 0, nil, nil); err == nil {
		t.Error("v14 encoded, want error")
	}
	parts := []broker.FetchPartition{{Topic: "x", Records: log.Slice{Size: 10}}}
	if err := e.encode(12, 1, 0, 0, parts, []topicSpan{{topic: "x", start: 0, end: 1}}); err == nil {
		t.Error("slice without a file encoded, want error")
	}
}

// TestSendFetchZeroCopyAndCopy sends the same response over a real TCP
// connection with sendfile and with pread+write: the bytes must be
// identical and decode with kmsg, and the counters must say which path ran.
func TestSendFetchZeroCopyAndCopy(t *testing.T) {
	f, blob := segmentFile(t, 20)
	parts, spans := fetchParts(f, blob)
	var frames [][]byte
	for _, zc := range []bool{true, false} {
		srv := NewServer(ServerConfig{ZeroCopy: zc}, nil)
		a, b := tcpPair(t)
		c, err := newConn(srv, a, netip.Addr{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.fetch.enc.encode(12, 99, 0, 0, parts, spans); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- c.sendFetch(parts) }()
		frame := make([]byte, 4+c.fetch.enc.total)
		if _, err := io.ReadFull(b, frame); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		decodeFetch(t, 12, frame, 99)
		frames = append(frames, frame)
		st := srv.Stats()
		want := int64(len(blob)) + parts[2].Records.Size
		if zc && (st.SendfileBytes != want || st.CopyBytes != 0) {
			t.Errorf("zero copy: sendfile %d copy %d, want %d / 0", st.SendfileBytes, st.CopyBytes, want)
		}
		if !zc && (st.CopyBytes != want || st.SendfileBytes != 0) {
			t.Errorf("copy: sendfile %d copy %d, want 0 / %d", st.SendfileBytes, st.CopyBytes, want)
		}
	}
	if !bytes.Equal(frames[0], frames[1]) {
		t.Error("zero-copy and copy responses differ")
	}
}

func TestSendfileShortFileIsAnError(t *testing.T) {
	f, blob := segmentFile(t, 1)
	srv := NewServer(ServerConfig{ZeroCopy: true}, nil)
	a, b := tcpPair(t)
	go io.Copy(io.Discard, b)
	c, err := newConn(srv, a, netip.Addr{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	parts := []broker.FetchPartition{{Topic: "t", Records: log.Slice{File: vfs.WrapOS(f), Pos: 7, Size: int64(len(blob)) + 100}}}
	if err := c.fetch.enc.encode(12, 1, 0, 0, parts, []topicSpan{{topic: "t", start: 0, end: 1}}); err != nil {
		t.Fatal(err)
	}
	err = c.sendZeroCopy(parts)
	if !errors.Is(err, errShortFile) {
		t.Fatalf("sendfile past EOF: %v, want errShortFile", err)
	}
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t testing.TB) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { cl.Close(); r.c.Close() })
	return r.c.(*net.TCPConn), cl.(*net.TCPConn)
}
