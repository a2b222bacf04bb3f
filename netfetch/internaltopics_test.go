package netfetch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/txn"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// TestProduceToInternalTopicsRefused: over the wire, a client's Produce to __consumer_offsets
// or __transaction_state is answered INVALID_TOPIC_EXCEPTION (plain, and a transactional
// batch, which is not sent to a coordinator for verification first), an acks=0 one closes
// the connection, nothing reaches the logs, and Metadata marks both topics internal (kadm
// hides them). The group coordinator's own writes still land: a commit is fetched back.
func TestProduceToInternalTopicsRefused(t *testing.T) {
	c := clustertest.Start(t, 1, func(cfg *cluster.Config) {
		cfg.Group.OffsetsTopicNumPartitions = 1
		cfg.Txn.NumPartitions = 1
	})
	if _, err := group.EnsureOffsetsTopic(c.Controller(), c.Config().Group); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.EnsureStateTopic(c.Controller(), c.Config().Txn); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	internal := []string{group.OffsetsTopic, txn.StateTopic}
	rc := kafkatest.Dial(t, c.Addr(0))
	for _, topic := range internal {
		for _, tc := range []struct {
			what  string
			batch []byte
			txnID *string
		}{
			{"plain", kafkatest.Batch(0), nil},
			{"transactional", records.AppendTxnBatch(nil, 7, 0, time.Now().UnixMilli(), []records.Record{{Value: []byte("t")}}), kmsg.StringPtr("tx")},
		} {
			req := kafkatest.NewProduce(topic, -1, tc.batch)
			req.TransactionID = tc.txnID
			resp := kafkatest.NewProduceResp()
			rc.RoundTrip(req, resp)
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.InvalidTopicException.Code || p.BaseOffset != -1 {
				t.Errorf("%s Produce to %s: error %d, base offset %d; want INVALID_TOPIC_EXCEPTION (%d), -1",
					tc.what, topic, p.ErrorCode, p.BaseOffset, kerr.InvalidTopicException.Code)
			}
		}
		if leo, _, ok := c.ReplicaOffsets(0, topic, 0); !ok || leo != 0 {
			t.Errorf("%s-0: LEO %d (hosted %v) after the refused produces, want 0", topic, leo, ok)
		}
		// acks=0: no response can carry the error; the broker closes the connection.
		ac := kafkatest.Dial(t, c.Addr(0))
		ac.Send(kafkatest.NewProduce(topic, 0, kafkatest.Batch(0)))
		ac.ExpectClosed()
	}

	// A real client: the error reaches the application, not retried.
	cl := clustertest.NewClient(t, c, kgo.RecordRetries(2))
	for _, topic := range internal {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.InvalidTopicException) {
			t.Errorf("franz-go produce to %s: %v, want INVALID_TOPIC_EXCEPTION", topic, err)
		}
	}
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, internal...)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range internal {
		if d, ok := md.Topics[topic]; !ok || !d.IsInternal || !broker.IsInternalTopic(topic) {
			t.Errorf("metadata of %s: %+v (present %v), want is_internal", topic, d, ok)
		}
	}
	if topics, err := adm.ListTopics(ctx); err != nil || topics.Has(group.OffsetsTopic) || topics.Has(txn.StateTopic) {
		t.Errorf("kadm ListTopics: %v (%v), want the internal topics hidden", topics.Names(), err)
	}

	// The coordinator's own write to __consumer_offsets is not refused.
	if err := c.CreateTopic("user", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "user", Partition: 0, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "g", commit); err != nil {
		t.Fatalf("offset commit (the coordinator's write to %s): %v", group.OffsetsTopic, err)
	}
	if leo, _, _ := c.ReplicaOffsets(0, group.OffsetsTopic, 0); leo < 1 {
		t.Errorf("%s-0: LEO %d after an offset commit, want the commit appended", group.OffsetsTopic, leo)
	}
}
