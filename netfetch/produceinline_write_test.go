package netfetch

import (
	"bytes"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWriteNowDoesNotWait: the completing goroutine's write (writeNow) takes what the socket
// takes and returns, without waiting, when the peer does not read; the connection's goroutine
// then writes the rest, and the peer receives every byte in order.
func TestWriteNowDoesNotWait(t *testing.T) {
	srv, cl := tcpPair(t)
	srv.SetWriteBuffer(64 << 10)
	cl.SetReadBuffer(64 << 10)
	raw, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{nc: srv, raw: raw}
	c.inl.writeFn = c.writeStep
	msg := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB: more than both buffers
	n, err := c.writeNow(msg)
	if err != nil || n <= 0 || n >= len(msg) {
		t.Fatalf("writeNow to a peer that does not read: %d of %d bytes, %v; want a part, no error", n, len(msg), err)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(cl, int64(len(msg))))
		got <- b
	}()
	if _, err := srv.Write(msg[n:]); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, msg) {
		t.Fatalf("the peer got %d bytes, not the message", len(b))
	}
}

// TestParseHeaderDoesNotAllocate: decoding a request header (with a client id and tagged
// fields) allocates nothing.
func TestParseHeaderDoesNotAllocate(t *testing.T) {
	req := kmsg.NewPtrProduceRequest()
	body := []byte{0, 0, 0, 9, 0, 0, 0, 7, 0, 3, 'c', 'l', 'i', 0} // Produce v9, corr 7, "cli", no tags
	if h, _, _, err := parseHeaderWith(body, func(int16) kmsg.Request { return req }); err != nil || h.clientID != "cli" || h.corr != 7 {
		t.Fatalf("header %+v, %v", h, err)
	}
	if n := testing.AllocsPerRun(100, func() {
		parseHeaderWith(body, func(int16) kmsg.Request { return req })
	}); n != 0 {
		t.Errorf("parseHeaderWith allocates %v times", n)
	}
}
