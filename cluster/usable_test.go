package cluster_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// TestCreateTopicThenProduceAtOnce creates a topic through the Kafka wire and produces to
// every partition at once with acks=all, through a client that gives up on the first
// UNKNOWN_TOPIC_OR_PARTITION and after two retries of anything else: not one record may
// fail. "waits" lets CreateTopics wait for the new leaders (the request's timeout);
// "no wait" asks it not to (timeout_ms 0), so only Metadata's view keeps the client from
// a leader that cannot take the records yet.
func TestCreateTopicThenProduceAtOnce(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	for _, tc := range []struct {
		name      string
		timeoutMs int32
	}{
		{"waits", 30000},
		{"no wait", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const parts, perPart = 60, 20
			topic := fmt.Sprintf("fresh-%d", tc.timeoutMs)
			retries := kgo.RecordRetries(2)
			if tc.timeoutMs == 0 {
				// Metadata shows the partitions without a leader until their leaders
				// can take produce requests (LEADER_NOT_AVAILABLE, retried); that
				// wait is no failure, so retries are not bounded here.
				retries = kgo.RecordDeliveryTimeout(30 * time.Second)
			}
			cl := clustertest.NewClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.UnknownTopicRetries(0), retries, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			ctx := clustertest.Context(t)

			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = tc.timeoutMs
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, parts, 3
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
				t.Fatalf("create %s: %v", topic, err)
			}

			var mu sync.Mutex
			failed := map[string]int{}
			var wg sync.WaitGroup
			for i := range parts * perPart {
				wg.Add(1)
				r := &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: []byte(fmt.Sprint(i))}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					defer wg.Done()
					if err != nil {
						mu.Lock()
						failed[err.Error()]++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(failed) > 0 {
				t.Errorf("records failed right after the topic was created: %v", failed)
			}
		})
	}
}

// TestTooFewBrokersAlive: with a broker down, a topic of a replication factor larger than
// the alive brokers is not created, neither by CreateTopics (explicit or
// default.replication.factor) nor by auto-creation, which answers Metadata with
// INVALID_REPLICATION_FACTOR rather than creating the topic narrower for good. Once the
// broker is back, auto-creation makes the topic with its full replication factor.
func TestTooFewBrokersAlive(t *testing.T) {
	for _, drf := range []int16{3, 0} { // 0: min(3, brokers)
		t.Run(fmt.Sprintf("default.replication.factor=%d", drf), func(t *testing.T) {
			c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.DefaultReplicationFactor = drf })
			if err := c.KillBroker(2); err != nil {
				t.Fatal(err)
			}
			rc := kafkatest.Dial(t, c.Addr(0))
			autoCreate := func(name string) kmsg.MetadataResponseTopic {
				t.Helper()
				req := kmsg.NewPtrMetadataRequest()
				req.SetVersion(12)
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = &name
				req.Topics = append(req.Topics, rt)
				req.AllowAutoTopicCreation = true
				resp := kmsg.NewPtrMetadataResponse()
				rc.RoundTrip(req, resp)
				if len(resp.Topics) != 1 {
					t.Fatalf("metadata for %s: %d topics", name, len(resp.Topics))
				}
				return resp.Topics[0]
			}
			if got := autoCreate("auto-narrow"); got.ErrorCode != kerr.InvalidReplicationFactor.Code || len(got.Partitions) != 0 {
				t.Errorf("auto-create with 2 of 3 brokers alive: error %v, %d partitions; want INVALID_REPLICATION_FACTOR and none",
					kerr.ErrorForCode(got.ErrorCode), len(got.Partitions))
			}

			create := kmsg.NewPtrCreateTopicsRequest()
			create.SetVersion(7)
			create.TimeoutMillis = 10000
			for _, tc := range []struct {
				name string
				rf   int16
			}{{"explicit-3", 3}, {"default-rf", -1}, {"explicit-2", 2}} {
				ct := kmsg.NewCreateTopicsRequestTopic()
				ct.Topic, ct.NumPartitions, ct.ReplicationFactor = tc.name, 1, tc.rf
				create.Topics = append(create.Topics, ct)
			}
			cresp := kmsg.NewPtrCreateTopicsResponse()
			rc.RoundTrip(create, cresp)
			want := map[string]error{"explicit-3": kerr.InvalidReplicationFactor, "default-rf": kerr.InvalidReplicationFactor, "explicit-2": nil}
			for _, rt := range cresp.Topics {
				if got := kerr.ErrorForCode(rt.ErrorCode); got != want[rt.Topic] {
					t.Errorf("CreateTopics %s with 2 of 3 brokers alive: %v, want %v", rt.Topic, got, want[rt.Topic])
				}
			}
			for _, name := range []string{"auto-narrow", "explicit-3", "default-rf"} {
				if _, ok := c.Controller().Partitions(name); ok {
					t.Errorf("topic %s was created with 2 of 3 brokers alive", name)
				}
			}

			if err := c.RestartBroker(2); err != nil {
				t.Fatal(err)
			}
			got := autoCreate("auto-narrow")
			if got.ErrorCode != 0 || len(got.Partitions) != 1 || len(got.Partitions[0].Replicas) != 3 {
				t.Errorf("auto-create with every broker back: error %v, partitions %+v; want one of 3 replicas",
					kerr.ErrorForCode(got.ErrorCode), got.Partitions)
			}
		})
	}
}
