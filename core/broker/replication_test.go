package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestProduceAcksAllReplicatesIdentically(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 3, 3, nil)
	for p := int32(0); p < 3; p++ {
		l := c.leader("t", p)
		var next int64
		for i := 0; i < 20; i++ {
			res := produce(t, l, -1, "t", p, batch(fmt.Sprintf("p%d-b%d", p, i), 5))
			if res.Err != nil {
				t.Fatalf("acks=all produce %d to %s-%d: %v", i, "t", p, res.Err)
			}
			if res.BaseOffset != next {
				t.Fatalf("batch %d base offset %d, want %d", i, res.BaseOffset, next)
			}
			if res.LogAppendTimeMs != -1 || res.LogStartOffset != 0 {
				t.Fatalf("LogAppendTime %d LogStartOffset %d, want -1 0", res.LogAppendTimeMs, res.LogStartOffset)
			}
			next += 5
			// acks=all returned: the HW passed the batch.
			if r, _ := l.Replica("t", p); r.HW() < next {
				t.Fatalf("acks=all returned with HW %d < %d", r.HW(), next)
			}
		}
		// Every ISR member holds [0, HW) identically once followers caught up.
		c.waitFor("followers at leader LEO", 5*time.Second, func() bool {
			for _, id := range c.ids() {
				r, _ := c.broker(id).Replica("t", p)
				if r.LEO() != next || r.HW() != next {
					return false
				}
			}
			return true
		})
		c.assertReplicasIdentical("t", p)
		vals, hw := consume(t, l, "t", p, 0)
		if hw != next || len(vals) != int(next) || vals[0] != fmt.Sprintf("p%d-b0-0", p) {
			t.Fatalf("consumed %d values up to HW %d, want %d", len(vals), hw, next)
		}
	}
	for _, id := range c.ids() {
		m := c.broker(id).Metrics()
		if m.UnderReplicatedPartitions != 0 || m.LeaderCount != 1 || m.PartitionCount != 3 {
			t.Errorf("broker %d metrics %+v", id, m)
		}
	}
}

func TestProduceAcks1And0(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 1, 3, nil)
	l := c.leader("t", 0)
	r1 := produce(t, l, 1, "t", 0, batch("a", 3))
	r0 := produce(t, l, 0, "t", 0, batch("b", 2))
	if r1.Err != nil || r0.Err != nil || r1.BaseOffset != 0 || r0.BaseOffset != 3 {
		t.Fatalf("acks=1 %+v acks=0 %+v", r1, r0)
	}
	c.waitFor("HW reaches 5", 5*time.Second, func() bool {
		r, _ := l.Replica("t", 0)
		return r.HW() == 5
	})
	c.assertReplicasIdentical("t", 0)

	// Errors per partition.
	parts := []ProducePartition{
		{Topic: "t", Partition: 0, Records: batch("c", 1)},
		{Topic: "nope", Partition: 0, Records: batch("d", 1)},
		{Topic: "t", Partition: 0, Records: []byte("garbage that is not a batch at all, long enough to parse a header")},
	}
	l.Produce(context.Background(), 1, time.Second, parts)
	if parts[0].Err != nil || parts[0].BaseOffset != 5 {
		t.Errorf("good partition: %+v", parts[0])
	}
	if !errors.Is(parts[1].Err, kerr.UnknownTopicOrPartition) || parts[1].BaseOffset != -1 {
		t.Errorf("unknown partition: %v", parts[1].Err)
	}
	var ke *kerr.Error
	if !errors.As(parts[2].Err, &ke) || ke == kerr.UnknownServerError {
		t.Errorf("garbage records: %v, want a Kafka error code", parts[2].Err)
	}
	// Produce to a follower: NOT_LEADER_OR_FOLLOWER.
	st, _ := c.ctrl.Partition("t", 0)
	f := c.broker(st.ISR[slices.IndexFunc(st.ISR, func(id int32) bool { return id != st.Leader })])
	if res := produce(t, f, 1, "t", 0, batch("e", 1)); !errors.Is(res.Err, kerr.NotLeaderForPartition) {
		t.Errorf("produce to follower: %v", res.Err)
	}
	// Bad acks.
	if res := produce(t, l, 2, "t", 0, batch("e", 1)); !errors.Is(res.Err, kerr.InvalidRequiredAcks) {
		t.Errorf("acks=2: %v", res.Err)
	}
}

func isrOf(c *testCluster, topic string, p int32) []int32 {
	st, _ := c.ctrl.Partition(topic, p)
	return st.ISR
}

func TestMinISRAndPausedFollowers(t *testing.T) {
	cfg := testConfig()
	cfg.ReplicaLagTimeMaxMs = 200
	cfg.ReplicaFetchWaitMaxMs = 20
	c := newTestCluster(t, 3, cfg)
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	l := c.leader("t", 0)
	if res := produce(t, l, -1, "t", 0, batch("a", 2)); res.Err != nil {
		t.Fatal(res.Err)
	}
	var followers []*Broker
	for _, id := range c.ids() {
		if id != l.ID() {
			followers = append(followers, c.broker(id))
		}
	}
	for _, f := range followers {
		f.Pause()
	}
	// Behind the leader's LEO: a follower at the leader's LEO stays in sync however
	// long it is idle (Kafka's isCaughtUp, KAFKA-7152).
	if res := produce(t, l, 1, "t", 0, batch("b0", 1)); res.Err != nil {
		t.Fatal(res.Err)
	}
	c.waitFor("ISR shrinks to the leader", 10*time.Second, func() bool {
		m := l.Metrics()
		return slices.Equal(isrOf(c, "t", 0), []int32{l.ID()}) && m.IsrShrinks >= 1 && m.UnderMinIsrPartitionCount == 1
	})
	m := l.Metrics()
	if m.UnderReplicatedPartitions != 1 || m.UnderMinIsrPartitionCount != 1 || m.IsrShrinks < 1 {
		t.Errorf("leader metrics after shrink: %+v", m)
	}
	if res := produce(t, l, -1, "t", 0, batch("b", 1)); !errors.Is(res.Err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with ISR below min: %v, want NOT_ENOUGH_REPLICAS", res.Err)
	}
	res := produce(t, l, 1, "t", 0, batch("c", 1))
	if res.Err != nil || res.BaseOffset != 3 {
		t.Fatalf("acks=1 with ISR below min: %+v", res)
	}
	// Resume: followers catch up and rejoin; acks=all works again.
	for _, f := range followers {
		f.Resume()
	}
	// The controller commits the expansion before the leader applies the
	// AlterPartition response: wait for both views.
	c.waitFor("ISR back to 3", 10*time.Second, func() bool {
		return len(isrOf(c, "t", 0)) == 3 && l.Metrics().UnderReplicatedPartitions == 0
	})
	// One or two expansions (both followers may rejoin in one AlterPartition).
	if m := l.Metrics(); m.IsrExpands < 1 || m.UnderReplicatedPartitions != 0 {
		t.Errorf("after rejoin: %+v", m)
	}
	if res := produce(t, l, -1, "t", 0, batch("d", 1)); res.Err != nil || res.BaseOffset != 4 {
		t.Fatalf("acks=all after rejoin: %+v", res)
	}
	c.assertReplicasIdentical("t", 0)
}

func TestAcksAllTimesOutWhileFollowerPaused(t *testing.T) {
	cfg := testConfig()
	cfg.ReplicaLagTimeMaxMs = 60000 // stays in the ISR: the produce must time out
	c := newTestCluster(t, 3, cfg)
	c.createTopic("t", 1, 3, nil)
	l := c.leader("t", 0)
	for _, id := range c.ids() {
		if id != l.ID() {
			c.broker(id).Pause()
		}
	}
	parts := []ProducePartition{{Topic: "t", Partition: 0, Records: batch("a", 1)}}
	l.Produce(context.Background(), -1, 100*time.Millisecond, parts)
	if !errors.Is(parts[0].Err, kerr.RequestTimedOut) {
		t.Fatalf("acks=all with a stuck ISR: %v, want REQUEST_TIMED_OUT", parts[0].Err)
	}
	if parts[0].BaseOffset != 0 {
		t.Errorf("base offset %d (the append happened)", parts[0].BaseOffset)
	}
}

// TestAcksAllWaitsThroughISRDip: an acks=all produce appended while the ISR met
// min.insync.replicas keeps waiting when the ISR then shrinks below it (Kafka's
// DelayedProduce); the followers come back, catch up and rejoin before the request times
// out, and the produce succeeds, once: the batch is in the log one time.
func TestAcksAllWaitsThroughISRDip(t *testing.T) {
	cfg := testConfig()
	cfg.ReplicaLagTimeMaxMs = 200
	cfg.ReplicaFetchWaitMaxMs = 20
	c := newTestCluster(t, 3, cfg)
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	l := c.leader("t", 0)
	if res := produce(t, l, -1, "t", 0, batch("a", 2)); res.Err != nil {
		t.Fatal(res.Err)
	}
	var followers []*Broker
	for _, id := range c.ids() {
		if id != l.ID() {
			followers = append(followers, c.broker(id))
		}
	}
	// Paused at the leader's LEO, the followers stay in sync until the append below.
	for _, f := range followers {
		f.Pause()
	}
	parts := []ProducePartition{{Topic: "t", Partition: 0, Records: batch("dip", 3)}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Produce(context.Background(), -1, 30*time.Second, parts)
	}()
	c.waitFor("ISR below min.insync.replicas on the leader", 10*time.Second, func() bool {
		return l.Metrics().UnderMinIsrPartitionCount == 1
	})
	select {
	case <-done:
		t.Fatalf("the ISR dip answered the produce: %v; want it to wait for the HW", parts[0].Err)
	default:
	}
	for _, f := range followers {
		f.Resume()
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the produce never returned after the followers rejoined")
	}
	if parts[0].Err != nil || parts[0].BaseOffset != 2 {
		t.Fatalf("produce through the ISR dip: err %v base %d, want success at offset 2", parts[0].Err, parts[0].BaseOffset)
	}
	vals, hw := consume(t, l, "t", 0, 0)
	want := []string{"a-0", "a-1", "dip-0", "dip-1", "dip-2"}
	if !slices.Equal(vals, want) || hw != 5 {
		t.Fatalf("log after the dip: %v (HW %d), want %v once", vals, hw, want)
	}
}

func TestLeaderKillKeepsAckedRecords(t *testing.T) {
	c := newTestCluster(t, 3, testConfig())
	c.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	old := c.leader("t", 0)
	var acked []string
	for i := 0; i < 10; i++ {
		b := batch(fmt.Sprintf("k%d", i), 3)
		if res := produce(t, old, -1, "t", 0, b); res.Err != nil {
			t.Fatal(res.Err)
		}
		for j := 0; j < 3; j++ {
			acked = append(acked, fmt.Sprintf("k%d-%d", i, j))
		}
	}
	// A last acks=1 record that may or may not survive.
	produce(t, old, 1, "t", 0, batch("maybe", 1))
	old.Kill()
	c.ctrl.BrokerDown(old.ID())
	var nl *Broker
	c.waitFor("new leader serving", 10*time.Second, func() bool {
		st, _ := c.ctrl.Partition("t", 0)
		if st.Leader < 0 || st.Leader == old.ID() {
			return false
		}
		r, ok := c.broker(st.Leader).Replica("t", 0)
		if !ok || !r.IsLeader() || r.LeaderEpoch() != st.LeaderEpoch {
			return false
		}
		nl = c.broker(st.Leader)
		return r.HW() >= int64(len(acked))
	})
	vals, _ := consume(t, nl, "t", 0, 0)
	if len(vals) < len(acked) || !slices.Equal(vals[:len(acked)], acked) {
		t.Fatalf("new leader %d returns %v, want prefix %v", nl.ID(), vals, acked)
	}
	// The cluster keeps working with 2 brokers (min ISR 2).
	if res := produce(t, nl, -1, "t", 0, batch("after", 2)); res.Err != nil {
		t.Fatalf("acks=all after failover: %v", res.Err)
	}
	c.assertReplicasIdentical("t", 0)

	// Restart the killed broker on its data dir: it recovers, truncates by
	// leader epoch, catches up and rejoins the ISR.
	c.start(old.ID())
	c.waitFor("old leader rejoins ISR", 10*time.Second, func() bool {
		return len(isrOf(c, "t", 0)) == 3
	})
	r, _ := nl.Replica("t", 0)
	c.waitFor("restarted broker caught up", 10*time.Second, func() bool {
		rr, ok := c.broker(old.ID()).Replica("t", 0)
		return ok && rr.LEO() == r.LEO()
	})
	c.assertReplicasIdentical("t", 0)
}
