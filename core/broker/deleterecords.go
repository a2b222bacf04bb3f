package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DeleteRecords answers one partition of a DeleteRecords request (Kafka's
// ReplicaManager.deleteRecords and its DelayedDeleteRecords): DeleteRecordsOnLeader, then
// AwaitLowWatermark. Safe for concurrent use.
func (b *Broker) DeleteRecords(ctx context.Context, topic string, p int32, offset int64) (lowWatermark int64, err error) {
	requested, err := b.DeleteRecordsOnLeader(topic, p, offset)
	if err != nil {
		return -1, err
	}
	return b.AwaitLowWatermark(ctx, topic, p, requested)
}

// DeleteRecordsOnLeader moves the log start offset of topic-p on its leader, this broker, up
// to offset (-1: the HW; partition.Replica.DeleteRecordsOnLeader) and returns the offset the
// low watermark must reach for the deletion to be complete. Errors:
// UNKNOWN_TOPIC_OR_PARTITION (not hosted here), NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE
// for an offset above the HW or below -1, KAFKA_STORAGE_ERROR, and INVALID_TOPIC_EXCEPTION for
// an internal topic (IsInternalTopic: as Kafka's ReplicaManager, no one deletes its records).
// Safe for concurrent use.
func (b *Broker) DeleteRecordsOnLeader(topic string, p int32, offset int64) (requested int64, err error) {
	if IsInternalTopic(topic) {
		return -1, fmt.Errorf("cannot delete records of internal topic %s: %w", topic, kerr.InvalidTopicException)
	}
	if err := b.usable(); err != nil {
		return -1, err
	}
	h, err := b.leaderFor(topic, p, -1)
	if err != nil {
		return -1, err
	}
	requested, err = h.r.DeleteRecordsOnLeader(offset)
	if err != nil {
		return -1, kerrOf(b.storageFailed(err))
	}
	return requested, nil
}

// AwaitLowWatermark waits until the low watermark of topic-p (the smallest log start over the
// leader, this broker, and the followers on alive brokers; followers take the leader's log
// start from their fetch responses and report theirs in their next fetch) has reached
// requested, and returns it (inclusive: the first offset any replica still holds). When ctx
// ends first it returns the low watermark reached with REQUEST_TIMED_OUT. Errors:
// NOT_LEADER_OR_FOLLOWER when this broker stops leading meanwhile. Safe for concurrent use.
func (b *Broker) AwaitLowWatermark(ctx context.Context, topic string, p int32, requested int64) (lowWatermark int64, err error) {
	h, err := b.leaderFor(topic, p, -1)
	if err != nil {
		return -1, err
	}
	r := h.r
	for {
		lwCh, roleCh := r.LowWatermarkChanged(), r.HWChanged() // before the check: no lost wake-up
		lw, err := r.LowWatermark()
		if err != nil {
			return -1, err
		}
		if lw >= requested {
			return lw, nil
		}
		select {
		case <-lwCh:
		case <-roleCh:
		case <-b.ctx.Done():
			return lw, fmt.Errorf("%w: broker %d is stopping", kerr.NotLeaderForPartition, b.cfg.ID)
		case <-ctx.Done():
			return lw, fmt.Errorf("%w: %s-%d: the low watermark %d has not reached %d (a follower has not moved its log start yet)",
				kerr.RequestTimedOut, topic, p, lw, requested)
		}
	}
}
