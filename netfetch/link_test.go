package netfetch

import (
	"bufio"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
)

func TestFaultConnLatencyBandwidthDown(t *testing.T) {
	a, b := tcpPair(t)
	l := &link{conns: map[*fetchConn]struct{}{}}
	l.fault.Store(&LinkFault{Latency: 20 * time.Millisecond})
	fc := newFaultConn(a, l)
	go func() { // echo server
		buf := make([]byte, 64<<10)
		for {
			n, err := b.Read(buf)
			if err != nil {
				return
			}
			if _, err := b.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	if _, err := fc.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(fc, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 40*time.Millisecond {
		t.Errorf("round trip %v with 20 ms one-way latency, want >= 40 ms", rtt)
	}
	// A bandwidth cap keeps the latency: its unused burst allowance (64 KiB at 1 MB/s is 65 ms)
	// is no credit against the delay.
	l.fault.Store(&LinkFault{Latency: 20 * time.Millisecond, BandwidthBytesPerSec: 1000000})
	start = time.Now()
	if _, err := fc.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(fc, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 40*time.Millisecond {
		t.Errorf("round trip %v with 20 ms one-way latency and a 1 MB/s cap, want >= 40 ms", rtt)
	}

	// 1 MiB/s cap: 320 KiB (64 KiB burst) takes at least ~250 ms to read back.
	l.fault.Store(&LinkFault{BandwidthBytesPerSec: 1 << 20})
	fc.rnext, fc.wnext = time.Time{}, time.Time{}
	payload := make([]byte, 320<<10)
	start = time.Now()
	go fc.Conn.Write(payload) // unthrottled write side; the throttled read is measured
	if _, err := io.ReadFull(fc, make([]byte, len(payload))); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 240*time.Millisecond {
		t.Errorf("read 320 KiB in %v through a 1 MiB/s link, want >= 240 ms", d)
	}

	l.fault.Store(&LinkFault{Down: true})
	if _, err := fc.Write([]byte("x")); !errors.Is(err, ErrLinkDown) {
		t.Errorf("write on a down link: %v, want ErrLinkDown", err)
	}
	fc.Close()
}

func TestTransportDialUnknownBroker(t *testing.T) {
	ctrl := controller.New(controller.DefaultConfig())
	tr := NewTransport(1, ctrl)
	_, err := tr.Dial(context.Background(), 7, 0)
	if !errors.Is(err, kerr.BrokerNotAvailable) {
		t.Fatalf("dial unknown broker: %v, want BROKER_NOT_AVAILABLE", err)
	}
}

// TestFetchConnCanceledContextDoesNotBlock: a call with a context that was
// canceled by an earlier call's time must fail at once, not block on a
// peer that never answers (the per-call SetDeadline would otherwise clear
// the deadline the cancellation had set).
func TestFetchConnCanceledContextDoesNotBlock(t *testing.T) {
	a, b := tcpPair(t)
	go io.Copy(io.Discard, b) // a peer that reads requests and never answers
	fc := &fetchConn{self: 1, source: 2, clientID: "t", nc: a, br: bufio.NewReader(a), costs: new(costCounters)}
	defer fc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	rf := &broker.FetchRequest{ReplicaID: 1, MaxWait: 10 * time.Millisecond, MinBytes: 1, MaxBytes: 1 << 20}
	call := func() <-chan error {
		done := make(chan error, 1)
		go func() { _, err := fc.Fetch(ctx, rf); done <- err }()
		return done
	}
	first := call()
	cancel()
	for i, done := range []<-chan error{first, nil} {
		if done == nil {
			done = call() // same, already canceled context
		}
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("call %d: %v, want context.Canceled", i+1, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d with a canceled context still blocked after 5 s", i+1)
		}
	}
}
