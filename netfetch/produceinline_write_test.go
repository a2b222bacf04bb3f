package netfetch

import (
	"bytes"
	"io"
	"testing"
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
