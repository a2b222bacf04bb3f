package cluster_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/internal/kafkatest"
	"github.com/isrbench/isrbench/netfetch"
)

func TestKgoProduceConsumeRF3(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	const topic, parts = "orders", 3
	if err := c.CreateTopic(topic, parts, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	cl := clustertest.NewClient(t, c) // idempotent, acks=all by default
	acks := clustertest.Produce(t, cl, topic, "v", 600)
	if len(acks) != 600 {
		t.Fatalf("%d acks", len(acks))
	}
	got := clustertest.ConsumeAll(t, c, topic)
	clustertest.CheckNoLoss(t, acks, got)
	total := 0
	for _, recs := range got {
		total += len(recs)
	}
	if total != 600 {
		t.Errorf("read %d records, want 600", total)
	}

	// Metadata through kadm: leader, replicas, ISR.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 3 {
		t.Errorf("metadata brokers = %v", md.Brokers)
	}
	td := md.Topics[topic]
	if td.Err != nil || len(td.Partitions) != parts {
		t.Fatalf("topic detail %+v", td)
	}
	leaders := map[int32]bool{}
	for _, pd := range td.Partitions.Sorted() {
		st, _ := c.Controller().Partition(topic, pd.Partition)
		if pd.Leader != st.Leader || !slices.Equal(pd.Replicas, st.Replicas) || !slices.Equal(pd.ISR, st.ISR) || pd.LeaderEpoch != st.LeaderEpoch {
			t.Errorf("partition %d: metadata %+v, controller %v", pd.Partition, pd, st)
		}
		if len(pd.Replicas) != 3 || len(pd.ISR) != 3 || !slices.Contains(pd.Replicas, pd.Leader) {
			t.Errorf("partition %d: leader %d replicas %v isr %v", pd.Partition, pd.Leader, pd.Replicas, pd.ISR)
		}
		leaders[pd.Leader] = true
	}
	if len(leaders) != 3 {
		t.Errorf("leaders not balanced over the brokers: %v", leaders)
	}
	clustertest.CheckReplicasIdentical(t, c, topic, parts)
	st := c.Stats()
	if st.Requests["Produce"] == 0 || st.Requests["Fetch"] == 0 || st.Requests["InitProducerID"] == 0 {
		t.Errorf("request counts %v", st.Requests)
	}
}

// TestFetchPathUsesSendfile: with isrbench.zero.copy the records of replica and consumer
// fetches leave by sendfile(2), except the slices below isrbench.zero.copy.min.bytes, which are
// copied; with it off every record is copied. The records arrive intact on every path.
func TestFetchPathUsesSendfile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		zc       bool
		minBytes int64
		small    string // the path of batches far below the default minimum: sendfile or copy
	}{
		{"zerocopy=true/min=0", true, 0, "sendfile"},
		{"zerocopy=true/min=default", true, netfetch.DefaultZeroCopyMinBytes, "copy"},
		{"zerocopy=false", false, netfetch.DefaultZeroCopyMinBytes, "copy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.ZeroCopy, cfg.ZeroCopyMinBytes = tc.zc, tc.minBytes })
			if err := c.CreateTopic("zc", 1, 3, nil); err != nil {
				t.Fatal(err)
			}
			cl := clustertest.NewClient(t, c)
			acks := clustertest.Produce(t, cl, "zc", "z", 200)
			clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "zc"))
			st := c.Stats()
			t.Logf("small batches: sendfile %d bytes in %d calls, copy %d bytes", st.SendfileBytes, st.SendfileCalls, st.CopyBytes)
			if tc.small == "sendfile" && (st.SendfileBytes == 0 || st.CopyBytes != 0) {
				t.Errorf("SendfileBytes %d (want > 0), CopyBytes %d (want 0)", st.SendfileBytes, st.CopyBytes)
			}
			if tc.small == "copy" && (st.CopyBytes == 0 || st.SendfileBytes != 0) {
				t.Errorf("CopyBytes %d (want > 0), SendfileBytes %d (want 0)", st.CopyBytes, st.SendfileBytes)
			}

			// Large batches: sendfile whenever zero copy is on.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			big := make([]byte, 4*int(netfetch.DefaultZeroCopyMinBytes)) // random: the client's compression leaves it large
			crand.Read(big)
			for i := 0; i < 3; i++ {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "zc", Value: big}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			if got := clustertest.ConsumeAll(t, c, "zc"); len(got[0]) != 203 || !bytes.Equal([]byte(got[0][202].Value), big) {
				t.Fatalf("read back %d records, want 203 ending with the large one", len(got[0]))
			}
			after := c.Stats()
			t.Logf("large batches: sendfile %d bytes in %d calls, copy %d bytes", after.SendfileBytes-st.SendfileBytes, after.SendfileCalls-st.SendfileCalls, after.CopyBytes-st.CopyBytes)
			if sent := after.SendfileBytes - st.SendfileBytes; tc.zc != (sent >= 3*int64(len(big))) {
				t.Errorf("zero copy %v: large batches sent %d bytes by sendfile", tc.zc, sent)
			}
		})
	}
}

func TestPausedFollowerLeavesAndRejoinsISR(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		cfg.Broker.ReplicaLagTimeMaxMs = 300
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
	})
	const topic = "paused"
	st, follower := clustertest.FollowedTopic(t, c, topic)
	leader := st.Leader
	wait := clustertest.WatchPartition(t, c, leader, topic, 0)
	cl := clustertest.NewClient(t, c)
	acks := clustertest.Produce(t, cl, topic, "before", 50)

	if err := c.PauseBroker(follower); err != nil {
		t.Fatal(err)
	}
	// The produce leaves the paused follower behind the leader's LEO (an idle follower at
	// the LEO stays in sync, KAFKA-7152); its acks=all completes once the ISR shrank to
	// 2 >= min ISR 2.
	acks = append(acks, clustertest.Produce(t, cl, topic, "during", 50)...)
	shrunk := wait("ISR without the paused follower", func(s controller.PartitionState) bool {
		return !slices.Contains(s.ISR, follower) && s.Leader == leader
	})
	t.Logf("ISR shrank to %v", shrunk.ISR)
	if err := c.ResumeBroker(follower); err != nil {
		t.Fatal(err)
	}
	wait("ISR with the resumed follower", func(s controller.PartitionState) bool { return slices.Contains(s.ISR, follower) })
	acks = append(acks, clustertest.Produce(t, cl, topic, "after", 50)...)
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, topic))
	clustertest.CheckReplicasIdentical(t, c, topic, 1)
	if m := c.Broker(leader).Metrics(); m.IsrShrinks < 1 || m.IsrExpands < 1 {
		t.Errorf("leader metrics %+v: want an ISR shrink and an expand", m)
	}
}

func TestKillLeaderElectsISRMemberNoAckedLoss(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.Broker.ReplicaFetchWaitMaxMs = 50 })
	const topic, parts = "killed", 3
	if err := c.CreateTopic(topic, parts, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Controller().Partition(topic, 0)
	victim := before.Leader
	survivor := before.Replicas[0]
	if survivor == victim {
		survivor = before.Replicas[1]
	}
	wait := clustertest.WatchPartition(t, c, survivor, topic, 0)
	cl := clustertest.NewClient(t, c, kgo.RecordDeliveryTimeout(25*time.Second))
	acks := clustertest.Produce(t, cl, topic, "pre", 100)
	// Kill the leader while acks=all produces are in flight.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One record at a time, so that the kill lands among in-flight requests.
	enough := make(chan struct{})
	done := make(chan []clustertest.Ack, 1)
	go func() {
		var mid []clustertest.Ack
		defer func() { done <- mid }()
		for i := 0; i < 300; i++ {
			r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 5)), Value: []byte(fmt.Sprintf("mid-%05d", i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Errorf("produce %s around the kill: %v", r.Value, err)
				return
			}
			mid = append(mid, clustertest.Ack{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			if i == 50 {
				close(enough)
			}
		}
	}()
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatal("produces never acknowledged")
	}
	if err := c.KillBroker(victim); err != nil {
		t.Fatal(err)
	}
	acks = append(acks, <-done...)
	after := wait("a new leader", func(s controller.PartitionState) bool { return s.Leader >= 0 && s.Leader != victim })
	if !slices.Contains(before.ISR, after.Leader) || after.LeaderEpoch <= before.LeaderEpoch {
		t.Errorf("new leader %d (epoch %d) not from ISR %v (epoch %d)", after.Leader, after.LeaderEpoch, before.ISR, before.LeaderEpoch)
	}
	acks = append(acks, clustertest.Produce(t, cl, topic, "post", 300)...)
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, topic))

	// The killed broker comes back on its data dir, catches up and rejoins.
	if err := c.RestartBroker(victim); err != nil {
		t.Fatal(err)
	}
	wait("the restarted broker back in the ISR", func(s controller.PartitionState) bool { return slices.Contains(s.ISR, victim) })
	clustertest.CheckReplicasIdentical(t, c, topic, 1)
}

func TestPauseBeyondSessionTimeoutFencesThenRejoins(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		cfg.Broker.ReplicaLagTimeMaxMs = 300
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
		cfg.Broker.HeartbeatIntervalMs = 100
		cfg.Controller.BrokerSessionTimeoutMs = 1000
	})
	const topic = "fenced"
	st, follower := clustertest.FollowedTopic(t, c, topic)
	wait := clustertest.WatchPartition(t, c, st.Leader, topic, 0)
	cl := clustertest.NewClient(t, c)
	acks := clustertest.Produce(t, cl, topic, "a", 20)
	if err := c.PauseBroker(follower); err != nil {
		t.Fatal(err)
	}
	wait("ISR without the paused broker", func(s controller.PartitionState) bool { return !slices.Contains(s.ISR, follower) })
	// The session expires: the controller fences the broker (Metadata drops it).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, _ := c.Controller().Broker(follower); !b.Alive {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("paused broker never fenced by the session timeout")
		}
	}
	// Ask the leader directly (a client could pick the frozen broker and wait for its timeout).
	rc := kafkatest.Dial(t, c.Addr(st.Leader))
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.SetVersion(12)
	mresp := kmsg.NewPtrMetadataResponse()
	rc.RoundTrip(mreq, mresp)
	if len(mresp.Topics) != 1 || len(mresp.Brokers) != 2 || !slices.Contains(mresp.Topics[0].Partitions[0].OfflineReplicas, follower) {
		t.Errorf("metadata while fenced: brokers %v topics %+v, want broker %d offline", mresp.Brokers, mresp.Topics, follower)
	}
	acks = append(acks, clustertest.Produce(t, cl, topic, "b", 20)...)
	if err := c.ResumeBroker(follower); err != nil {
		t.Fatal(err)
	}
	wait("ISR with the resumed broker", func(s controller.PartitionState) bool { return slices.Contains(s.ISR, follower) })
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, topic))
}

func TestCrashFollowerRestartsAndCatchesUp(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.Broker.ReplicaFetchWaitMaxMs = 50 })
	const topic = "crashed"
	st, follower := clustertest.FollowedTopic(t, c, topic)
	wait := clustertest.WatchPartition(t, c, st.Leader, topic, 0)
	cl := clustertest.NewClient(t, c)
	acks := clustertest.Produce(t, cl, topic, "a", 100)
	if err := c.CrashBroker(follower); err != nil {
		t.Fatal(err)
	}
	if err := c.CrashBroker(follower); err == nil {
		t.Error("crashing a stopped broker succeeded")
	}
	wait("ISR without the crashed broker", func(s controller.PartitionState) bool { return !slices.Contains(s.ISR, follower) })
	acks = append(acks, clustertest.Produce(t, cl, topic, "b", 100)...)
	if err := c.RestartBroker(follower); err != nil {
		t.Fatal(err)
	}
	wait("ISR with the restarted broker", func(s controller.PartitionState) bool { return slices.Contains(s.ISR, follower) })
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, topic))
	clustertest.CheckReplicasIdentical(t, c, topic, 1)
}

func TestAdminCreateDescribeListOffsets(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	cl := clustertest.NewClient(t, c)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	two := "2"
	if _, err := adm.CreateTopic(ctx, 2, 3, map[string]*string{"min.insync.replicas": &two}, "adm"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, "adm"); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 5, nil, "too-wide"); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Errorf("rf 5 on 3 brokers: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("adm", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cfg := range rc.Configs {
		if cfg.Key == "min.insync.replicas" && cfg.MaybeValue() == "2" {
			found = true
		}
	}
	if !found {
		t.Errorf("topic configs %+v lack min.insync.replicas=2", rc.Configs)
	}
	bcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := bcs.On("1", nil); err != nil || len(b.Configs) == 0 {
		t.Errorf("broker configs: %+v %v", b, err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	acks := clustertest.Produce(t, cl, "adm", "x", 40)
	ends, err := adm.ListEndOffsets(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	starts, err := adm.ListStartOffsets(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	perPart := map[int32]int64{}
	for _, a := range acks {
		perPart[a.Partition]++
	}
	for p := int32(0); p < 2; p++ {
		e, _ := ends.Lookup("adm", p)
		s, _ := starts.Lookup("adm", p)
		if e.Err != nil || s.Err != nil || e.Offset != perPart[p] || s.Offset != 0 {
			t.Errorf("partition %d: earliest %d (%v) latest %d (%v), want 0 and %d", p, s.Offset, s.Err, e.Offset, e.Err, perPart[p])
		}
	}
}

// TestCloseReportsBrokerCloseError: a broker whose clean stop fails (here
// its HW checkpoint cannot be written: the data directory is gone) makes
// Cluster.Close return the error instead of dropping it.
func TestCloseReportsBrokerCloseError(t *testing.T) {
	cfg := cluster.DefaultConfig()
	cfg.Brokers = 1
	cfg.DataDir = t.TempDir()
	cfg.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		c.Close()
		t.Fatal(err)
	}
	err = c.Close()
	if err == nil || !strings.Contains(err.Error(), "broker 0 close") {
		t.Fatalf("Close = %v, want the broker 0 close error", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
}
