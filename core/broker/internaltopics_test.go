package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestInternalTopicsRefusedToClients: a client's produce (Produce and ProduceAppend alike) to
// an internal topic is refused with INVALID_TOPIC_EXCEPTION before anything is appended, and
// so is DeleteRecords; a coordinator's write (InternalTopicsAllowed) is appended. A user
// topic in the same call is appended.
func TestInternalTopicsRefusedToClients(t *testing.T) {
	c := newTestCluster(t, 1, testConfig())
	for _, topic := range []string{OffsetsTopic, TxnStateTopic} {
		c.createTopic(topic, 1, 1, nil)
	}
	c.createTopic("user", 1, 1, nil)
	b := c.leader("user", 0)
	for _, topic := range []string{OffsetsTopic, TxnStateTopic} {
		parts := []ProducePartition{{Topic: topic, Records: batch("client", 1)}, {Topic: "user", Records: batch("u", 1)}}
		b.Produce(context.Background(), -1, 5*time.Second, parts)
		if !errors.Is(parts[0].Err, kerr.InvalidTopicException) || parts[0].BaseOffset != -1 {
			t.Errorf("client Produce to %s: %v, base offset %d; want INVALID_TOPIC_EXCEPTION, -1", topic, parts[0].Err, parts[0].BaseOffset)
		}
		if parts[1].Err != nil {
			t.Errorf("user topic beside %s: %v", topic, parts[1].Err)
		}
		parts = []ProducePartition{{Topic: topic, Records: batch("client", 1)}}
		if w := b.ProduceAppend(1, parts); w != nil || !errors.Is(parts[0].Err, kerr.InvalidTopicException) {
			t.Errorf("client ProduceAppend to %s: %v (wait %v), want INVALID_TOPIC_EXCEPTION", topic, parts[0].Err, w)
		}
		r, _ := b.Replica(topic, 0)
		if leo := r.LEO(); leo != 0 {
			t.Errorf("%s: LEO %d after the refused produces, want 0", topic, leo)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := b.DeleteRecords(ctx, topic, 0, -1); !errors.Is(err, kerr.InvalidTopicException) {
			t.Errorf("DeleteRecords of %s: %v, want INVALID_TOPIC_EXCEPTION", topic, err)
		}
		cancel()
		parts = []ProducePartition{{Topic: topic, Records: batch("coordinator", 2), InternalTopicsAllowed: true}}
		b.Produce(context.Background(), -1, 5*time.Second, parts)
		if parts[0].Err != nil || parts[0].BaseOffset != 0 {
			t.Errorf("coordinator write to %s: %v, base offset %d; want appended at 0", topic, parts[0].Err, parts[0].BaseOffset)
		}
	}
}

// TestIsInternalTopic: Kafka's internal topics, and nothing else.
func TestIsInternalTopic(t *testing.T) {
	for topic, want := range map[string]bool{
		"__consumer_offsets": true, "__transaction_state": true, "__share_group_state": true,
		"__cluster_metadata": false, "__consumer_offsets2": false, "_consumer_offsets": false, "t": false, "": false,
	} {
		if got := IsInternalTopic(topic); got != want {
			t.Errorf("IsInternalTopic(%q) = %v, want %v", topic, got, want)
		}
	}
}
