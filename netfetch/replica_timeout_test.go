package netfetch

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/controller"
)

// TestReplicaSocketTimeout: a replica request whose leader never answers fails after
// replica.socket.timeout.ms (the fetcher then dials again) instead of waiting forever; the
// transport takes the timeout from the cluster's Settings, Kafka's 30 s by default.
func TestReplicaSocketTimeout(t *testing.T) {
	var lf LinkFaults
	ctrl := controller.New(controller.DefaultConfig())
	if got := NewFaultyTransport(1, ctrl, &lf, true, config.Settings{}).timeout; got != 30*time.Second {
		t.Errorf("default replica.socket.timeout.ms: %v, want 30s", got)
	}
	var s config.Settings
	if err := s.Set("replica.socket.timeout.ms", "100"); err != nil {
		t.Fatal(err)
	}
	tr := NewFaultyTransport(1, ctrl, &lf, true, s)
	if tr.timeout != 100*time.Millisecond {
		t.Fatalf("replica.socket.timeout.ms=100: transport timeout %v", tr.timeout)
	}

	a, b := tcpPair(t)
	go io.Copy(io.Discard, b) // a leader that reads requests and never answers
	fc := &fetchConn{self: 1, source: 2, clientID: "t", nc: a, br: bufio.NewReader(a), timeout: tr.timeout, costs: tr.costs}
	defer fc.Close()
	rf := &broker.FetchRequest{ReplicaID: 1, MaxWait: 10 * time.Millisecond, MinBytes: 1, MaxBytes: 1 << 20}
	done := make(chan error, 1)
	go func() { _, err := fc.Fetch(context.Background(), rf); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Fetch from a silent leader: %v, want a timeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Fetch from a silent leader with replica.socket.timeout.ms=100 still blocked after 20 s")
	}
}
