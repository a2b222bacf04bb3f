package netfetch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/internal/kafkatest"
	"github.com/isrbench/isrbench/netfetch"
)

// TestTransportFetchAndEpochs drives the TCP transport directly against a
// broker: a replica fetch returns the leader's batches and HW, and
// OffsetForLeaderEpoch answers the leader's epoch end offset.
func TestTransportFetchAndEpochs(t *testing.T) {
	c := clustertest.Start(t, 2, nil)
	if err := c.CreateTopic("tr", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition("tr", 0)
	rc := kafkatest.Dial(t, c.Addr(st.Leader))
	acks := produceRaw(t, rc, "tr", 3)
	tr := netfetch.NewTransport(99, c.Controller())
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
func produceRaw(t *testing.T, rc *kafkatest.Client, topic string, n int) int {
	t.Helper()
	for i := 0; i < n; i++ {
		p := kafkatest.NewProduce(topic, 1, kafkatest.Batch(0))
		resp := kafkatest.NewProduceResp()
		rc.RoundTrip(p, resp)
		if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
			t.Fatalf("produce: error %d", ec)
		}
	}
	return n
}

func TestLinkDownDropsFollowerAndHealRejoins(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		cfg.Broker.ReplicaLagTimeMaxMs = 300
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
	})
	const topic = "linked"
	st, follower := clustertest.FollowedTopic(t, c, topic)
	leader := st.Leader
	wait := clustertest.WatchPartition(t, c, leader, topic, 0)
	cl := clustertest.NewClient(t, c)
	acks := clustertest.Produce(t, cl, topic, "a", 20)
	c.SetLink(leader, follower, netfetch.LinkFault{Down: true})
	acks = append(acks, clustertest.Produce(t, cl, topic, "b", 20)...) // leaves the cut-off follower behind the LEO
	wait("ISR without the cut-off follower", func(s controller.PartitionState) bool { return !slices.Contains(s.ISR, follower) })
	c.SetLink(leader, follower, netfetch.LinkFault{Latency: 2 * time.Millisecond}) // slow but up
	wait("ISR with the follower over a slow link", func(s controller.PartitionState) bool { return slices.Contains(s.ISR, follower) })
	acks = append(acks, clustertest.Produce(t, cl, topic, "c", 20)...)
	c.SetLink(leader, follower, netfetch.LinkFault{})
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, topic))
	clustertest.CheckReplicasIdentical(t, c, topic, 1)
}
