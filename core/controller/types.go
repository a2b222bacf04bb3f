package controller

import (
	"encoding/base64"
	"io"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/vfs"
)

// NoLeader is the Leader value of a partition without a leader (offline),
// as Kafka's LeaderAndIsr.NoLeader.
const NoLeader int32 = -1

// PartitionState is the controller's record of one partition: who leads it,
// with which epochs, and which replicas are in sync.
//
// A PartitionState handed out by the Controller (return values and
// subscription callbacks) is a private copy: the receiver may keep it and
// may read it from any goroutine, but must not expect changes to it to
// reach the controller.
type PartitionState struct {
	Topic     string
	Partition int32
	// Leader is the broker id of the leader, or NoLeader (-1) when the
	// partition is offline.
	Leader int32
	// LeaderEpoch is bumped on every leader change, including a change to
	// or from NoLeader. It starts at 0 when the topic is created.
	LeaderEpoch int32
	// PartitionEpoch is bumped on every change (leader or ISR). An
	// AlterPartition must present the current one (Kafka's KIP-704
	// partition epoch). It starts at 0 when the topic is created.
	PartitionEpoch int32
	// Replicas is the assigned replica list in preference order; Replicas[0]
	// is the preferred leader. Only a reassignment changes it (reassign.go):
	// while one is in progress it is the target replicas followed by the
	// removing ones (Kafka's PartitionRecord replicas).
	Replicas []int32
	// ISR is the in-sync replica set. It contains the leader whenever
	// Leader != NoLeader and is never empty.
	ISR []int32
	// AddingReplicas and RemovingReplicas are the replicas a reassignment in
	// progress adds and removes (Kafka's addingReplicas / removingReplicas,
	// KIP-455), both subsets of Replicas, ascending; both empty when none is in
	// progress. The target is Replicas minus RemovingReplicas, the original
	// assignment Replicas minus AddingReplicas.
	AddingReplicas   []int32 `json:",omitempty"`
	RemovingReplicas []int32 `json:",omitempty"`
}

// TopicID identifies one incarnation of a topic (KIP-516's topic id, Kafka's Uuid): a topic
// deleted and created again under the same name gets a new one. Ids are random UUIDs made at
// creation and kept in the metadata log (topicid.go); the zero TopicID means "no id".
type TopicID [16]byte

// String formats id as Kafka's Uuid.toString does: URL-safe base64 without padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseTopicID parses the String form.
func ParseTopicID(s string) (TopicID, bool) {
	var id TopicID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return TopicID{}, false
	}
	copy(id[:], b)
	return id, true
}

// Clone returns a deep copy of s (the slices are not shared).
func (s PartitionState) Clone() PartitionState {
	s.Replicas = append([]int32(nil), s.Replicas...)
	s.ISR = append([]int32(nil), s.ISR...)
	s.AddingReplicas = append([]int32(nil), s.AddingReplicas...)
	s.RemovingReplicas = append([]int32(nil), s.RemovingReplicas...)
	return s
}

// String formats s like one line of `kafka-topics --describe`.
func (s PartitionState) String() string {
	var b strings.Builder
	b.WriteString("Topic: ")
	b.WriteString(s.Topic)
	b.WriteString("\tPartition: ")
	b.WriteString(strconv.Itoa(int(s.Partition)))
	b.WriteString("\tLeader: ")
	if s.Leader == NoLeader {
		b.WriteString("none")
	} else {
		b.WriteString(strconv.Itoa(int(s.Leader)))
	}
	b.WriteString("\tReplicas: ")
	b.WriteString(joinIDs(s.Replicas))
	b.WriteString("\tIsr: ")
	b.WriteString(joinIDs(s.ISR))
	if len(s.AddingReplicas) > 0 {
		b.WriteString("\tAdding Replicas: ")
		b.WriteString(joinIDs(s.AddingReplicas))
	}
	if len(s.RemovingReplicas) > 0 {
		b.WriteString("\tRemoving Replicas: ")
		b.WriteString(joinIDs(s.RemovingReplicas))
	}
	b.WriteString("\tLeaderEpoch: ")
	b.WriteString(strconv.Itoa(int(s.LeaderEpoch)))
	b.WriteString("\tPartitionEpoch: ")
	b.WriteString(strconv.Itoa(int(s.PartitionEpoch)))
	return b.String()
}

func joinIDs(ids []int32) string {
	var b []byte
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return string(b)
}

// Config configures a Controller. The zero value is usable: zero fields take
// Kafka's defaults (see DefaultConfig).
type Config struct {
	// UncleanLeaderElectionEnable is the cluster-wide
	// unclean.leader.election.enable (default false). A topic's own
	// unclean.leader.election.enable config overrides it either way.
	UncleanLeaderElectionEnable bool
	// BrokerSessionTimeoutMs is broker.session.timeout.ms (default 9000): a
	// broker whose last heartbeat is older than this is fenced by
	// CheckSessions. Zero or negative means the default.
	BrokerSessionTimeoutMs int64
	// Now returns the current time in nanoseconds (any fixed origin). nil
	// means time.Now().UnixNano(). Tests inject a fake clock here.
	Now func() int64
	// Dir, if set, keeps the metadata durable in a metadata log there (see Open); FS is
	// its file system (nil: vfs.OS).
	Dir string
	FS  vfs.FS
	// ManualDelivery: subscriptions get no delivery goroutine; DeliverPending delivers
	// (the deterministic simulator decides when each broker learns of a change).
	ManualDelivery bool
	// Logf receives the controller's log lines (metadata log errors); nil = the standard
	// logger.
	Logf func(format string, args ...any)
	// ReplicaCapacity, when set, bounds the partition replicas the brokers may host in all
	// (the embedded cluster's brokers share one process and its file limit: each replica
	// keeps a file open). It returns the bound and what sets it, for the error message;
	// CreateTopic and CreatePartitions refuse what would pass it (see capacity.go). nil =
	// no bound.
	ReplicaCapacity func() (max int64, limit string)
	// TopicIDSource is where new topic ids' random bytes come from; nil = crypto/rand. (A
	// deterministic run may pass a seeded source.)
	TopicIDSource io.Reader
}

// DefaultBrokerSessionTimeoutMs is Kafka's broker.session.timeout.ms default.
const DefaultBrokerSessionTimeoutMs = 9000

// DefaultConfig returns Kafka's defaults: unclean election disabled, 9000 ms
// broker session timeout, the wall clock.
func DefaultConfig() Config {
	return Config{BrokerSessionTimeoutMs: DefaultBrokerSessionTimeoutMs}
}

// BrokerInfo describes a registered broker. Alive is false while the broker
// is fenced (after BrokerDown or a session timeout).
type BrokerInfo struct {
	ID    int32
	Host  string
	Port  int32
	Alive bool
}

// Offsets reports a replica's log end offset and high watermark. The
// controller uses it only to count offsets lost by unclean elections.
//
// leo is the replica's log end offset (exclusive: the next offset to be
// written); hw is its high watermark (exclusive: the first offset consumers
// cannot read). ok is false when the broker does not host the replica (or is
// gone).
//
// The controller never calls ReplicaOffsets while holding its own lock, so
// an implementation may call back into the Controller. It may be called from
// any goroutine that calls BrokerDown, BrokerUp, CheckSessions, Heartbeat,
// RegisterBroker or ElectLeader.
type Offsets interface {
	ReplicaOffsets(broker int32, topic string, partition int32) (leo, hw int64, ok bool)
}

// Stats are the controller's counters and gauges (Kafka's controller metric
// names in parentheses).
type Stats struct {
	// Elections counts leader elections that installed a new leader after
	// topic creation (clean and unclean; LeaderElectionRateAndTimeMs count).
	Elections int64
	// UncleanElections counts elections of a leader from outside the ISR
	// (UncleanLeaderElectionsPerSec count).
	UncleanElections int64
	// OfflinePartitions is the number of partitions without a leader now
	// (OfflinePartitionsCount).
	OfflinePartitions int
	// LostOffsets sums, over unclean elections, max(0, old HW - new leader
	// LEO): committed offsets the new leader did not have. Elections for
	// which Offsets was unset or did not know the replicas add nothing.
	LostOffsets int64
	// FencedBrokers is the number of registered brokers that are fenced
	// now (FencedBrokerCount); ActiveBrokers those that are not
	// (ActiveBrokerCount).
	FencedBrokers, ActiveBrokers int
	// ISRChanges counts accepted AlterPartition requests that changed an
	// ISR plus ISR shrinks made by fencing a broker.
	ISRChanges int64
	// ISRShrinks counts partition changes the controller made itself that
	// removed members from an ISR: a fenced follower dropped, an election
	// that leaves dead members out, an unclean election's ISR of one. A
	// leader's own shrinks (AlterPartition) are its IsrShrinksPerSec, not
	// counted here, so the two add up to every shrink.
	ISRShrinks int64
	// MetadataWriteFailures counts metadata changes refused because the metadata log
	// could not be written (each a failed write, fsync or new generation).
	MetadataWriteFailures int64
	// MetadataLogError is why the metadata log cannot be written now ("" when it can):
	// while it is set the controller refuses every change.
	MetadataLogError string
}
