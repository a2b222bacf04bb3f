package cluster_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMetadataDiskFullLosesNothing: the metadata disk fills (every write to the metadata
// log fails with ENOSPC) and a follower stops. The controller must refuse the follower's
// fencing and the leader's ISR shrink rather than deliver changes it cannot persist, so the
// HW stays below what the stopped follower lacks and nothing more is acknowledged. After an
// abrupt stop of the whole cluster (kill -9 of serve) and a restart with room on the disk,
// the stopped follower (broker 0, the first to register) must not lead with a shorter log:
// every acknowledged record is there.
func TestMetadataDiskFullLosesNothing(t *testing.T) {
	dir := t.TempDir()
	efs := vfs.NewErrorFS(nil)
	var full sync.Mutex
	fullNow := false
	efs.SetInjector(func(op vfs.Op, path string) error {
		full.Lock()
		defer full.Unlock()
		if fullNow && strings.Contains(path, "/"+cluster.MetadataDir+"/") && (op == vfs.OpWrite || op == vfs.OpSync || op == vfs.OpCreate) {
			return syscall.ENOSPC
		}
		return nil
	})
	setFull := func(v bool) { full.Lock(); fullNow = v; full.Unlock() }
	mutate := func(cfg *cluster.Config) {
		cfg.DataDir = dir
		cfg.Controller.FS = efs
		cfg.Controller.BrokerSessionTimeoutMs = 1000
		cfg.Broker.HeartbeatIntervalMs = 100
		cfg.Broker.ReplicaLagTimeMaxMs = 500
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
	}
	c := clustertest.Start(t, 3, mutate)
	// The first topic's replicas start at broker 0; the second's at broker 1, so broker 0
	// follows in it and registers first at a restart.
	if err := c.CreateTopic("first", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	const topic = "orders"
	if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition(topic, 0)
	if st.Leader == 0 || st.Replicas[len(st.Replicas)-1] != 0 {
		t.Fatalf("%v: want broker 0 a follower", st)
	}
	cl := clustertest.NewClient(t, c)
	acks := clustertest.Produce(t, cl, topic, "before", 300)
	cl.Close()

	setFull(true)
	if err := c.KillBroker(0); err != nil {
		t.Fatal(err)
	}
	// Produce while the metadata disk is full: nothing may be acknowledged that the ISR
	// on record (with broker 0) does not hold.
	cl2 := clustertest.NewClient(t, c, kgo.DisableIdempotentWrite(), kgo.RecordRetries(1), kgo.ProduceRequestTimeout(2*time.Second), kgo.RecordDeliveryTimeout(5*time.Second), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	failed := 0
	for i := 0; i < 200; i++ {
		wg.Add(1)
		cl2.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte("during-" + time.Now().Format("150405.000000"))}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			acks = append(acks, clustertest.Ack{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		})
	}
	wg.Wait()
	cl2.Close()
	s := c.Controller().Stats()
	if s.MetadataWriteFailures == 0 || s.MetadataLogError == "" {
		t.Errorf("controller stats %+v: want refused changes and the error", s)
	}
	if err := c.Controller().MetadataLogError(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("MetadataLogError = %v, want ENOSPC", err)
	}
	if st, _ := c.Controller().Partition(topic, 0); len(st.ISR) != 3 {
		t.Errorf("%v: the ISR shrank while the metadata log could not be written", st)
	}
	t.Logf("during the full metadata disk: %d of 200 produces failed; controller %+v", failed, s)

	// kill -9 of serve: every broker stops abruptly, then the process.
	for _, id := range c.BrokerIDs()[1:] {
		if err := c.KillBrokerAwaitSession(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	setFull(false)
	c2 := clustertest.Start(t, 3, mutate)
	verifyAll(t, c2, topic, 1, acks)
	if st, _ := c2.Controller().Partition(topic, 0); st.Leader == 0 {
		t.Logf("broker 0 leads after the restart (it caught up first): %v", st)
	}
}
