package broker

import (
	"context"
	"time"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
)

// Config configures one broker's replica manager. Field comments give the
// Kafka config name, unit and default. A Config is a value: the broker copies
// it in New and never mutates the caller's copy.
type Config struct {
	// ID is broker.id (node.id). Must be >= 0.
	ID int32
	// DataDir is log.dirs (a single directory). Replica directories are
	// <DataDir>/<topic>-<partition>/; the HW checkpoint is
	// <DataDir>/replication-offset-checkpoint.
	DataDir string
	// Addr is this broker's advertised listener "host:port", registered with the
	// controller by Start ("" registers no address: in-process transports).
	Addr string
	// FS is the file system of DataDir (logs, checkpoints); nil = vfs.OS. The embedded
	// cluster gives each broker a vfs.PowerLossFS (for the crash fault), the simulator a
	// vfs.MemFS.
	FS vfs.FS
	// Manual starts no goroutine: no replica fetchers, ISR expiration, heartbeats,
	// checkpoints or retention run by themselves. The caller drives them (Fetchers and
	// their rounds, MaybeShrinkISRs, ApplyExpansions, Heartbeat, WriteHWCheckpoint,
	// ApplyRetention): the deterministic simulator does.
	Manual bool

	// NumReplicaFetchers is num.replica.fetchers, default 1: fetcher
	// goroutines (each with one connection) per source broker.
	NumReplicaFetchers int
	// ReplicaFetchWaitMaxMs is replica.fetch.wait.max.ms, default 500.
	ReplicaFetchWaitMaxMs int32
	// ReplicaFetchMinBytes is replica.fetch.min.bytes, default 1.
	ReplicaFetchMinBytes int32
	// ReplicaFetchMaxBytes is replica.fetch.max.bytes (per partition),
	// default 1048576.
	ReplicaFetchMaxBytes int32
	// ReplicaFetchResponseMaxBytes is replica.fetch.response.max.bytes,
	// default 10485760.
	ReplicaFetchResponseMaxBytes int32
	// ReplicaFetchBackoffMs is replica.fetch.backoff.ms, default 1000.
	ReplicaFetchBackoffMs int32
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms, default 30000. ISR
	// expiration runs every ReplicaLagTimeMaxMs/2.
	ReplicaLagTimeMaxMs int64
	// MinInsyncReplicas is min.insync.replicas, default 1; the topic config
	// "min.insync.replicas" (controller.TopicConfig) overrides it.
	MinInsyncReplicas int
	// ReplicaHighWatermarkCheckpointIntervalMs is
	// replica.high.watermark.checkpoint.interval.ms, default 5000.
	ReplicaHighWatermarkCheckpointIntervalMs int64
	// LogRetentionCheckIntervalMs is log.retention.check.interval.ms,
	// default 300000: how often every replica's log applies retention.bytes
	// / retention.ms (never deleting past its HW nor the active segment).
	LogRetentionCheckIntervalMs int64
	// HeartbeatIntervalMs is how often the broker heartbeats the controller;
	// 0 = broker.session.timeout.ms/3 as configured on the controller
	// (default 9000/3 = 3000; Kafka's broker.heartbeat.interval.ms is 2000).
	HeartbeatIntervalMs int64

	// Log is the log configuration of every replica (log.segment.bytes, ...).
	Log log.Config
	// HWUpdate is isrbench.hw.update: "atomic" (default) | "mutex".
	HWUpdate string
	// TruncateMode is "epoch" (default, KIP-101/279) | "hw" (ablation:
	// truncate to the local HW on becoming a follower).
	TruncateMode string
	// ProduceDelay is isrbench.produce.delay: an artificial delay before
	// every Produce appends (for the regression-gate test). Default 0 (off).
	ProduceDelay time.Duration
	// ProduceSpin is isrbench.produce.spin: CPU work (a calibrated computation this long)
	// on every Produce before it appends (the regression gate's CPU test). Default 0 (off).
	ProduceSpin time.Duration
	// Now is the nanosecond clock used for ISR decisions; nil = time.Now.
	Now func() int64
	// OnHWLag, if set, is called per leader batch with the time from its
	// append until the HW passed it and its record count.
	OnHWLag func(lagNs, records int64)
	// OnRecovery, if set, is called after each replica log is opened with
	// the recovery report of log.Open. nil = logged with the standard log.
	OnRecovery func(topic string, partition int32, r log.Recovery)
	// Logf receives the broker's log lines (recovery, fetcher errors, ISR
	// change failures); nil = the standard library logger.
	Logf func(format string, args ...any)
}

// DefaultConfig returns Kafka's defaults (ID 0, DataDir empty: the caller
// must set both).
func DefaultConfig() Config {
	return Config{
		NumReplicaFetchers:                       1,
		ReplicaFetchWaitMaxMs:                    500,
		ReplicaFetchMinBytes:                     1,
		ReplicaFetchMaxBytes:                     1048576,
		ReplicaFetchResponseMaxBytes:             10485760,
		ReplicaFetchBackoffMs:                    1000,
		ReplicaLagTimeMaxMs:                      30000,
		MinInsyncReplicas:                        1,
		ReplicaHighWatermarkCheckpointIntervalMs: 5000,
		LogRetentionCheckIntervalMs:              300000,
		Log:                                      log.DefaultConfig(),
		HWUpdate:                                 "atomic",
		TruncateMode:                             "epoch",
	}
}

// ProducePartition is one partition of a produce request. Topic, Partition
// and Records (one or more RecordBatch v2, unmodified wire bytes; the leader
// patches base offsets in place) are inputs; Err, BaseOffset,
// LogAppendTimeMs and LogStartOffset are filled by Produce.
type ProducePartition struct {
	Topic     string
	Partition int32
	Records   []byte

	Err             error // nil or a *kerr.Error-wrapping error
	BaseOffset      int64 // first offset assigned (inclusive); -1 on error
	LogAppendTimeMs int64 // always -1 (CreateTime topics)
	LogStartOffset  int64 // log start offset (inclusive) after the append; -1 on error
}

// FetchPartition is one partition of a Fetch: inputs first, outputs after Err.
type FetchPartition struct {
	Topic              string
	Partition          int32
	FetchOffset        int64 // first offset wanted (inclusive); for a replica: its LEO
	CurrentLeaderEpoch int32 // -1 = no check
	LogStartOffset     int64 // follower's log start (replica fetches), -1 for consumers
	MaxBytes           int32 // per-partition limit (the first batch is returned even if larger)

	Err               error
	HighWatermark     int64 // leader HW (exclusive end of the committed range)
	LastStableOffset  int64 // = HighWatermark (no transactions)
	LogStartOffsetOut int64 // leader log start (inclusive)
	// Records holds whole batches in [FetchOffset rounded to its batch
	// start, Records.NextOffset). The caller must Release it (also when
	// Size is 0 — Release of a zero Slice is a no-op).
	Records            log.Slice
	DivergingEpoch     int32 // always -1 (KIP-320 diverging epoch not used; followers use OffsetForLeaderEpoch)
	DivergingEndOffset int64 // always -1

	hosted *hosted // the replica, looked up once per Fetch call (nil: not hosted here)
}

// FetchRequest is a Fetch (consumer or replica). Fetch fills the partitions' outputs in place.
type FetchRequest struct {
	ReplicaID      int32 // -1 consumer, >= 0 follower broker id
	ReplicaEpoch   int64 // the follower's broker epoch (KIP-903 ReplicaState); -1 unknown
	MaxWait        time.Duration
	MinBytes       int32
	MaxBytes       int32 // response limit (KIP-74: first batch returned even if larger)
	IsolationLevel int8  // 0 read_uncommitted, 1 read_committed (same as 0: no transactions)
	Partitions     []FetchPartition
}

// Transport dials a connection to a source broker for replica fetching.
// Dial is called from fetcher goroutines concurrently.
type Transport interface {
	Dial(ctx context.Context, source int32, fetcherIndex int) (FetchConn, error)
}

// FetchConn is one replica-fetch connection, used by a single fetcher goroutine
// (calls are not concurrent). Errors returned (as opposed to per-partition
// Err) mean the connection is broken; the fetcher Closes and re-dials it.
type FetchConn interface {
	Fetch(ctx context.Context, req *ReplicaFetch) (*ReplicaFetchResponse, error)
	OffsetForLeaderEpoch(ctx context.Context, q []EpochQuery) ([]EpochAnswer, error)
	// ListOffsets asks the leader, as replica ReplicaID, for the log start (Timestamp -2)
	// or end (-1: the LEO for a replica) offsets of partitions.
	ListOffsets(ctx context.Context, replicaID int32, q []OffsetQuery) ([]OffsetAnswer, error)
	Close() error
}

// OffsetQuery is one partition of a replica's ListOffsets request.
type OffsetQuery struct {
	Topic              string
	Partition          int32
	CurrentLeaderEpoch int32
	Timestamp          int64 // -2 earliest (log start), -1 latest (LEO for a replica)
}

// OffsetAnswer is one partition of a ListOffsets response.
type OffsetAnswer struct {
	Topic     string
	Partition int32
	Timestamp int64 // the query's
	Err       error
	Offset    int64
}

// ReplicaFetch is the replica fetch request a fetcher sends.
type ReplicaFetch struct {
	ReplicaID int32
	// ReplicaEpoch is the fetching broker's epoch (its registration), so the leader can
	// tell fetches of a restarted broker from those of its previous incarnation.
	ReplicaEpoch int64
	MaxWaitMs    int32
	MinBytes     int32
	MaxBytes     int32
	Partitions   []ReplicaFetchPartition
}

// ReplicaFetchPartition is one partition of a ReplicaFetch.
type ReplicaFetchPartition struct {
	Topic              string
	Partition          int32
	FetchOffset        int64 // follower LEO (exclusive end of its log)
	CurrentLeaderEpoch int32
	LogStartOffset     int64
	MaxBytes           int32
}

// ReplicaFetchResponse is the answer to a ReplicaFetch. Records slices are
// owned by the fetcher once returned (the transport must not reuse them until
// the next Fetch call on the same FetchConn).
type ReplicaFetchResponse struct {
	Partitions []ReplicaFetchResult
}

// ReplicaFetchResult is one partition of a ReplicaFetchResponse.
type ReplicaFetchResult struct {
	Topic          string
	Partition      int32
	Err            error
	HighWatermark  int64 // leader HW (exclusive)
	LogStartOffset int64 // leader log start (inclusive)
	Records        []byte
}

// EpochQuery is one partition of an OffsetForLeaderEpoch request.
type EpochQuery struct {
	Topic              string
	Partition          int32
	CurrentLeaderEpoch int32
	LeaderEpoch        int32
}

// EpochAnswer is one partition of an OffsetForLeaderEpoch response:
// the largest epoch <= LeaderEpoch the leader knows and its end offset
// (exclusive), or (-1, -1) when undefined.
type EpochAnswer struct {
	Topic       string
	Partition   int32
	Err         error
	LeaderEpoch int32
	EndOffset   int64
}

// PartitionInfo is a point-in-time snapshot of one replica on this broker.
type PartitionInfo struct {
	Topic       string
	Partition   int32
	IsLeader    bool
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	HW          int64 // exclusive
	LEO         int64 // exclusive
	LogStart    int64 // inclusive
	// FollowerLEOs is the leader's view of each follower's LEO (leader only; nil on followers).
	FollowerLEOs map[int32]int64
}

// Metrics are the broker's replica-manager metrics. IsrShrinks/IsrExpands are
// cumulative counters; Kafka exposes them as the rates
// kafka.server:type=ReplicaManager,name=IsrShrinksPerSec / IsrExpandsPerSec.
type Metrics struct {
	IsrShrinks                int64
	IsrExpands                int64
	UnderReplicatedPartitions int   // led partitions with |ISR| < |replicas|
	UnderMinIsrPartitionCount int   // led partitions with |ISR| < min.insync.replicas
	AtMinIsrPartitionCount    int   // led partitions with |ISR| == min.insync.replicas
	MaxLag                    int64 // max over led partitions of leader LEO - follower LEO (records)
	LeaderCount               int
	PartitionCount            int
}

// FetcherFor returns the replica fetcher index of topic-partition among n
// fetchers: abs(31*topic.hashCode() + partition) % n, as Kafka's
// AbstractFetcherManager.getFetcherId (Utils.abs: MinInt32 maps to 0).
func FetcherFor(topic string, partition int32, n int) int {
	if n <= 1 {
		return 0
	}
	h := 31*JavaStringHashCode(topic) + partition // int32 wraparound, as Java
	return int(JavaAbs(h)) % n
}

// JavaStringHashCode is java.lang.String.hashCode over UTF-16 code units: what Kafka hashes
// topic names and group ids with (FetcherFor here, core/group's PartitionFor).
func JavaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// JavaAbs is org.apache.kafka.common.utils.Utils.abs: MinInt32 -> 0.
func JavaAbs(n int32) int32 {
	if n == -1<<31 {
		return 0
	}
	if n < 0 {
		return -n
	}
	return n
}
