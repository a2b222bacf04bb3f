package netfetch

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestSockReaderCountsEveryRead: the wire server's reader counts each read(2), also the one that
// found nothing yet (EAGAIN) before the poller waited; it honours deadlines, Close and EOF, and
// allocates nothing.
func TestSockReaderCountsEveryRead(t *testing.T) {
	server, client := tcpPair(t)
	var costs costCounters
	r := newSockReader(server, &costs)
	if _, ok := r.(*sockReader); !ok {
		t.Fatalf("a TCP connection got a %T", r)
	}
	before := costs.snapshot()
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 16)
		n, err := r.Read(buf)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(buf[:n])
	}()
	// Wait (no sleep) until the reader has found the socket empty, then send.
	deadline := time.Now().Add(10 * time.Second)
	for costs.snapshot().Read == before.Read {
		if time.Now().After(deadline) {
			t.Fatal("the reader never tried to read")
		}
		runtime.Gosched()
	}
	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "hello" {
		t.Fatalf("read %q", s)
	}
	d := costs.snapshot().Sub(before)
	if d.Read < 2 || d.ReadBytes != 5 {
		t.Fatalf("counted %d reads, %d bytes; want >= 2 (EAGAIN, data) and 5", d.Read, d.ReadBytes)
	}

	client.Write([]byte("x"))
	buf := make([]byte, 1)
	if n, err := io.ReadFull(r, buf); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	y := []byte("y")
	if n := testing.AllocsPerRun(50, func() {
		client.Write(y)
		io.ReadFull(r, buf)
	}); n != 0 {
		t.Errorf("a counted read allocates %v times", n)
	}

	server.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := r.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("past deadline: %v", err)
	}
	server.SetReadDeadline(time.Time{})
	client.Close()
	if _, err := r.Read(buf); err != io.EOF {
		t.Fatalf("after the peer closed: %v, want io.EOF", err)
	}
	server.Close()
	if _, err := r.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after Close: %v, want net.ErrClosed", err)
	}
}

// A wrapped connection (link faults) is counted per Read call.
func TestCountedReaderForWrappedConn(t *testing.T) {
	server, client := tcpPair(t)
	var costs costCounters
	r := newSockReader(struct{ net.Conn }{server}, &costs)
	if _, ok := r.(countedReader); !ok {
		t.Fatalf("a wrapped connection got a %T", r)
	}
	before := costs.snapshot()
	client.Write([]byte("abc"))
	buf := make([]byte, 3)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	if d := costs.snapshot().Sub(before); d.Read < 1 || d.ReadBytes != 3 {
		t.Fatalf("counted %+v", d)
	}
}
