package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/partition"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// TestLeaderEpochCheckpointQueued: with isrbench.leader.epoch.checkpoint.async the process's
// queue writes every replica's leader-epoch-checkpoint (the leader's from its election, the
// followers' from their first fetched batch) soon after, and a clean Close leaves them all
// written; off, they are written before the records are acknowledged.
func TestLeaderEpochCheckpointQueued(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			dir := t.TempDir()
			c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
				cfg.DataDir = dir
				cfg.Broker.EpochCheckpointAsync = async
			})
			const parts = 12
			if err := c.CreateTopic("ep", parts, 3, nil); err != nil {
				t.Fatal(err)
			}
			cl := clustertest.NewClient(t, c, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			clustertest.Produce(t, cl, "ep", "v", 3*parts)
			want := make([]string, parts) // "0\n1\nE 0\n": the leader's epoch from offset 0
			for p := range want {
				st, ok := c.Controller().Partition("ep", int32(p))
				if !ok {
					t.Fatalf("ep-%d unknown", p)
				}
				want[p] = fmt.Sprintf("0\n1\n%d 0\n", st.LeaderEpoch)
			}
			check := func() (string, bool) {
				for b := 0; b < 3; b++ {
					for p := 0; p < parts; p++ {
						path := filepath.Join(dir, fmt.Sprintf("broker-%d", b), fmt.Sprintf("ep-%d", p), partition.EpochCheckpointFile)
						if data, err := os.ReadFile(path); err != nil || string(data) != want[p] {
							return fmt.Sprintf("%s: %q (%v), want %q", path, data, err, want[p]), false
						}
					}
				}
				return "", true
			}
			if async {
				kafkatest.WaitFor(t, time.Minute, "every replica's leader-epoch-checkpoint", func() bool { _, ok := check(); return ok })
			} else if why, ok := check(); !ok {
				t.Fatalf("after the acks: %s", why)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if why, ok := check(); !ok {
				t.Fatalf("after Close: %s", why)
			}
		})
	}
}
