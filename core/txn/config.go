package txn

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/controller"
)

// StateTopic is the internal topic of transaction state.
const StateTopic = "__transaction_state"

// Config is the transaction coordinator's configuration, under Kafka's names. Zero fields
// take Kafka's defaults.
type Config struct {
	// NumPartitions is transaction.state.log.num.partitions (50).
	NumPartitions int32
	// ReplicationFactor is transaction.state.log.replication.factor (3), capped by the
	// number of alive brokers when the topic is created.
	ReplicationFactor int16
	// MinISR is transaction.state.log.min.isr (2), capped by the replication factor.
	MinISR int
	// SegmentBytes is transaction.state.log.segment.bytes (104857600).
	SegmentBytes int64
	// MaxTimeoutMs is transaction.max.timeout.ms (900000): the largest
	// transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above).
	MaxTimeoutMs int32
	// AbortCheckIntervalMs is transaction.abort.timed.out.transaction.cleanup.interval.ms
	// (10000): how often transactions open past their timeout are aborted.
	AbortCheckIntervalMs int64
	// IDExpirationMs is transactional.id.expiration.ms (604800000, 7 days): a transactional
	// id with no transaction open (Empty, CompleteCommit, CompleteAbort) and no update for
	// this long is expired: a tombstone is written to __transaction_state and the id
	// forgotten, so its next InitProducerId gets a new producer id.
	IDExpirationMs int64
	// RemoveExpiredIntervalMs is
	// transaction.remove.expired.transaction.cleanup.interval.ms (3600000): how often idle
	// transactional ids are expired.
	RemoveExpiredIntervalMs int64
	// WriteTimeoutMs bounds the acks=all wait of a __transaction_state write and of a
	// marker write (request.timeout.ms, 30000).
	WriteTimeoutMs int64
	// OffsetsTopicNumPartitions is offsets.topic.num.partitions (50): AddOffsetsToTxn adds
	// the group's partition of __consumer_offsets.
	OffsetsTopicNumPartitions int32
	// ProducerIDs hands out producer ids unique in the cluster (nil: a counter from the wall
	// clock in µs).
	ProducerIDs func() int64
	// Markers writes transaction markers through a partition's leader (nil: LocalMarkers).
	Markers MarkerWriter
	// Manual makes the Coordinator start no goroutine: the caller drives it (Scan after a
	// leadership change, Tick at NextDeadline, Poll for the acks=all waits) and uses the
	// Async methods, whose callbacks run on its goroutine; the deterministic simulator does.
	Manual bool
	// MarkersAsync writes markers with Manual: it calls done, on the caller's goroutine,
	// once each partition's Err is final (nil: this broker writes the markers of the
	// partitions it leads, and Poll ends their waits).
	MarkersAsync func(leader int32, m *broker.TxnMarker, done func(error))
	// Logf logs loads and marker retries (nil: silent).
	Logf func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	if c.NumPartitions <= 0 {
		c.NumPartitions = int32(config.DefaultOf("transaction.state.log.num.partitions"))
	}
	if c.ReplicationFactor <= 0 {
		c.ReplicationFactor = int16(config.DefaultOf("transaction.state.log.replication.factor"))
	}
	if c.MinISR <= 0 {
		c.MinISR = int(config.DefaultOf("transaction.state.log.min.isr"))
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = config.DefaultOf("transaction.state.log.segment.bytes")
	}
	if c.MaxTimeoutMs <= 0 {
		c.MaxTimeoutMs = int32(config.DefaultOf("transaction.max.timeout.ms"))
	}
	if c.AbortCheckIntervalMs <= 0 {
		c.AbortCheckIntervalMs = config.DefaultOf("transaction.abort.timed.out.transaction.cleanup.interval.ms")
	}
	if c.IDExpirationMs <= 0 {
		c.IDExpirationMs = config.DefaultOf("transactional.id.expiration.ms")
	}
	if c.RemoveExpiredIntervalMs <= 0 {
		c.RemoveExpiredIntervalMs = config.DefaultOf("transaction.remove.expired.transaction.cleanup.interval.ms")
	}
	if c.WriteTimeoutMs <= 0 {
		c.WriteTimeoutMs = 30000
	}
	if c.OffsetsTopicNumPartitions <= 0 {
		c.OffsetsTopicNumPartitions = int32(config.DefaultOf("offsets.topic.num.partitions"))
	}
	if c.ProducerIDs == nil {
		c.ProducerIDs = wallClockIDs()
	}
	return c
}

// PartitionFor is the __transaction_state partition of a transactional id:
// Utils.abs(transactionalId.hashCode) % partitions, as Kafka.
func PartitionFor(id string, partitions int32) int32 {
	if partitions <= 0 {
		return 0
	}
	return broker.JavaAbs(broker.JavaStringHashCode(id)) % partitions
}

// EnsureStateTopic creates __transaction_state through the controller on first use, with
// transaction.state.log.num.partitions partitions, min(replication factor, alive brokers)
// replicas, min.insync.replicas min(transaction.state.log.min.isr, replicas), no retention
// and transaction.state.log.segment.bytes. It returns the topic's partition states.
func EnsureStateTopic(ctrl *controller.Controller, cfg Config) ([]controller.PartitionState, error) {
	if parts, ok := ctrl.Partitions(StateTopic); ok {
		return parts, nil
	}
	cfg = cfg.withDefaults()
	alive := 0
	for _, b := range ctrl.Brokers() {
		if b.Alive {
			alive++
		}
	}
	rf := min(cfg.ReplicationFactor, int16(min(alive, math.MaxInt16)))
	if rf <= 0 {
		return nil, fmt.Errorf("creating %s: no alive broker: %w", StateTopic, kerr.CoordinatorNotAvailable)
	}
	configs := map[string]string{
		controller.ConfigMinInsyncReplicas: strconv.Itoa(min(cfg.MinISR, int(rf))),
		controller.ConfigRetentionMs:       "-1",
		controller.ConfigRetentionBytes:    "-1",
		controller.ConfigSegmentBytes:      strconv.FormatInt(cfg.SegmentBytes, 10),
	}
	parts, err := ctrl.EnsureTopic(StateTopic, cfg.NumPartitions, rf, configs)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %v: %w", StateTopic, err, kerr.CoordinatorNotAvailable)
	}
	return parts, nil
}

// Locate returns the broker id of a transactional id's coordinator: the leader of its
// __transaction_state partition, creating the topic on first use. COORDINATOR_NOT_AVAILABLE
// while the partition has no leader.
func Locate(ctrl *controller.Controller, cfg Config, id string) (int32, error) {
	parts, err := EnsureStateTopic(ctrl, cfg)
	if err != nil {
		return -1, err
	}
	p := PartitionFor(id, cfg.withDefaults().NumPartitions)
	if int(p) >= len(parts) || parts[p].Leader < 0 {
		return -1, fmt.Errorf("%s-%d has no leader: %w", StateTopic, p, kerr.CoordinatorNotAvailable)
	}
	return parts[p].Leader, nil
}

// wallClockIDs is the default producer id source: a counter from the wall clock in µs
// offset by 2^52, so that it does not meet the idempotent producers' ids, which the wire
// server counts from the wall clock in µs.
func wallClockIDs() func() int64 {
	var mu sync.Mutex
	next := time.Now().UnixMicro() + 1<<52
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		next++
		return next
	}
}

// WithDefaults returns c with Kafka's defaults in its zero fields.
func (c Config) WithDefaults() Config { return c.withDefaults() }
