package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// flipInSegment inverts one byte inside the records of the first batch of a segment file
// and returns the batch's base offset.
func flipInSegment(t *testing.T, file string) int64 {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	w := log.NewSegmentWalker(f, file, st.Size(), -1)
	if !w.Next() {
		t.Fatalf("%s holds no batch (%v)", file, w.Err())
	}
	b := w.Batch()
	at := b.Position + records.HeaderSize + 5
	one := []byte{0}
	if _, err := f.ReadAt(one, at); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x01
	if _, err := f.WriteAt(one, at); err != nil {
		t.Fatal(err)
	}
	return b.Header.BaseOffset
}

// TestDamagedReplicaHealedOverTheWire: 3 brokers, RF 3, min.insync.replicas 2, acks=all
// records from a franz-go producer; the cluster is stopped, one byte is flipped in one
// replica's segment (the leader's newest or oldest, or a follower's), and the cluster is
// started again on its data directory. The damaged leader serves nothing of the damaged
// batch: a franz-go consumer reads every acknowledged record; the damage is reported (log
// line, DamageStats, the Broker.OnDamage hook) and the replica is healed: back in the ISR,
// identical to the others.
func TestDamagedReplicaHealedOverTheWire(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leader bool // damage the leader's replica (else a follower's)
		newest bool // in the newest segment (else the oldest)
		scrub  bool // the scrub runs (after the start, then every 100 ms)
	}{
		{"leader newest segment", true, true, false},
		{"leader oldest segment", true, false, false},
		{"follower oldest segment", false, false, true},
		// The scrub after the start finds the damage while the damaged replica is the only
		// ISR member back: it keeps leading until another replica has rejoined, then gives way.
		{"leader oldest segment found by the scrub", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var mu sync.Mutex
			var reports []broker.DamageReport
			mutate := func(cfg *cluster.Config) {
				cfg.DataDir = dir
				cfg.Broker.Log.SegmentBytes = 16 << 10
				// Without the scrub the damage is left for the consumer's read to find
				// (the scrub after the start would find it first); a follower's needs it
				// (a follower serves no reads).
				cfg.Broker.ScrubEnable = tc.scrub
				cfg.Broker.ScrubIntervalMs = 100
				cfg.Broker.ScrubBytesPerSecond = 64 << 20
				cfg.Broker.OnDamage = func(r broker.DamageReport) {
					mu.Lock()
					reports = append(reports, r)
					mu.Unlock()
				}
			}
			c := restartTestCluster(t, mutate)
			const topic = "rot"
			if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
				t.Fatal(err)
			}
			cl := clustertest.NewClient(t, c, kgo.ProducerBatchMaxBytes(4<<10))
			acks := clustertest.Produce(t, cl, topic, "v", 6000)
			cl.Close()
			waitInSync(t, c, topic)
			st, _ := c.Controller().Partition(topic, 0)
			id := st.Leader
			if !tc.leader {
				id = slices.DeleteFunc(slices.Clone(st.Replicas), func(r int32) bool { return r == st.Leader })[0]
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			idx := slices.Index(c.BrokerIDs(), id)
			files, _ := filepath.Glob(filepath.Join(dir, "broker-"+strconv.Itoa(idx), topic+"-0", "*.log"))
			sort.Strings(files)
			if len(files) < 3 {
				t.Fatalf("broker %d has segments %v, want at least 3", id, files)
			}
			file := files[0]
			if tc.newest {
				file = files[len(files)-1]
			}
			bad := flipInSegment(t, file)
			t.Logf("flipped a byte of the batch at offset %d in broker %d's %s", bad, id, filepath.Base(file))

			c2 := restartTestCluster(t, mutate)
			waitInSync(t, c2, topic)
			if tc.leader && !tc.scrub {
				// The damaged replica leads again (as after the restart in which it was
				// found serving the damaged batch).
				if st, _ := c2.Controller().Partition(topic, 0); st.Leader != id {
					if _, err := c2.Controller().TransferLeader(topic, 0, id); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.scrub {
				kafkatest.WaitFor(t, 30*time.Second, "the damage reported", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(reports) > 0
				})
				waitInSync(t, c2, topic) // healed: a consumer's ListOffsets finds a leader
			}
			got := clustertest.ConsumeAll(t, c2, topic)
			clustertest.CheckNoLoss(t, acks, got)
			kafkatest.WaitFor(t, 30*time.Second, "the damage reported", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(reports) > 0
			})
			mu.Lock()
			r := reports[0]
			mu.Unlock()
			if r.Broker != id || r.Offset != bad || r.File != file {
				t.Fatalf("damage report %v, want broker %d offset %d in %s", r, id, bad, file)
			}
			kafkatest.WaitFor(t, 30*time.Second, "the damaged replica healed and back in the ISR", func() bool {
				st, _ := c2.Controller().Partition(topic, 0)
				return slices.Contains(st.ISR, id) && len(c2.Controller().Damaged(topic, 0)) == 0 &&
					c2.Broker(id).DamageStats().Truncated >= 1
			})
			if st, _ := c2.Controller().Partition(topic, 0); st.Leader == controller.NoLeader {
				t.Fatalf("no leader after healing: %v", st)
			}
			t.Logf("broker %d: %+v", id, c2.Broker(id).DamageStats())
			verifyAll(t, c2, topic, 1, acks)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c2.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
