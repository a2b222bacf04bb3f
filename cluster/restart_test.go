package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// The durability guarantee over real sockets: acks=all records acknowledged to a kgo client
// (RF 3, min.insync.replicas 2) survive a broker crash (power loss of what it did not fsync)
// followed by a restart within broker.session.timeout.ms, a restart of the whole cluster on
// its data directory, and a follower whose log fell below the leader's log start.

// bgProducer produces records to a topic from one goroutine, up to 64 in flight, until
// stopped, and keeps what was acknowledged.
type bgProducer struct {
	cl     *kgo.Client
	topic  string
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		acks []clustertest.Ack
		errs int
		last error
	}
}

func startProducer(t *testing.T, cl *kgo.Client, topic, prefix string) *bgProducer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &bgProducer{cl: cl, topic: topic, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sem := make(chan struct{}, 64)
		var wg sync.WaitGroup
		defer wg.Wait()
		for i := 0; ; i++ {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			r := &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i % 11)), Value: []byte(fmt.Sprintf("%s-%06d", prefix, i))}
			// The records are produced with their own context: stopping the producer stops
			// new records, the ones in flight finish (acknowledged or failed).
			cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				defer wg.Done()
				defer func() { <-sem }()
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.mu.errs++
					p.mu.last = err
					return
				}
				p.mu.acks = append(p.mu.acks, clustertest.Ack{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			})
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *bgProducer) acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.acks)
}

// waitAcked waits until at least n more records than before are acknowledged.
func (p *bgProducer) waitAcked(t *testing.T, n int) {
	t.Helper()
	want := p.acked() + n
	kafkatest.WaitFor(t, 15*time.Second, fmt.Sprintf("%d acknowledged records", want), func() bool { return p.acked() >= want })
}

// stop stops producing and waits for the records in flight; it returns the acknowledged
// records.
func (p *bgProducer) stop() {
	p.cancel()
	<-p.done
}

func (p *bgProducer) results(t *testing.T) []clustertest.Ack {
	t.Helper()
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.errs > 0 {
		t.Logf("%d records not acknowledged (last error: %v)", p.mu.errs, p.mu.last)
	}
	return slices.Clone(p.mu.acks)
}

// waitInSync waits until every partition of topic has a leader and its whole replica set in
// the ISR, and every running broker applied the states.
func waitInSync(t *testing.T, c *cluster.Cluster, topic string) {
	t.Helper()
	kafkatest.WaitFor(t, 20*time.Second, "every replica of "+topic+" in the ISR", func() bool {
		sts, ok := c.Controller().Partitions(topic)
		if !ok {
			return false
		}
		for _, st := range sts {
			if st.Leader == controller.NoLeader || len(st.ISR) != len(st.Replicas) {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// ledBy returns the partitions of topic that broker id leads.
func ledBy(c *cluster.Cluster, topic string, id int32) map[int32]controller.PartitionState {
	out := map[int32]controller.PartitionState{}
	sts, _ := c.Controller().Partitions(topic)
	for _, st := range sts {
		if st.Leader == id {
			out[st.Partition] = st
		}
	}
	return out
}

// crashAndRestart crashes broker id (power loss; fenced at once, or only when its session
// would expire) and starts it again at once. The new incarnation leads none of the
// partitions the crashed one led, at a higher leader epoch.
func crashAndRestart(t *testing.T, c *cluster.Cluster, topic string, id int32, fenceAtOnce bool) {
	t.Helper()
	led := ledBy(c, topic, id)
	crash := c.CrashBrokerAwaitSession
	if fenceAtOnce {
		crash = c.CrashBroker
	}
	if err := crash(id); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartBroker(id); err != nil {
		t.Fatal(err)
	}
	for p, was := range led {
		st, _ := c.Controller().Partition(topic, p)
		if st.Leader == id || st.LeaderEpoch <= was.LeaderEpoch {
			t.Errorf("%s-%d after broker %d restarted: %v (was %v): the new incarnation must not keep the leadership", topic, p, id, st, was)
		}
	}
}

func restartTestCluster(t *testing.T, mutate func(*cluster.Config)) *cluster.Cluster {
	return clustertest.Start(t, 3, func(cfg *cluster.Config) {
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
		// Well above the test's duration: every restart is within the session timeout.
		cfg.Controller.BrokerSessionTimeoutMs = 60000
		cfg.Broker.HeartbeatIntervalMs = 100
		if mutate != nil {
			mutate(cfg)
		}
	})
}

// verifyAll reads every partition back and checks that every acknowledged record is at its
// acknowledged offset, then that the replicas are identical below the HW.
func verifyAll(t *testing.T, c *cluster.Cluster, topic string, partitions int32, acks []clustertest.Ack) {
	t.Helper()
	waitInSync(t, c, topic)
	got := clustertest.ConsumeAll(t, c, topic)
	read := 0
	for _, recs := range got {
		read += len(recs)
	}
	t.Logf("%s: %d records acknowledged with acks=all, %d read back", topic, len(acks), read)
	clustertest.CheckNoLoss(t, acks, got)
	clustertest.CheckReplicasIdentical(t, c, topic, partitions)
}

// TestCrashLeaderQuickRestartKeepsAcked (finding 1): the leader crashes, losing its page
// cache, and restarts at once, long before broker.session.timeout.ms; the new incarnation
// leads nothing, catches up, and every acknowledged record is readable.
func TestCrashLeaderQuickRestartKeepsAcked(t *testing.T) {
	for _, fence := range []bool{false, true} {
		t.Run(fmt.Sprintf("fenced_at_once=%v", fence), func(t *testing.T) {
			c := restartTestCluster(t, nil)
			const topic, parts = "durable", 3
			if err := c.CreateTopic(topic, parts, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
				t.Fatal(err)
			}
			st, _ := c.Controller().Partition(topic, 0)
			p := startProducer(t, clustertest.NewClient(t, c, kgo.RecordDeliveryTimeout(20*time.Second)), topic, "r")
			p.waitAcked(t, 500)
			crashAndRestart(t, c, topic, st.Leader, fence)
			p.waitAcked(t, 500)
			verifyAll(t, c, topic, parts, p.results(t))
		})
	}
}

// TestCrashFollowerQuickRestartThenLeaderKilled (finding 1): a follower crashes and restarts
// at once; the leader is killed right after. The restarted follower, whose log the crash
// emptied, must not be elected before it has caught up: no acknowledged record is lost.
func TestCrashFollowerQuickRestartThenLeaderKilled(t *testing.T) {
	c := restartTestCluster(t, nil)
	const topic = "followed"
	st, follower := clustertest.FollowedTopic(t, c, topic)
	p := startProducer(t, clustertest.NewClient(t, c, kgo.RecordDeliveryTimeout(20*time.Second)), topic, "r")
	p.waitAcked(t, 2000)
	crashAndRestart(t, c, topic, follower, false)
	if err := c.KillBroker(st.Leader); err != nil {
		t.Fatal(err)
	}
	after, _ := c.Controller().Partition(topic, 0)
	if after.Leader == controller.NoLeader {
		t.Fatalf("no leader after the kill: %v", after)
	}
	p.waitAcked(t, 500)
	acks := p.results(t)
	if err := c.RestartBroker(st.Leader); err != nil {
		t.Fatal(err)
	}
	verifyAll(t, c, topic, 1, acks)
}

// TestCrashRestartTwoBrokersInTurn (finding 1): two brokers crash and restart one after the
// other (the second once the first is back in every ISR), under load.
func TestCrashRestartTwoBrokersInTurn(t *testing.T) {
	c := restartTestCluster(t, nil)
	const topic, parts = "turns", 3
	if err := c.CreateTopic(topic, parts, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	p := startProducer(t, clustertest.NewClient(t, c, kgo.RecordDeliveryTimeout(20*time.Second)), topic, "r")
	p.waitAcked(t, 500)
	first, _ := c.Controller().Partition(topic, 0)
	crashAndRestart(t, c, topic, first.Leader, false)
	p.waitAcked(t, 300)
	waitInSync(t, c, topic)
	second, _ := c.Controller().Partition(topic, 0)
	if second.Leader == first.Leader {
		t.Fatalf("the restarted broker %d leads %v again", first.Leader, second)
	}
	crashAndRestart(t, c, topic, second.Leader, false)
	p.waitAcked(t, 300)
	verifyAll(t, c, topic, parts, p.results(t))
}

// TestClusterRestartKeepsTopicsAndRecords (finding 2): stopping the whole cluster, cleanly or
// abruptly (every broker killed without checkpoints, as kill -9 of serve), and starting a new
// one on the same data directory keeps the topics, their partition counts and configs and
// every acknowledged record; Cluster.Recovery says what the metadata log gave back.
func TestClusterRestartKeepsTopicsAndRecords(t *testing.T) {
	for _, abrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("abrupt=%v", abrupt), func(t *testing.T) {
			dir := t.TempDir()
			onDir := func(cfg *cluster.Config) { cfg.DataDir = dir }
			configs := map[string]map[string]string{
				"orders": {"min.insync.replicas": "2", "retention.ms": "3600000"},
				"audit":  {"retention.ms": "86400000", "max.message.bytes": "65536"},
			}
			partitions := map[string]int32{"orders": 3, "audit": 2}
			rf := map[string]int16{"orders": 3, "audit": 2}
			c := restartTestCluster(t, onDir)
			acks := map[string][]clustertest.Ack{}
			cl := clustertest.NewClient(t, c)
			for _, topic := range []string{"orders", "audit"} {
				if err := c.CreateTopic(topic, partitions[topic], rf[topic], configs[topic]); err != nil {
					t.Fatal(err)
				}
				acks[topic] = clustertest.Produce(t, cl, topic, "before", 400)
			}
			cl.Close()
			if abrupt {
				for _, id := range c.BrokerIDs() {
					if err := c.KillBrokerAwaitSession(id); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}

			c2 := restartTestCluster(t, onDir)
			rec := c2.Recovery
			if rec.Topics != 2 || rec.Partitions != 5 || rec.Brokers != 3 || rec.Records == 0 || rec.TruncatedBytes != 0 {
				t.Errorf("Recovery %+v, want 2 topics, 5 partitions, 3 brokers", rec)
			}
			t.Logf("recovery: %v", rec)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			adm := kadm.NewClient(clustertest.NewClient(t, c2))
			details, err := adm.ListTopics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rcs, err := adm.DescribeTopicConfigs(ctx, "orders", "audit")
			if err != nil {
				t.Fatal(err)
			}
			for _, topic := range []string{"orders", "audit"} {
				d, ok := details[topic]
				if !ok || d.Err != nil || int32(len(d.Partitions)) != partitions[topic] {
					t.Errorf("topic %s after the restart: %+v, want %d partitions", topic, d, partitions[topic])
					continue
				}
				for _, pd := range d.Partitions {
					if len(pd.Replicas) != int(rf[topic]) {
						t.Errorf("%s-%d replicas %v, want %d", topic, pd.Partition, pd.Replicas, rf[topic])
					}
				}
				rc, err := rcs.On(topic, nil)
				if err != nil {
					t.Fatal(err)
				}
				for k, want := range configs[topic] {
					var got string
					for _, cfg := range rc.Configs {
						if cfg.Key == k && cfg.Value != nil {
							got = *cfg.Value
						}
					}
					if got != want {
						t.Errorf("%s config %s = %q after the restart, want %q", topic, k, got, want)
					}
				}
			}
			// The restarted cluster takes produces at once (no UNKNOWN_TOPIC_OR_PARTITION, no
			// auto-created single-partition topic) and has every record.
			cl2 := clustertest.NewClient(t, c2)
			for _, topic := range []string{"orders", "audit"} {
				acks[topic] = append(acks[topic], clustertest.Produce(t, cl2, topic, "after", 100)...)
				verifyAll(t, c2, topic, partitions[topic], acks[topic])
			}
			// The leader epochs went on from the old ones (a replica's epoch cache must not
			// see an epoch again).
			for _, topic := range []string{"orders", "audit"} {
				sts, _ := c2.Controller().Partitions(topic)
				for _, st := range sts {
					if st.LeaderEpoch < 2 {
						t.Errorf("%v: leader epoch restarted below the reload's and the election's bumps", st)
					}
				}
			}
		})
	}
}

// TestFollowerBelowLeaderLogStartRecovers (finding 10): a follower is down while the leader's
// retention deletes the segments it would fetch next; when it comes back its fetch offset is
// below the leader's log start, OFFSET_OUT_OF_RANGE, and it starts over at the leader's log
// start (ListOffsets), rejoins the ISR and holds the leader's bytes from the log start on.
func TestFollowerBelowLeaderLogStartRecovers(t *testing.T) {
	c := restartTestCluster(t, func(cfg *cluster.Config) {
		cfg.Broker.LogRetentionCheckIntervalMs = 20
	})
	const topic = "retained"
	if err := c.CreateTopic(topic, 1, 3, map[string]string{
		"min.insync.replicas": "2", "segment.bytes": "4096", "retention.bytes": "16384",
	}); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition(topic, 0)
	follower := st.Replicas[0]
	if follower == st.Leader {
		follower = st.Replicas[1]
	}
	// inISR polls the controller (a subscription's queue would still hold older states).
	inISR := func() bool { s, _ := c.Controller().Partition(topic, 0); return slices.Contains(s.ISR, follower) }
	cl := clustertest.NewClient(t, c, kgo.ProducerBatchMaxBytes(1024), kgo.ProducerLinger(0))
	clustertest.Produce(t, cl, topic, "early", 50)
	leaderReplica := func() interface {
		LogStart() int64
		LEO() int64
		HW() int64
	} {
		r, ok := c.Broker(st.Leader).Replica(topic, 0)
		if !ok {
			t.Fatal("leader has no replica")
		}
		return r
	}
	fr, _ := c.Broker(follower).Replica(topic, 0)
	kafkatest.WaitFor(t, 10*time.Second, "the follower caught up", func() bool { return fr.LEO() == leaderReplica().LEO() })
	behind := fr.LEO()
	if err := c.KillBroker(follower); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 10*time.Second, "ISR without the killed follower", func() bool { return !inISR() })
	for round := 0; leaderReplica().LogStart() <= behind; round++ {
		if round == 20 {
			t.Fatalf("leader log start %d still <= the follower's LEO %d after %d records", leaderReplica().LogStart(), behind, 20*300)
		}
		clustertest.Produce(t, cl, topic, fmt.Sprintf("later%d", round), 300)
	}
	if err := c.RestartBroker(follower); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 10*time.Second, "the follower back in the ISR", inISR)
	clustertest.Produce(t, cl, topic, "last", 20)
	fr, ok := c.Broker(follower).Replica(topic, 0)
	if !ok {
		t.Fatal("restarted follower has no replica")
	}
	lr := leaderReplica()
	kafkatest.WaitFor(t, 10*time.Second, "the follower at the leader's LEO", func() bool { return fr.LEO() == lr.LEO() && fr.HW() == lr.HW() })
	if fr.LogStart() <= behind {
		t.Fatalf("follower log start %d: it did not start over above its old LEO %d (leader log start %d)", fr.LogStart(), behind, lr.LogStart())
	}
	from := max(fr.LogStart(), lr.LogStart())
	want := readRange(t, c, st.Leader, topic, from, lr.HW())
	got := readRange(t, c, follower, topic, from, lr.HW())
	if len(want) == 0 || !bytes.Equal(got, want) {
		t.Fatalf("follower bytes [%d, %d) differ from the leader's (%d vs %d bytes)", from, lr.HW(), len(got), len(want))
	}
	t.Logf("follower LEO %d before it stopped; leader log start %d; follower restarted its log at %d; identical [%d, %d)",
		behind, lr.LogStart(), fr.LogStart(), from, lr.HW())
}

// readRange returns broker id's bytes of topic-0 in [from, to).
func readRange(t *testing.T, c *cluster.Cluster, id int32, topic string, from, to int64) []byte {
	t.Helper()
	r, ok := c.Broker(id).Replica(topic, 0)
	if !ok {
		t.Fatalf("broker %d has no replica of %s-0", id, topic)
	}
	var out []byte
	for off := from; off < to; {
		s, err := r.Read(off, to, math.MaxInt32, true)
		if err != nil {
			t.Fatalf("broker %d read [%d, %d): %v", id, off, to, err)
		}
		if s.Size == 0 {
			s.Release()
			break
		}
		out, err = s.ReadAll(out)
		next := s.NextOffset
		s.Release()
		if err != nil {
			t.Fatal(err)
		}
		off = next
	}
	return out
}
