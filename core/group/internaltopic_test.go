package group

import (
	"testing"

	"github.com/isrbench/isrbench/core/broker"
)

// TestOffsetsTopicIsInternal: the broker refuses clients' produces to the coordinator's topic
// and lets the coordinator's own writes (InternalTopicsAllowed) through.
func TestOffsetsTopicIsInternal(t *testing.T) {
	if OffsetsTopic != broker.OffsetsTopic || !broker.IsInternalTopic(OffsetsTopic) {
		t.Fatalf("%s is not the broker's internal %s", OffsetsTopic, broker.OffsetsTopic)
	}
}
