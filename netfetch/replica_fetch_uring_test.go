package netfetch_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/iouring"
	"github.com/isrbench/isrbench/netfetch"
)

// TestReplicaFetchUring: with isrbench.replica.fetch.uring the followers fetch through
// io_uring (one io_uring_enter per round trip, no write or read of their own): every record
// produced with acks=all (the full ISR of 3) is acknowledged and read back, a record larger
// than the first receive's buffer (64 KiB) replicates whole, and the followers parked in the
// kernel when their leader is killed fetch from the new one.
func TestReplicaFetchUring(t *testing.T) {
	if ok, reason := iouring.Available(); !ok {
		t.Skipf("io_uring unavailable: %s", reason)
	}
	for _, large := range []bool{false, true} {
		t.Run(fmt.Sprintf("requests.written=%v", large), func(t *testing.T) {
			if large {
				// Every request counts as larger than the ring takes: written with write(2),
				// the response received through the ring.
				netfetch.SetUringSendMax(t, 0)
			}
			testReplicaFetchUring(t, large)
		})
	}
}

func testReplicaFetchUring(t *testing.T, written bool) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.ReplicaFetchUring = true })
	if err := c.CreateTopic("ur", 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	cl := clustertest.NewClient(t, c, kgo.DefaultProduceTopic("ur"), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	var acks []clustertest.Ack
	before := c.Cost().Net
	for i := 0; i < 100; i++ { // one at a time: every record is its own round of fetches
		acks = append(acks, clustertest.Produce(t, cl, "ur", fmt.Sprintf("u%d-", i), 1)...)
	}
	d := c.Cost().Net.Sub(before)
	leaderCalls := d.Produce.Requests + d.ReplicaFetch.Requests + d.ConsumerFetch.Requests + d.Other.Requests
	t.Logf("%d io_uring_enter for %d replica fetches (%d answered); leaders: %d requests; %d reads, %d writes",
		d.UringEnter, d.FollowerFetchRequests, d.FollowerFetchResponses, leaderCalls, d.Read, d.Write)
	if d.FollowerFetchResponses < 100 || d.UringEnter < d.FollowerFetchResponses {
		t.Fatalf("%d io_uring_enter for %d replica fetch responses: want one at least per response, 100 responses at least", d.UringEnter, d.FollowerFetchResponses)
	}
	// The followers read nothing from their sockets, and wrote their requests only when they
	// were too large for the ring.
	followerWrites := int64(0)
	if written {
		followerWrites = d.FollowerFetchRequests
	}
	// The counters are read while requests may be in flight: a response written before its
	// request's time was counted, or a request read before it is answered, is a few calls off.
	const slack = 10
	if w := d.Write - leaderCalls; w < followerWrites-slack || w > followerWrites+slack || d.Read > leaderCalls+slack {
		t.Fatalf("%d writes and %d reads for %d requests the leaders answered and %d replica fetches written: want the followers' writes %d and no reads",
			d.Write, d.Read, leaderCalls, d.FollowerFetchRequests, followerWrites)
	}

	// 300 KiB in one record: the response outgrows the 64 KiB receive buffer.
	big := strings.Repeat("b", 300<<10)
	acks = append(acks, clustertest.Produce(t, cl, "ur", big, 1)...)

	// Kill the leader while its followers wait for their answers: they see the connection end,
	// and replicate from the new leader.
	st, _ := c.Controller().Partition("ur", 0)
	if err := c.KillBroker(st.Leader); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		acks = append(acks, clustertest.Produce(t, cl, "ur", fmt.Sprintf("after%d-", i), 1)...)
	}
	if err := c.RestartBroker(st.Leader); err != nil {
		t.Fatal(err)
	}
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "ur"))
	clustertest.CheckReplicasIdentical(t, c, "ur", 1)
}

// TestReplicaFetchUringStop: a follower stopped while its fetch waits in io_uring_enter for a
// leader that has nothing to send (replica.fetch.wait.max.ms and replica.socket.timeout.ms of
// 10 minutes) stops at once: closing the connection shuts its socket down, which ends the
// kernel's receive (closing the descriptor alone would wait for the leader's answer).
func TestReplicaFetchUringStop(t *testing.T) {
	if ok, reason := iouring.Available(); !ok {
		t.Skipf("io_uring unavailable: %s", reason)
	}
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		cfg.ReplicaFetchUring = true
		for k, v := range map[string]string{"replica.lag.time.max.ms": "600000", "replica.fetch.wait.max.ms": "600000", "replica.socket.timeout.ms": "600000"} {
			if err := cfg.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
	})
	_, follower := clustertest.FollowedTopic(t, c, "us")
	cl := clustertest.NewClient(t, c, kgo.DefaultProduceTopic("us"), kgo.ProducerLinger(0))
	// Acknowledged by all 3: the followers fetched it, and their next fetches wait.
	acks := clustertest.Produce(t, cl, "us", "one", 1)
	if err := c.KillBroker(follower); err != nil { // returns once the broker's fetchers ended
		t.Fatal(err)
	}
	if err := c.RestartBroker(follower); err != nil {
		t.Fatal(err)
	}
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "us"))
}
