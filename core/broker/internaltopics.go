package broker

// Kafka's internal topics (org.apache.kafka.common.internals.Topic.INTERNAL_TOPICS): written
// by the coordinators only, listed with is_internal set in Metadata, and refused to clients'
// Produce and DeleteRecords with INVALID_TOPIC_EXCEPTION.
const (
	// OffsetsTopic holds the group coordinator's committed offsets and group metadata
	// (core/group).
	OffsetsTopic = "__consumer_offsets"
	// TxnStateTopic holds the transaction coordinator's state (core/txn).
	TxnStateTopic = "__transaction_state"
	// ShareGroupStateTopic is the share-group state topic of KIP-932: isrbench has no
	// share-group coordinator, but a client may not write to it either, as in Kafka 4.
	ShareGroupStateTopic = "__share_group_state"
)

// IsInternalTopic reports whether topic is one of Kafka's internal topics (Topic.isInternal).
func IsInternalTopic(topic string) bool {
	switch topic {
	case OffsetsTopic, TxnStateTopic, ShareGroupStateTopic:
		return true
	}
	return false
}
