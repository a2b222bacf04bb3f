package txn

import (
	"testing"

	"github.com/isrbench/isrbench/core/broker"
)

// TestStateTopicIsInternal: the broker refuses clients' produces to the coordinator's topic
// and lets the coordinator's own writes (InternalTopicsAllowed) through.
func TestStateTopicIsInternal(t *testing.T) {
	if StateTopic != broker.TxnStateTopic || !broker.IsInternalTopic(StateTopic) || OffsetsTopic != broker.OffsetsTopic {
		t.Fatalf("%s / %s are not the broker's internal %s / %s", StateTopic, OffsetsTopic, broker.TxnStateTopic, broker.OffsetsTopic)
	}
}
