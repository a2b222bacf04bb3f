package group

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
)

// groupStoreError maps a failed group metadata write to the error SyncGroup answers, as
// Kafka's GroupMetadataManager.storeGroup.
func groupStoreError(err error) error {
	if err == nil {
		return nil
	}
	if code := coordinatorWriteError(err); code != nil {
		return fmt.Errorf("%v: %w", err, code)
	}
	if errors.Is(err, kerr.RequestTimedOut) {
		return fmt.Errorf("%v: %w", err, kerr.RebalanceInProgress)
	}
	return fmt.Errorf("%v: %w", err, kerr.UnknownServerError)
}

// commitError maps a failed offset write to the error OffsetCommit answers, as Kafka's
// GroupMetadataManager.storeOffsets.
func commitError(err error) error {
	if err == nil {
		return nil
	}
	if code := coordinatorWriteError(err); code != nil {
		return fmt.Errorf("%v: %w", err, code)
	}
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge), errors.Is(err, kerr.InvalidFetchSize):
		return fmt.Errorf("%v: %w", err, kerr.InvalidCommitOffsetSize)
	}
	return err
}

// coordinatorWriteError is what storeGroup and storeOffsets both answer for a failed write
// to the group's partition of __consumer_offsets: COORDINATOR_NOT_AVAILABLE when the
// partition is unknown or short of replicas, NOT_COORDINATOR when this broker no longer
// leads it or its log directory failed; nil for any other error.
func coordinatorWriteError(err error) error {
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.NotEnoughReplicas), errors.Is(err, kerr.NotEnoughReplicasAfterAppend):
		return kerr.CoordinatorNotAvailable
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.KafkaStorageError):
		return kerr.NotCoordinator
	}
	return nil
}

// OffsetsTopicConfigs are the topic configs __consumer_offsets is created with for
// replication factor rf: min.insync.replicas 2 from rf 3 on (else 1), no retention by time
// or size (isrbench does not compact: the commits stay until the topic is deleted) and
// offsets.topic.segment.bytes.
func OffsetsTopicConfigs(cfg Config, rf int16) map[string]string {
	minISR := "1"
	if rf >= 3 {
		minISR = "2"
	}
	return map[string]string{
		controller.ConfigMinInsyncReplicas: minISR,
		controller.ConfigRetentionMs:       "-1",
		controller.ConfigRetentionBytes:    "-1",
		controller.ConfigSegmentBytes:      strconv.FormatInt(cfg.withDefaults().OffsetsTopicSegmentBytes, 10),
	}
}

// EnsureOffsetsTopic creates __consumer_offsets through the controller on first use, with
// offsets.topic.num.partitions partitions and min(offsets.topic.replication.factor, alive
// brokers) replicas. It returns the topic's partition states.
func EnsureOffsetsTopic(ctrl *controller.Controller, cfg Config) ([]controller.PartitionState, error) {
	if parts, ok := ctrl.Partitions(OffsetsTopic); ok {
		return parts, nil
	}
	cfg = cfg.withDefaults()
	alive := 0
	for _, b := range ctrl.Brokers() {
		if b.Alive {
			alive++
		}
	}
	rf := min(cfg.OffsetsTopicReplicationFactor, int16(min(alive, math.MaxInt16)))
	if rf <= 0 {
		return nil, fmt.Errorf("creating %s: no alive broker: %w", OffsetsTopic, kerr.CoordinatorNotAvailable)
	}
	parts, err := ctrl.EnsureTopic(OffsetsTopic, cfg.OffsetsTopicNumPartitions, rf, OffsetsTopicConfigs(cfg, rf))
	if err != nil {
		return nil, fmt.Errorf("creating %s: %v: %w", OffsetsTopic, err, kerr.CoordinatorNotAvailable)
	}
	return parts, nil
}

// Locate returns the broker id of groupID's coordinator: the leader of its __consumer_offsets
// partition, creating the topic on first use. COORDINATOR_NOT_AVAILABLE while the partition
// has no leader.
func Locate(ctrl *controller.Controller, cfg Config, groupID string) (int32, error) {
	parts, err := EnsureOffsetsTopic(ctrl, cfg)
	if err != nil {
		return -1, err
	}
	p := PartitionFor(groupID, cfg.withDefaults().OffsetsTopicNumPartitions)
	if int(p) >= len(parts) || parts[p].Leader < 0 {
		return -1, fmt.Errorf("%s-%d has no leader: %w", OffsetsTopic, p, kerr.CoordinatorNotAvailable)
	}
	return parts[p].Leader, nil
}
