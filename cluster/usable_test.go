package cluster_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster/clustertest"
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
