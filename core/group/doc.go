// Package group is isrbench's group coordinator: Kafka's classic consumer group protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
// DescribeGroups, DeleteGroups, OffsetDelete) with committed offsets and group metadata stored in the
// internal topic __consumer_offsets, replicated by the core like any topic.
//
// # What it owns
//
//   - Machine (machine.go, join.go, members.go): the decision logic, pure and clock-driven
//     like core/partition's decide.go: no goroutines, no I/O, the time passed in (ms) by the
//     caller. Kafka's GroupMetadata state machine: Empty -> PreparingRebalance ->
//     CompletingRebalance -> Stable (and back), Dead; member ids (clientId-UUID),
//     generations, MEMBER_ID_REQUIRED for JoinGroup v4+ (KIP-394), static membership
//     (group.instance.id, KIP-345: a restarted static member, the leader included, takes
//     its old place in a Stable group without a rebalance unless the protocol the group
//     selects would change; the old member id is fenced with FENCED_INSTANCE_ID), the initial
//     rebalance delay (group.initial.rebalance.delay.ms, extended while members keep
//     joining a new group, up to the rebalance timeout), session timeouts, the rebalance
//     timeout for members that do not rejoin, and the sync timeout for members that do not
//     send SyncGroup. The coordinator relays the assignment the group leader computes: it
//     never looks inside protocol metadata, so every assignor (range, roundrobin, sticky,
//     cooperative-sticky) works; only OffsetDelete (offsetdelete.go) reads a consumer
//     group's subscriptions, as Kafka does, to refuse deleting a subscribed topic's offsets.
//   - Coordinator (coordinator.go): the thin layer that owns the goroutines. One per broker:
//     a watcher of the broker's __consumer_offsets replicas (broker.Changed, Replica
//     IsLeader / LeaderEpoch), a timer goroutine for the Machine's deadlines, and the I/O:
//     offset commits and group metadata are appended as leader (broker.ProduceAppend) and
//     wait for acks=all (offsets.commit.timeout.ms), and a new leader of a partition loads the
//     partition by reading its log (Replica.Read) up to the log end, without waiting for the
//     HW (as Kafka), answering COORDINATOR_LOAD_IN_PROGRESS while it reads; a broker that
//     stops leading a partition drops its groups (NOT_COORDINATOR, parked requests too).
//   - EnsureOffsetsTopic / Locate: __consumer_offsets is created on first use through the
//     controller with offsets.topic.num.partitions partitions (default 50) and
//     min(offsets.topic.replication.factor (3), alive brokers) replicas,
//     min.insync.replicas 2 from 3 replicas on (else 1), retention.ms and retention.bytes -1
//     and segment.bytes = offsets.topic.segment.bytes. The coordinator of a group is the
//     leader of partition PartitionFor(group) = Utils.abs(groupId.hashCode) % partitions.
//
// # Records in __consumer_offsets
//
// Each commit is one uncompressed RecordBatch v2 (producer id -1) with one record per
// partition; each group metadata write one batch with one record. Keys and values follow
// Kafka's GroupMetadataManager schemas (big endian; string = int16 length + bytes, nullable
// string length -1 = null, bytes = int32 length + bytes, array = int32 count):
//
//	OffsetCommitKey     version int16 = 1 | group string | topic string | partition int32
//	OffsetCommitValue   version int16 = 3 | offset int64 | leader_epoch int32 |
//	                    metadata string | commit_timestamp int64 (ms)
//	GroupMetadataKey    version int16 = 2 | group string
//	GroupMetadataValue  version int16 = 3 | protocol_type string | generation int32 |
//	                    protocol nullable string | leader nullable string |
//	                    current_state_timestamp int64 | members array of:
//	                      member_id string | group_instance_id nullable string |
//	                      client_id string | client_host string | rebalance_timeout int32 |
//	                      session_timeout int32 | subscription bytes | assignment bytes
//
// A null value is a tombstone (DeleteGroups writes one for the group key and for each
// committed offset). The loader also reads offset values v0-v2 and group values v0-v2, as
// Kafka wrote them. isrbench does not compact the topic (cleanup.policy is delete with no
// retention): every commit stays in the log, and a load replays them all, later records
// winning.
//
// # Offset expiry
//
// Every offsets.retention.check.interval.ms (600000) the coordinator removes the expired
// committed offsets of the groups it holds (Kafka's cleanupGroupMetadata,
// removeExpiredOffsets): with offsets.retention.minutes (10080), an Empty group's offsets
// that long after it became Empty (KIP-211; the time is in its GroupMetadataValue), a
// standalone consumer's (generation -1 commits, no protocol type) and those of a topic no
// member of a Stable consumer group subscribes to (KIP-496) that long after their commit;
// never an offset with a commit in flight. An Empty group left without offsets goes too.
// Tombstones for what expired (and for the group, if it had a generation) are written with
// acks=all, so that a coordinator loading the partition later does not bring them back.
//
// # Offsets
//
// A committed offset is the next offset the group will consume (exclusive end of what it
// processed), as OffsetCommit carries it; -1 in OffsetFetch means no commit.
//
// What OffsetFetch sees is Kafka's classic coordinator's: a commit made through this
// coordinator once its append is acknowledged (acks=all; until then it is pending, as
// GroupMetadata's pendingOffsetCommits), and everything a load read, up to the log end,
// including records past the HW: the previous leader may have acknowledged them. (Kafka's
// newer coordinator answers OffsetFetch from the state at the HW instead, so that right after
// a move it may answer an older offset than the one last acknowledged.)
//
// The scripts in testdata/ (TestScripts, internal/scripttest) drive a Machine through
// joins, syncs, static members, commits and offset expiry, with the group recorded after
// every step.
//
// # Concurrency
//
// A Machine is not safe for concurrent use. A Coordinator serializes every Machine call under
// one mutex. It holds it across the local append of each write to __consumer_offsets, as
// Kafka holds the group lock from a commit's validation through its append: a write is
// validated and appended in the leadership (leader epoch) its partition was loaded for, so a
// reload that follows a leadership change reads it. It never holds the mutex while a write
// waits for acks=all or while a JoinGroup / SyncGroup waits: a parked request waits for its
// callback, run by the rebalance, by its context (the connection closing) or by Close (the
// server closing). The Coordinator's methods are safe for concurrent use.
//
// # Lifecycle
//
// NewCoordinator -> Start -> requests from any goroutine -> Close (stops the goroutines and
// answers parked requests NOT_COORDINATOR). A broker incarnation has its own Coordinator;
// the next one loads what the log holds. With Config.Manual (the simulator, deterministic
// tests) Start starts nothing: the caller runs Scan, Tick and Poll and the Async methods'
// callbacks run on its goroutine.
package group
