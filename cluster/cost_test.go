package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
	"github.com/isrbench/isrbench/internal/kafkatest"
	"github.com/isrbench/isrbench/netfetch"
)

// TestCostCountersPerCluster: two embedded clusters in one process count apart. Traffic into
// one (acks=all produces, replicated to its follower, and a consumer Fetch) shows in its
// counters, adding up to what it saw; the other cluster's counters do not move. The busy one
// writes its logs through io_uring (where the host has it): the process's one ring, whose
// io_uring_enter calls count to the cluster they were made for.
func TestCostCountersPerCluster(t *testing.T) {
	t.Parallel() // the counters are the clusters' own: other tests' traffic cannot reach them
	const n = 20
	uring := log.WriterFallbackReason("uring") == ""
	a := clustertest.Start(t, 2, func(cfg *cluster.Config) {
		if err := cfg.Set("isrbench.io", "uring"); err != nil { // pwritev where io_uring is unavailable
			t.Fatal(err)
		}
	})
	b := clustertest.Start(t, 2, func(cfg *cluster.Config) {
		// Its only file writes would be the periodic HW checkpoint: not within the test.
		cfg.Broker.ReplicaHighWatermarkCheckpointIntervalMs = 3_600_000
	})
	if err := a.CreateTopic("cost", 1, 2, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ps, ok := a.Controller().Partition("cost", 0)
	if !ok {
		t.Fatal("no partition cost-0")
	}
	leader := ps.Leader
	follower := 1 - leader
	// Both ISR members are in before the produces (acks=all waits for the follower).
	kafkatest.WaitFor(t, 10*time.Second, "the follower in the ISR", func() bool {
		p, _ := a.Controller().Partition("cost", 0)
		return len(p.ISR) == 2
	})
	rc := kafkatest.Dial(t, a.Addr(leader))

	beforeA, beforeB := a.Cost(), b.Cost()
	var batchBytes int64
	for i := range n {
		batch := kafkatest.Batch(int64(i))
		batchBytes += int64(len(batch))
		pr := kafkatest.NewProduceResp()
		rc.RoundTrip(kafkatest.NewProduce("cost", -1, batch), pr)
		if e := pr.Topics[0].Partitions[0]; e.ErrorCode != 0 || e.BaseOffset != int64(i) {
			t.Fatalf("produce %d: %+v", i, e)
		}
	}
	kafkatest.WaitFor(t, 10*time.Second, "the follower's LEO at the end", func() bool {
		leo, _, ok := a.ReplicaOffsets(follower, "cost", 0)
		return ok && leo == n
	})
	// One consumer Fetch of the whole log.
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "cost"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	fr := kmsg.NewPtrFetchResponse()
	rc.RoundTrip(req, fr)
	if len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].ErrorCode != 0 || int64(len(fr.Topics[0].Partitions[0].RecordBatches)) != batchBytes {
		t.Fatalf("consumer fetch: %+v", fr.Topics)
	}
	// A request is counted just after its response is written.
	kafkatest.WaitFor(t, 10*time.Second, "the consumer fetch to be counted", func() bool {
		return a.Cost().Sub(beforeA).Net.ConsumerFetch.Requests == 1
	})

	d := a.Cost().Sub(beforeA)
	net := d.Net
	if net.ProduceRequests != n || net.Produce.Requests != n {
		t.Errorf("cluster A counted %d produce requests (%d timed), want %d", net.ProduceRequests, net.Produce.Requests, n)
	}
	if net.ConsumerFetch.Requests != 1 || net.FetchRequests != net.ReplicaFetchRequests+1 {
		t.Errorf("cluster A counted %d consumer fetches, %d fetches of which %d replica: want 1 consumer fetch besides the replica fetches",
			net.ConsumerFetch.Requests, net.FetchRequests, net.ReplicaFetchRequests)
	}
	if net.ReplicaFetchRequests < 1 || net.FollowerFetchRequests < 1 || net.FollowerFetchResponses < 1 || d.ApplyTime <= 0 {
		t.Errorf("cluster A's replication not counted: %d replica fetches served, %d sent, %d answered, apply time %v",
			net.ReplicaFetchRequests, net.FollowerFetchRequests, net.FollowerFetchResponses, d.ApplyTime)
	}
	// Every produce request's bytes were read off a socket of A's servers, and the records
	// were sent back out (by sendfile or copied) at least to the follower and the consumer.
	if net.Read < n || net.ReadBytes < batchBytes {
		t.Errorf("cluster A read %d bytes in %d calls, want >= %d bytes of batches in >= %d calls", net.ReadBytes, net.Read, batchBytes, n)
	}
	if out := net.SendfileBytes + net.WriteBytes; out < 2*batchBytes {
		t.Errorf("cluster A sent %d bytes (sendfile %d, write %d), want >= %d: the records to the follower and the consumer",
			out, net.SendfileBytes, net.WriteBytes, 2*batchBytes)
	}
	// Both replicas wrote every batch into their logs.
	if d.Log.Pwritev+d.Log.Pwrite+d.Log.IOUringEnter < 2 || d.Log.WriteBytes < 2*batchBytes {
		t.Errorf("cluster A's logs wrote %d bytes in %d pwritev, %d pwrite and %d io_uring_enter calls, want >= %d bytes (two replicas)",
			d.Log.WriteBytes, d.Log.Pwritev, d.Log.Pwrite, d.Log.IOUringEnter, 2*batchBytes)
	}
	if uring && (d.Log.IOUringEnter < 2 || d.Log.Pwritev != 0) {
		t.Errorf("cluster A, on io_uring, counted %d io_uring_enter and %d pwritev calls: want >= 2 and 0", d.Log.IOUringEnter, d.Log.Pwritev)
	}

	// Cluster B saw no traffic: none of its counters moved, the io_uring calls that cluster
	// A's traffic made on the process's ring included (tests of the package running in
	// parallel have their own clusters).
	db := b.Cost().Sub(beforeB)
	if db.Net != (netfetch.Cost{}) || db.VFS != (vfs.SyscallCounts{}) || db.Log != (log.SyscallCounts{}) || db.ApplyTime != 0 {
		t.Errorf("cluster B, idle, counted %+v", db)
	}
	t.Logf("cluster A: %d records, %d batch bytes: %+v", n, batchBytes, d)
	t.Logf("cluster B: %+v", db)
}
