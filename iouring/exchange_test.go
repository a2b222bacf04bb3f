package iouring

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

func newTestExchange(t *testing.T) *Exchange {
	t.Helper()
	if ok, reason := Available(); !ok {
		t.Skipf("io_uring unavailable: %s", reason)
	}
	x, err := NewExchange()
	if err != nil {
		t.Fatalf("NewExchange: %v", err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// round runs x.Round on c's descriptor.
func round(t *testing.T, x *Exchange, c syscall.Conn, out, in []byte, waitAll bool, timeout time.Duration) (RoundResult, error) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var res RoundResult
	var rerr error
	if err := raw.Control(func(fd uintptr) { res, rerr = x.Round(int(fd), out, in, waitAll, timeout) }); err != nil {
		t.Fatal(err)
	}
	return res, rerr
}

func TestExchangeRound(t *testing.T) {
	x := newTestExchange(t)
	c, s := tcpPair(t)
	// The server answers each 5-byte request with its bytes reversed, after it read all of it.
	go func() {
		buf := make([]byte, 5)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			for i, j := 0, len(buf)-1; i < j; i, j = i+1, j-1 {
				buf[i], buf[j] = buf[j], buf[i]
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	in := make([]byte, 64)
	enters := 0
	for i, req := range []string{"abcde", "12345", "vwxyz"} {
		res, err := round(t, x, c, []byte(req), in, false, 5*time.Second)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		enters += res.Enters
		want := []byte{req[4], req[3], req[2], req[1], req[0]}
		// The answer may arrive in pieces: receive the rest without sending.
		got := res.Received
		for got < len(want) {
			r2, err := round(t, x, c, nil, in[got:], false, 5*time.Second)
			if err != nil {
				t.Fatalf("round %d, rest: %v", i, err)
			}
			got += r2.Received
			enters += r2.Enters
		}
		if res.Sent != 5 || !bytes.Equal(in[:got], want) {
			t.Fatalf("round %d: sent %d, received %q, want 5 and %q", i, res.Sent, in[:got], want)
		}
	}
	if enters < 3 {
		t.Fatalf("Enters %d after 3 rounds", enters)
	}
}

func TestExchangeWaitAll(t *testing.T) {
	x := newTestExchange(t)
	c, s := tcpPair(t)
	go func() {
		b := make([]byte, 1)
		io.ReadFull(s, b)
		// 100 KiB in 4 KiB pieces: one round with waitAll receives all of it.
		piece := bytes.Repeat([]byte{7}, 4096)
		for i := 0; i < 25; i++ {
			s.Write(piece)
		}
	}()
	in := make([]byte, 25*4096)
	res, err := round(t, x, c, []byte{1}, in, true, 10*time.Second)
	if err != nil || res.Received != len(in) {
		t.Fatalf("waitAll round: received %d of %d, err %v", res.Received, len(in), err)
	}
	if !bytes.Equal(in, bytes.Repeat([]byte{7}, len(in))) {
		t.Fatal("waitAll round: wrong bytes")
	}
}

func TestExchangeTimeout(t *testing.T) {
	x := newTestExchange(t)
	c, s := tcpPair(t)
	got := make(chan int, 1)
	go func() {
		b := make([]byte, 8)
		n, _ := s.Read(b)
		got <- n
	}()
	_, err := round(t, x, c, []byte("ping"), make([]byte, 8), false, 30*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("unanswered round: err %v, want os.ErrDeadlineExceeded", err)
	}
	if n := <-got; n != 4 {
		t.Fatalf("the peer read %d bytes of the request, want 4", n)
	}
	// The exchange still works after a timeout.
	go s.Write([]byte("pong"))
	res, err := round(t, x, c, nil, make([]byte, 8), false, 5*time.Second)
	if err != nil || res.Received == 0 {
		t.Fatalf("round after a timeout: %+v, %v", res, err)
	}
}

// TestExchangeShutdown: a round without a deadline ends when the socket is shut down from
// another goroutine, and when the peer closes, with 0 bytes; Close waits for it.
func TestExchangeShutdown(t *testing.T) {
	for _, how := range []string{"shutdown", "peer close"} {
		t.Run(how, func(t *testing.T) {
			x := newTestExchange(t)
			c, s := tcpPair(t)
			done := make(chan error, 1)
			var res RoundResult
			go func() {
				var err error
				res, err = round(t, x, c, []byte("x"), make([]byte, 8), false, 0)
				done <- err
			}()
			b := make([]byte, 1)
			if _, err := io.ReadFull(s, b); err != nil { // the round is in its receive now
				t.Fatal(err)
			}
			if how == "shutdown" {
				raw, _ := c.SyscallConn()
				raw.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RDWR) })
			} else {
				s.Close()
			}
			if err := <-done; err != nil || res.Received != 0 {
				t.Fatalf("round ended by %s: %+v, %v; want 0 bytes, no error", how, res, err)
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := round(t, x, c, nil, make([]byte, 8), false, 0); !errors.Is(err, ErrClosed) {
				t.Fatalf("round after Close: %v, want ErrClosed", err)
			}
		})
	}
}

func TestExchangeSendError(t *testing.T) {
	x := newTestExchange(t)
	c, s := tcpPair(t)
	s.Close()
	c.CloseWrite()
	_, err := round(t, x, c, []byte("late"), make([]byte, 8), false, time.Second)
	if err == nil {
		t.Fatal("a send on a socket shut for writing succeeded")
	}
	t.Logf("send after shutdown: %v", err)
}

// benchPingPong runs b.N request/response rounds of size bytes against an echo server, each
// with rt.
func benchPingPong(b *testing.B, size int, rt func(c *net.TCPConn, out, in []byte) error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	c := nc.(*net.TCPConn)
	out, in := make([]byte, size), make([]byte, size)
	b.SetBytes(int64(2 * size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := rt(c, out, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPingPong compares a client's request/response round over loopback made with
// write(2) and a read through the runtime's poller (net.Conn) against one Exchange round.
func BenchmarkPingPong(b *testing.B) {
	b.Run("conn", func(b *testing.B) {
		benchPingPong(b, 1024, func(c *net.TCPConn, out, in []byte) error {
			if _, err := c.Write(out); err != nil {
				return err
			}
			_, err := io.ReadFull(c, in)
			return err
		})
	})
	b.Run("exchange", func(b *testing.B) {
		if ok, reason := Available(); !ok {
			b.Skipf("io_uring unavailable: %s", reason)
		}
		x, err := NewExchange()
		if err != nil {
			b.Fatal(err)
		}
		defer x.Close()
		benchPingPong(b, 1024, func(c *net.TCPConn, out, in []byte) error {
			raw, err := c.SyscallConn()
			if err != nil {
				return err
			}
			var rerr error
			cerr := raw.Control(func(fd uintptr) {
				var res RoundResult
				res, rerr = x.Round(int(fd), out, in, true, 0)
				if rerr == nil && res.Received == 0 {
					rerr = io.EOF
				}
			})
			if cerr != nil {
				return cerr
			}
			return rerr
		})
	})
}

// TestExchangeRoundAllocs: a round allocates nothing (its wait's callback is bound once), so
// that the cost table's allocations per request compare the two ways of a replica fetch.
func TestExchangeRoundAllocs(t *testing.T) {
	x := newTestExchange(t)
	c, s := tcpPair(t)
	go func() { // echo, reusing its buffer
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	out, in := make([]byte, 64), make([]byte, 64)
	var rerr error
	var res RoundResult
	step := func(fd uintptr) { res, rerr = x.Round(int(fd), out, in, true, time.Minute) }
	run := func() {
		if err := raw.Control(step); err != nil {
			rerr = err
		}
	}
	run() // warm: the poller registers the ring's descriptor on its first wait
	if n := testing.AllocsPerRun(200, run); n != 0 || rerr != nil || res.Received != len(in) {
		t.Fatalf("%.1f allocations per round (received %d, err %v); want 0", n, res.Received, rerr)
	}
}
