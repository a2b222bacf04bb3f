package netfetch_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/internal/kafkatest"
	"github.com/isrbench/isrbench/netfetch"
)

// TestRequestTimeLocalRemoteSend: the request-time counters put a handler's work in Local and
// its waiting in Remote, by kind, from real requests to a real server: the produce spin (CPU) is
// local and the produce delay (a sleep) is remote; a consumer Fetch parked in its long poll is
// remote; every request is counted once.
func TestRequestTimeLocalRemoteSend(t *testing.T) {
	const spin, delay, maxWait = 8 * time.Millisecond, 150 * time.Millisecond, 200
	c := clustertest.Start(t, 1, func(cfg *cluster.Config) {
		cfg.Broker.ProduceSpin = spin // per record: one record per request below
		cfg.Broker.ProduceDelay = delay
	})
	if err := c.CreateTopic("rt", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	rc := kafkatest.Dial(t, c.Addr(0))

	before := c.Cost().Net
	pr := kafkatest.NewProduceResp()
	rc.RoundTrip(kafkatest.NewProduce("rt", -1, kafkatest.Batch(0)), pr)
	if e := pr.Topics[0].Partitions[0]; e.ErrorCode != 0 {
		t.Fatalf("produce: %+v", e)
	}
	d := costAfter(t, c, before, func(c netfetch.Cost) int64 { return c.Produce.Requests })
	if d.Produce.Requests != 1 || d.ConsumerFetch.Requests != 0 || d.ReplicaFetch.Requests != 0 {
		t.Fatalf("counted %+v, want one produce request", d)
	}
	// The spin is calibrated once per process, a clock that speeds up later makes it shorter.
	if d.Produce.Local < spin/2 || d.Produce.Local >= delay {
		t.Errorf("produce local %v: want the spin (about %v), not the delay (%v)", d.Produce.Local, spin, delay)
	}
	if d.Produce.Remote < delay {
		t.Errorf("produce remote %v: want the delay (>= %v)", d.Produce.Remote, delay)
	}

	// A consumer Fetch at the end of the log: it parks for max.wait.ms, then answers empty.
	before = c.Cost().Net
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, maxWait, 1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "rt"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	fr := kmsg.NewPtrFetchResponse()
	rc.RoundTrip(req, fr)
	if len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].ErrorCode != 0 || len(fr.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("fetch at the end of the log: %+v", fr.Topics)
	}
	d = costAfter(t, c, before, func(c netfetch.Cost) int64 { return c.ConsumerFetch.Requests })
	if d.ConsumerFetch.Requests != 1 || d.Produce.Requests != 0 {
		t.Fatalf("counted %+v, want one consumer fetch", d)
	}
	if w := time.Duration(maxWait) * time.Millisecond; d.ConsumerFetch.Remote < w*9/10 || d.ConsumerFetch.Local >= w/2 {
		t.Errorf("parked fetch: remote %v (want about %v), local %v (want well below)", d.ConsumerFetch.Remote, w, d.ConsumerFetch.Local)
	}
	if d.ConsumerFetch.Send <= 0 {
		t.Errorf("fetch send time %v, want > 0", d.ConsumerFetch.Send)
	}
}

// costAfter returns the counters since before once count of them is past 0: a request is
// counted right after its response is written, so just after the client has read it.
func costAfter(t *testing.T, c *cluster.Cluster, before netfetch.Cost, count func(netfetch.Cost) int64) netfetch.Cost {
	t.Helper()
	kafkatest.WaitFor(t, 10*time.Second, "the request to be counted", func() bool { return count(c.Cost().Net.Sub(before)) > 0 })
	return c.Cost().Net.Sub(before)
}
