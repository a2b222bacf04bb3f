package group

import (
	"math"
	"testing"
)

// TestConfigDefaults: DefaultConfig holds Kafka's defaults (GroupCoordinatorConfig), which
// come from the registry, and withDefaults fills the zero (negative for the rebalance delay)
// fields of a Config with them, keeping the fields that are set and a rebalance delay of 0.
func TestConfigDefaults(t *testing.T) {
	want := Config{
		InitialRebalanceDelayMs:       3000,
		MinSessionTimeoutMs:           6000,
		MaxSessionTimeoutMs:           1800000,
		MaxSize:                       math.MaxInt32,
		OffsetsTopicNumPartitions:     50,
		OffsetsTopicReplicationFactor: 3,
		OffsetsTopicSegmentBytes:      104857600,
		OffsetsCommitTimeoutMs:        5000,
		OffsetMetadataMaxBytes:        4096,

		OffsetsRetentionMinutes:         10080,
		OffsetsRetentionCheckIntervalMs: 600000,
	}
	if got := DefaultConfig(); got.NewMemberID != nil || got.Logf != nil || !sameNumbers(got, want) {
		t.Fatalf("DefaultConfig() = %+v, want %+v", got, want)
	}
	filled := Config{InitialRebalanceDelayMs: -1}.withDefaults()
	if filled.NewMemberID == nil || !sameNumbers(filled, want) {
		t.Fatalf("withDefaults of an empty Config = %+v, want %+v", filled, want)
	}
	if got := (Config{}).withDefaults().InitialRebalanceDelayMs; got != 0 {
		t.Fatalf("withDefaults changed group.initial.rebalance.delay.ms 0 to %d", got)
	}
	set := Config{InitialRebalanceDelayMs: 7, MinSessionTimeoutMs: 8, MaxSessionTimeoutMs: 9, MaxSize: 10, OffsetsTopicNumPartitions: 11,
		OffsetsTopicReplicationFactor: 12, OffsetsTopicSegmentBytes: 13, OffsetsCommitTimeoutMs: 14, OffsetMetadataMaxBytes: 15,
		OffsetsRetentionMinutes: 16, OffsetsRetentionCheckIntervalMs: 17}
	if got := set.withDefaults(); !sameNumbers(got, set) {
		t.Fatalf("withDefaults changed set fields: %+v, want %+v", got, set)
	}
}

// sameNumbers compares the numeric fields of two Configs.
func sameNumbers(a, b Config) bool {
	return a.InitialRebalanceDelayMs == b.InitialRebalanceDelayMs && a.MinSessionTimeoutMs == b.MinSessionTimeoutMs &&
		a.MaxSessionTimeoutMs == b.MaxSessionTimeoutMs && a.MaxSize == b.MaxSize &&
		a.OffsetsTopicNumPartitions == b.OffsetsTopicNumPartitions && a.OffsetsTopicReplicationFactor == b.OffsetsTopicReplicationFactor &&
		a.OffsetsTopicSegmentBytes == b.OffsetsTopicSegmentBytes && a.OffsetsCommitTimeoutMs == b.OffsetsCommitTimeoutMs &&
		a.OffsetMetadataMaxBytes == b.OffsetMetadataMaxBytes && a.OffsetsRetentionMinutes == b.OffsetsRetentionMinutes &&
		a.OffsetsRetentionCheckIntervalMs == b.OffsetsRetentionCheckIntervalMs
}
