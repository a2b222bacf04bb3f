package netfetch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
)

// TestReplicaFetchSessions: the replica fetchers use incremental sessions (isrbench.fetch.sessions)
// with every partition kept in sync: records produced to some partitions reach every
// replica while the idle partitions are left out of the responses; with sessions off every
// fetch is full. A kgo consumer (which also opens sessions) reads everything back.
func TestReplicaFetchSessions(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("sessions=%v", on), func(t *testing.T) {
			c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
				cfg.FetchSessions = on
				cfg.Broker.ReplicaFetchWaitMaxMs = 50
			})
			if err := c.CreateTopic("sess", 12, 3, nil); err != nil {
				t.Fatal(err)
			}
			cl := clustertest.NewClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var acks []clustertest.Ack
			for i := 0; i < 60; i++ {
				p := int32(i % 3) // partitions 0..2 get records, 3..11 stay idle
				r := &kgo.Record{Topic: "sess", Partition: p, Value: []byte(fmt.Sprintf("v%03d", i))}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
				acks = append(acks, clustertest.Ack{Partition: p, Offset: r.Offset, Value: string(r.Value)})
			}
			clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "sess"))
			clustertest.CheckReplicasIdentical(t, c, "sess", 12)
			st := c.Stats()
			t.Logf("incremental fetches %d, partitions left out %d, fetches %d", st.IncrementalFetches, st.FetchPartitionsOmitted, st.Requests["Fetch"])
			if on && (st.IncrementalFetches == 0 || st.FetchPartitionsOmitted == 0) {
				t.Errorf("sessions on: %d incremental fetches leaving out %d partitions, want both > 0", st.IncrementalFetches, st.FetchPartitionsOmitted)
			}
		})
	}
}

// TestReplicaFetchSessionLostOnLeaderRestart: a leader that restarts forgets its sessions;
// the followers' next incremental fetch on a new connection opens a new one, and
// replication goes on (no record lost, replicas identical).
func TestReplicaFetchSessionLostOnLeaderRestart(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.Broker.ReplicaFetchWaitMaxMs = 50 })
	if err := c.CreateTopic("lost", 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	cl := clustertest.NewClient(t, c)
	acks := clustertest.Produce(t, cl, "lost", "a", 100)
	st, _ := c.Controller().Partition("lost", 0)
	if err := c.KillBroker(st.Leader); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartBroker(st.Leader); err != nil {
		t.Fatal(err)
	}
	acks = append(acks, clustertest.Produce(t, cl, "lost", "b", 100)...)
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "lost"))
	clustertest.CheckReplicasIdentical(t, c, "lost", 3)
}
