// Package broker is the replica manager of one isrbench broker: it hosts the
// partition replicas the controller assigns to it and runs Kafka's
// replication protocol between them.
//
// It owns:
//   - the replicas (one core/log.Log + core/partition.Replica per
//     <DataDir>/<topic>-<partition>/ directory) and their lifecycle
//     (open/recover, MakeLeader/MakeFollower on every controller change);
//   - Produce (acks 0, 1, -1/all; min.insync.replicas), Fetch (consumer reads
//     [FetchOffset, HW), replica reads [FetchOffset, LEO); long poll),
//     ListOffset and EndOffsetForEpoch (OffsetForLeaderEpoch) — the request
//     handlers the wire server (netfetch) calls;
//   - the replica fetcher manager: per source broker num.replica.fetchers
//     fetcher goroutines, each with one FetchConn, partition p of topic t on
//     fetcher FetcherFor(t, p, n) = abs(31*t.hashCode()+p) % n; truncation by
//     leader epoch (KIP-101/279) before fetching from a new leader;
//   - ISR expiration (every replica.lag.time.max.ms/2) and ISR expansion
//     (proposed by the fetch path, applied by the ISR goroutine) through the
//     controller's AlterPartition;
//   - log retention (every log.retention.check.interval.ms, bounded by the HW);
//   - heartbeats to the controller and the HW checkpoint file
//     <DataDir>/replication-offset-checkpoint (Kafka format: "0", count, then
//     "topic partition hw" lines).
//
// Offsets: LEO and HW are exclusive ends (LEO = next offset to write, HW =
// first offset consumers cannot read); log start and fetch offsets are
// inclusive.
//
// Lifecycle: New -> Start -> (Produce/Fetch/... from any goroutine) ->
// Close (clean: checkpoints written, logs closed) or Kill (abrupt: nothing
// written, files left as the page cache has them) or Crash (Kill + every log
// truncated to what was fsynced). A stopped Broker is not restarted: a new
// Broker is built on the same DataDir and recovers from it.
//
// Concurrency: every exported method of Broker is safe for concurrent use.
// Goroutines started by a Broker carry the runtime/pprof labels
// broker=<id> and role=replica-fetcher | isr-expiration | housekeeping;
// Produce and Fetch run on the caller's goroutine (netfetch labels them
// role=produce / fetch-serve). Controller changes are applied one at a time
// (applyMu); fetcher partition maps are guarded by each fetcher's mutex,
// which is also held while a fetch response is appended so that a partition
// removed from a fetcher never receives data from the old leader afterwards.
// Nothing on the produce -> replica fetch -> HW -> ack path takes a
// broker-wide lock except a read lock on the replica map.
//
// # Replica fetcher protocol
//
// Each fetcher loops: wait while paused; OffsetForLeaderEpoch round for
// partitions that must truncate (on every new assignment; KIP-279 loop via
// partition.Replica.TruncationFor; TruncateMode "hw" truncates to the local
// HW instead); then one ReplicaFetch of all ready partitions (FetchOffset =
// local LEO) and AppendAsFollower(records, leader HW) for each result.
// Partition errors: OFFSET_OUT_OF_RANGE below the leader's log start ->
// TruncateFullyAndStartAt(leader log start); above the leader's LEO ->
// truncate to the leader's LEO (asked as the end offset of the current
// epoch); FENCED_LEADER_EPOCH -> the partition waits for the next
// controller state; UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER and others
// -> retried after replica.fetch.backoff.ms. Connection errors close the
// FetchConn, back off (a timer interrupted by reassignment or stop) and
// re-dial. A response that arrives while the broker is paused is dropped
// with its connection.
//
// # What the wire server (netfetch) calls
//
//   - Registration: if Config.Addr is set, Start calls
//     controller.RegisterBroker itself (also on restart, which unfences a
//     broker fenced by BrokerDown); otherwise the caller must call
//     RegisterBroker before Start. Start heartbeats every
//     Config.HeartbeatIntervalMs; calling controller.CheckSessions (or
//     Controller.Run) is the cluster's job.
//   - Produce: call Broker.Produce on the connection goroutine; it applies
//     Config.ProduceDelay itself (the server must not add it) and, for
//     acks=0, returns after the append (send no response).
//   - Fetch (consumer and replica): Broker.Fetch, then write each
//     partition's Records (sendfile) and Release them.
//   - OffsetForLeaderEpoch: Broker.EndOffsetForEpoch per partition.
//   - ListOffsets: Broker.ListOffsetFor(replicaID, ...) (ListOffset = a
//     consumer).
//   - Controller offsets: a Broker implements controller.Offsets for its own
//     id (ReplicaOffsets); the cluster dispatches by broker id.
//   - Shutdown: stop serving, then Close (clean), Kill or Crash.
package broker
