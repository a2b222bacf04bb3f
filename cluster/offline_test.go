package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/controller"
)

// TestOfflineAfterCorrelatedLossNamesTheWayOut: every broker loses its page cache at once
// (no fsync: the acknowledged records are gone from every replica, the HW checkpoints are
// not). The partition stays offline, as it must, and is reported with what each replica lost
// and the unclean election that brings it back; that election (ElectLeaders UNCLEAN, what
// `isrbench elect --election-type unclean` sends) elects a leader.
func TestOfflineAfterCorrelatedLossNamesTheWayOut(t *testing.T) {
	c := restartTestCluster(t, func(cfg *cluster.Config) {
		cfg.Logf = func(format string, args ...any) {}
	})
	const topic = "lost"
	if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	cl := clustertest.NewClient(t, c)
	acks := clustertest.Produce(t, cl, topic, "v", 500)
	cl.Close()
	waitInSync(t, c, topic)
	clustertest.WaitReplicasHW(t, c, topic, 0, int64(len(acks)))
	for _, id := range c.BrokerIDs() {
		if err := c.Broker(id).WriteHWCheckpoint(); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.BrokerIDs() {
		if err := c.CrashBrokerAwaitSession(id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.BrokerIDs() {
		if err := c.RestartBroker(id); err != nil {
			t.Fatal(err)
		}
	}
	off := c.OfflinePartitions()
	if len(off) != 1 || off[0].State.Topic != topic {
		t.Fatalf("offline partitions %+v, want %s-0", off, topic)
	}
	// Each replica knows the HW it had checkpointed: the leader's is every acknowledged
	// record, a follower's may lag (its HW follows the leader's a fetch later).
	lost := map[int32]int64{}
	var most int64
	for _, r := range off[0].Replicas {
		lost[r.Broker] = r.Lost
		most = max(most, r.Lost)
		if !r.Running || !r.Damaged || r.Lost <= 0 || r.Lost > int64(len(acks))-r.LEO {
			t.Errorf("replica %+v: want running, damaged, 1..%d lost (acknowledged %d, LEO %d)", r, int64(len(acks))-r.LEO, len(acks), r.LEO)
		}
	}
	if most != int64(len(acks)) {
		t.Errorf("the most any replica knows it lost is %d, want the %d acknowledged", most, len(acks))
	}
	desc := off[0].String()
	t.Log(desc)
	for _, want := range []string{"is offline", "isrbench elect --election-type unclean --topic lost --partition 0", "kafka-leader-election.sh", "loses every record acknowledged above"} {
		if !strings.Contains(desc, want) {
			t.Errorf("report lacks %q: %s", want, desc)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range c.BrokerIDs() {
		lag := int64(-1)
		for _, d := range dirs[id] {
			if dp, ok := d.Topics.Lookup(topic, 0); ok {
				lag = dp.OffsetLag
			}
		}
		if lag != lost[id] {
			t.Errorf("broker %d: DescribeLogDirs offset lag %d, want the %d acknowledged records it lost", id, lag, lost[id])
		}
	}
	res, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[topic][0]; r.Err != nil {
		t.Fatalf("unclean election: %v %s", r.Err, r.ErrMessage)
	}
	if st, _ := c.Controller().Partition(topic, 0); st.Leader == controller.NoLeader {
		t.Fatalf("after the unclean election: %v", st)
	}
	if len(c.OfflinePartitions()) != 0 {
		t.Fatalf("still offline: %v", c.OfflinePartitions())
	}
}
