package broker

import (
	"context"
	"time"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/partition"
)

// ProducePartition is one partition of a produce request. Topic, Partition
// and Records (one or more RecordBatch v2, unmodified wire bytes; the leader
// patches base offsets in place) are inputs; Err, BaseOffset,
// LogAppendTimeMs and LogStartOffset are filled by Produce.
type ProducePartition struct {
	Topic     string
	Partition int32
	Records   []byte
	// Coordinator marks a coordinator's transactional write (the group coordinator's
	// TxnOffsetCommit): partition.AppendCoordinatorTxn, no sequence check.
	Coordinator bool
	// InternalTopicsAllowed lets the append reach an internal topic (IsInternalTopic): Kafka's
	// internalTopicsAllowed, set by the coordinators for their own writes only. Left false (a
	// client's produce), an internal topic is refused with INVALID_TOPIC_EXCEPTION.
	InternalTopicsAllowed bool

	Err             error // nil or a *kerr.Error-wrapping error
	BaseOffset      int64 // first offset assigned (inclusive); -1 on error
	LogAppendTimeMs int64 // always -1 (CreateTime topics)
	LogStartOffset  int64 // log start offset (inclusive) after the append; -1 on error
}

// FetchPartition is one partition of a Fetch, consumer or replica: inputs first, outputs
// after Err. The same type carries a follower's fetch (FetchConn.Fetch) and what the leader
// serves (Broker.Fetch), in process and over the wire.
type FetchPartition struct {
	Topic              string
	Partition          int32
	FetchOffset        int64 // first offset wanted (inclusive); for a replica: its LEO
	CurrentLeaderEpoch int32 // -1 = no check
	LogStartOffset     int64 // follower's log start (replica fetches), -1 for consumers
	MaxBytes           int32 // per-partition limit (the first batch is returned even if larger)

	Err               error
	HighWatermark     int64 // leader HW (exclusive end of the committed range)
	LastStableOffset  int64 // LSO (exclusive): the end of what read_committed consumers read
	LogStartOffsetOut int64 // leader log start (inclusive)
	// Records holds whole batches in [FetchOffset rounded to its batch
	// start, Records.NextOffset), as Broker.Fetch serves them: a slice of the
	// leader's segment file. The caller must Release it (also when Size is 0 —
	// Release of a zero Slice is a no-op).
	Records log.Slice
	// RecordBytes holds the same batches as bytes where a FetchConn returns the
	// partition to a follower: aliasing the response read from the wire, or copied
	// from the leader's Records in process (ReplicaServe). Valid until the next Fetch
	// on the same connection; Records is then empty.
	RecordBytes []byte
	// AbortedTransactions are the aborted transactions overlapping the records served to a
	// read_committed consumer (IsolationLevel 1); reused between Fetch calls.
	AbortedTransactions []partition.AbortedTxn
	DivergingEpoch      int32 // always -1 (KIP-320 diverging epoch not used; followers use OffsetForLeaderEpoch)
	DivergingEndOffset  int64 // always -1

	hosted *hosted // the replica, looked up once per Fetch call (nil: not hosted here)
	seq    uint64  // the replica's LEO (replica fetch) or HW signal sequence before the last read
	avail  int64   // bytes the last read found (Broker.Fetch's long-poll sum)
}

// FetchRequest is a Fetch (consumer or replica). Broker.Fetch fills the partitions' outputs in
// place; a follower's fetcher sends one (ReplicaID >= 0) through its FetchConn.
type FetchRequest struct {
	ReplicaID int32 // -1 consumer, -2 debugging consumer (any replica, up to its HW), >= 0 follower broker id
	// ReplicaEpoch is the fetching broker's epoch (KIP-903 ReplicaState: its registration),
	// so the leader can tell fetches of a restarted broker from those of its previous
	// incarnation; -1 unknown.
	ReplicaEpoch   int64
	MaxWait        time.Duration // the wire carries whole milliseconds (max_wait_ms)
	MinBytes       int32
	MaxBytes       int32 // response limit (KIP-74: first batch returned even if larger)
	IsolationLevel int8  // 0 read_uncommitted (reads up to the HW), 1 read_committed (up to the LSO)
	Partitions     []FetchPartition
	// Reused is set by a fetcher that reused its previous plan: Partitions are its previous
	// request's (the same partitions in the same order, with the same epochs and limits), and
	// so are their positions and log starts, except at the indexes in Moved (ascending), whose
	// entries moved after records or a new leader log start. A FetchConn whose incremental
	// session holds the previous request's partitions need look at the Moved entries only.
	Reused bool
	Moved  []int
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
	// Fetch sends req (ReplicaID >= 0) and returns the partitions the leader answered,
	// with their outputs set and their records in RecordBytes (Records empty), in the
	// leader's order: all of req's partitions, or with an incremental fetch session
	// (KIP-227) only those with news (the others have no records, the same HW and log
	// start). The result, and req's partitions' outputs, are valid until the next call.
	Fetch(ctx context.Context, req *FetchRequest) ([]FetchPartition, error)
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
	// UnderReplicated, UnderMinISR and AtMinISR are Kafka's Partition gauges
	// (kafka.cluster:type=Partition,name=UnderReplicated / UnderMinIsr / AtMinIsr): set on
	// the leader only, false on followers as Kafka reports 0 there.
	UnderReplicated, UnderMinISR, AtMinISR bool
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
	MaxLag                    int64 // max over led partitions of leader LEO - follower LEO (records): the leader's view
	// FetcherMaxLag is Kafka's kafka.server:type=ReplicaFetcherManager,name=MaxLag,
	// clientId=Replica, the follower's view: the max over the partitions this broker follows
	// of the leader's HW in the last fetch response minus the replica's LEO (records, >= 0;
	// FetcherLags per partition).
	FetcherMaxLag  int64
	LeaderCount    int
	PartitionCount int
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
