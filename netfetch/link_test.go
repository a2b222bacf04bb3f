package netfetch

import (
	"bufio"
	"context"
	"errors"
	"io"
	"slices"
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

// TestTransportFetchAndEpochs drives the TCP transport directly against a
// broker: a replica fetch returns the leader's batches and HW, and
// OffsetForLeaderEpoch answers the leader's epoch end offset.
func TestTransportFetchAndEpochs(t *testing.T) {
	c := testCluster(t, 2, nil)
	if err := c.CreateTopic("tr", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition("tr", 0)
	rc := dialRaw(t, c.Addr(st.Leader))
	acks := produceRaw(t, rc, "tr", 3)
	tr := NewTransport(99, c.Controller())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fc, err := tr.Dial(ctx, st.Leader, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	// Replica 99 is not a replica: the leader answers per partition with an error or
	// data; a consumer-style replica id -1 reads below the HW.
	resp, err := fc.Fetch(ctx, &broker.FetchRequest{ReplicaID: -1, MaxWait: 10 * time.Millisecond, MinBytes: 1, MaxBytes: 1 << 20,
		Partitions: []broker.FetchPartition{{Topic: "tr", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: st.LeaderEpoch, LogStartOffset: -1, MaxBytes: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp) != 1 || resp[0].Err != nil || resp[0].HighWatermark != int64(acks) || len(resp[0].RecordBytes) == 0 {
		t.Fatalf("fetch response %+v", resp)
	}
	ans, err := fc.OffsetForLeaderEpoch(ctx, []broker.EpochQuery{{Topic: "tr", Partition: 0, CurrentLeaderEpoch: st.LeaderEpoch, LeaderEpoch: st.LeaderEpoch}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans) != 1 || ans[0].Err != nil || ans[0].LeaderEpoch != st.LeaderEpoch || ans[0].EndOffset != int64(acks) {
		t.Fatalf("epoch answer %+v, want epoch %d end %d", ans, st.LeaderEpoch, acks)
	}
	// A cancelled context breaks the call promptly instead of hanging.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := fc.Fetch(cctx, &broker.FetchRequest{ReplicaID: -1, MaxWait: 5 * time.Second, MinBytes: 1 << 30, MaxBytes: 1 << 20,
		Partitions: []broker.FetchPartition{{Topic: "tr", Partition: 0, FetchOffset: int64(acks), CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}}}); err == nil {
		t.Fatal("fetch with a cancelled context succeeded")
	}
}

// produceRaw appends n one-record batches with acks=1 and returns n.
func produceRaw(t *testing.T, rc *rawClient, topic string, n int) int {
	t.Helper()
	for i := 0; i < n; i++ {
		p := newProduce(topic, 1, testBatch(0))
		resp := newProduceResp()
		rc.roundTrip(p, resp)
		if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
			t.Fatalf("produce: error %d", ec)
		}
	}
	return n
}

func TestLinkDownDropsFollowerAndHealRejoins(t *testing.T) {
	c := testCluster(t, 3, func(cfg *ClusterConfig) {
		cfg.Broker.ReplicaLagTimeMaxMs = 300
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
	})
	const topic = "linked"
	st, follower := followedTopic(t, c, topic)
	leader := st.Leader
	wait := watchPartition(t, c, leader, topic, 0)
	cl := newClient(t, c)
	acks := produce(t, cl, topic, "a", 20)
	c.SetLink(leader, follower, LinkFault{Down: true})
	acks = append(acks, produce(t, cl, topic, "b", 20)...) // leaves the cut-off follower behind the LEO
	wait("ISR without the cut-off follower", func(s controller.PartitionState) bool { return !slices.Contains(s.ISR, follower) })
	c.SetLink(leader, follower, LinkFault{Latency: 2 * time.Millisecond}) // slow but up
	wait("ISR with the follower over a slow link", func(s controller.PartitionState) bool { return slices.Contains(s.ISR, follower) })
	acks = append(acks, produce(t, cl, topic, "c", 20)...)
	c.SetLink(leader, follower, LinkFault{})
	checkNoLoss(t, acks, consumeAll(t, c, topic))
	checkReplicasIdentical(t, c, topic, 1)
}

// TestFetchConnCanceledContextDoesNotBlock: a call with a context that was
// canceled by an earlier call's time must fail at once, not block on a
// peer that never answers (the per-call SetDeadline would otherwise clear
// the deadline the cancellation had set).
func TestFetchConnCanceledContextDoesNotBlock(t *testing.T) {
	a, b := tcpPair(t)
	go io.Copy(io.Discard, b) // a peer that reads requests and never answers
	fc := &fetchConn{self: 1, source: 2, clientID: "t", nc: a, br: bufio.NewReader(a)}
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
