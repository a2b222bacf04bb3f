package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
)

// TestNumReplicaFetchersLive changes num.replica.fetchers through IncrementalAlterConfigs
// while producers write with acks=all: every broker's fetchers follow FetcherFor with the
// new count, the fetchers of removed indexes stop, nothing acknowledged is lost and the
// replicas end identical.
func TestNumReplicaFetchersLive(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	const parts = 12
	if err := c.CreateTopic("nf", parts, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	pcl := clustertest.NewClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("nf"))
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	ctx := clustertest.Context(t)
	var mu sync.Mutex
	var acks []clustertest.Ack
	var failed error
	progress := make(chan struct{}, 1) // signalled after every acknowledged produce
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rs := pcl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("nf-%06d", i)), kgo.StringRecord(fmt.Sprintf("nf-%06d-b", i)))
			mu.Lock()
			for _, r := range rs {
				if r.Err != nil && failed == nil {
					failed = r.Err
				} else if r.Err == nil {
					acks = append(acks, clustertest.Ack{Partition: r.Record.Partition, Offset: r.Record.Offset, Value: string(r.Record.Value)})
				}
			}
			mu.Unlock()
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	})
	acked := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acks)
	}
	waitAcked := func(n int) {
		t.Helper()
		deadline := time.NewTimer(20 * time.Second)
		defer deadline.Stop()
		for acked() < n {
			select {
			case <-progress:
			case <-deadline.C:
				t.Fatalf("only %d records acknowledged, want %d", acked(), n)
			}
		}
	}
	waitAcked(100)
	for _, n := range []int{2, 4, 3, 6, 3, 1} {
		before := map[int32][]*broker.Fetcher{}
		for _, id := range c.BrokerIDs() {
			before[id] = c.Broker(id).Fetchers()
		}
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "num.replica.fetchers", Value: kmsg.StringPtr(strconv.Itoa(n))}})
		if err != nil || rs[0].Err != nil {
			t.Fatalf("num.replica.fetchers=%d: %v %+v", n, err, rs)
		}
		for _, id := range c.BrokerIDs() {
			b := c.Broker(id)
			if b.NumReplicaFetchers() != n {
				t.Fatalf("broker %d runs %d fetchers per source after the response, want %d", id, b.NumReplicaFetchers(), n)
			}
			for _, f := range b.Fetchers() {
				for _, fp := range f.Partitions() {
					if want := broker.FetcherFor(fp.Topic, fp.Partition, n); f.Index() != want {
						t.Errorf("n=%d broker %d: %s-%d on fetcher %d, want %d", n, id, fp.Topic, fp.Partition, f.Index(), want)
					}
				}
			}
			for _, f := range before[id] {
				if f.Index() >= n {
					select {
					case <-f.Done():
					case <-time.After(10 * time.Second):
						t.Fatalf("n=%d broker %d: fetcher %d-%d still runs", n, id, f.Source(), f.Index())
					}
				}
			}
		}
		waitAcked(acked() + 100)
	}
	close(stop)
	wg.Wait()
	if failed != nil {
		t.Fatalf("produce failed during the resizes: %v", failed)
	}
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "nf"))
	clustertest.CheckReplicasIdentical(t, c, "nf", parts)
	// The dynamic config is durable: describe reports it.
	bcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := clustertest.ConfigOf(t, bcs, "", "num.replica.fetchers"); cfg.MaybeValue() != "1" {
		t.Errorf("cluster default num.replica.fetchers = %q", cfg.MaybeValue())
	}
}

// TestAutoLeaderRebalance: a restarted broker gets back the leadership of the partitions it
// prefers within leader.imbalance.check.interval.seconds (auto.leader.rebalance.enable).
func TestAutoLeaderRebalance(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.LeaderImbalanceCheckIntervalSeconds = 1 })
	if err := c.CreateTopic("lb", 3, 3, nil); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition("lb", 0)
	pref := st.Replicas[0]
	wait := clustertest.WatchPartition(t, c, st.Replicas[1], "lb", 0)
	if err := c.KillBroker(pref); err != nil {
		t.Fatal(err)
	}
	wait("another leader", func(s controller.PartitionState) bool { return s.Leader != pref && s.Leader >= 0 })
	if err := c.RestartBroker(pref); err != nil {
		t.Fatal(err)
	}
	wait("the preferred replica back in the ISR", func(s controller.PartitionState) bool { return slices.Contains(s.ISR, pref) })
	got := wait("the preferred replica leading again", func(s controller.PartitionState) bool { return s.Leader == pref })
	if got.Leader != pref {
		t.Fatalf("lb-0 %v", got)
	}
}

// TestAdminChangesSurviveRestart: deletions, added partitions, topic and dynamic broker
// configs survive a restart of the whole cluster on its data directory (isrbench serve
// --data-dir), and the brokers apply the dynamic configs again.
func TestAdminChangesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() *cluster.Cluster {
		t.Helper()
		cfg := cluster.DefaultConfig()
		cfg.DataDir = dir
		cfg.Broker.ReplicaFetchBackoffMs = 50
		cfg.Logf = t.Logf
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := cluster.Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := start()
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	ctx := clustertest.Context(t)
	for _, name := range []string{"stay", "go"} {
		if err := c.CreateTopic(name, 1, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	acks := clustertest.Produce(t, clustertest.NewClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks())), "stay", "s", 30)
	if rs, err := adm.DeleteTopics(ctx, "go"); err != nil || rs["go"].Err != nil {
		t.Fatal(err, rs["go"].Err)
	}
	if rs, err := adm.UpdatePartitions(ctx, 3, "stay"); err != nil || rs["stay"].Err != nil {
		t.Fatal(err, rs["stay"].Err)
	}
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("86400000")}}, "stay"); err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	if rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "num.replica.fetchers", Value: kmsg.StringPtr("2")}}); err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = start()
	defer c.Close()
	if got := c.Controller().Topics(); slices.Contains(got, "go") || !slices.Contains(got, "stay") {
		t.Errorf("topics after the restart: %v", got)
	}
	if ps, _ := c.Controller().Partitions("stay"); len(ps) != 3 {
		t.Errorf("stay has %d partitions after the restart, want 3", len(ps))
	}
	if cfg := c.Controller().TopicConfig("stay"); cfg["retention.ms"] != "86400000" {
		t.Errorf("stay's configs after the restart: %v", cfg)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range c.BrokerIDs() {
		if n := c.Broker(id).NumReplicaFetchers(); n != 2 {
			t.Errorf("broker %d runs %d fetchers per source after the restart, want the dynamic 2", id, n)
		}
	}
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "stay"))
}
