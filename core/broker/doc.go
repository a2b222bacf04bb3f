// Package broker is the replica manager of one isrbench broker: it hosts the
// partition replicas the controller assigns to it and runs Kafka's
// replication protocol between them.
//
// It owns:
//   - the replicas (one core/log.Log + core/partition.Replica per
//     <DataDir>/<topic>-<partition>/ directory) and their lifecycle
//     (open/recover, MakeLeader/MakeFollower on every controller change); the
//     controller's changes come in batches (SubscribeBatch), and the new replicas
//     of a batch are created, reading nothing, with one syncfs before any of them
//     is hosted (create.go), their partition.metadata written after the batch
//     (isrbench.partition.metadata.async, metadatawriter.go), and the leader-epoch
//     checkpoint writes of new epochs queued to one goroutine of the process
//     (isrbench.leader.epoch.checkpoint.async, epochcheckpoint.go); Close holds every
//     replica's fsyncs back and makes them durable with two syncfs (isrbench.close.syncfs,
//     vfs.HoldFS);
//   - Produce (acks 0, 1, -1/all; min.insync.replicas; ProduceStart and an AckWaiter
//     complete acks=all on the goroutine whose HW advance passes the batches:
//     produceinline.go; ProduceWakeLater appends acks=0/1 without waking the followers'
//     parked fetches, which its caller wakes after answering: produceorder.go), Fetch (consumer reads
//     [FetchOffset, HW), replica reads [FetchOffset, LEO); long poll parked in
//     core/partition's purgatory, a wake-up re-reading only the partitions that changed;
//     SessionFetch runs an incremental fetch session's fetch over a FetchSession, which
//     subscribes to its replicas' changes and visits only the partitions that changed:
//     fetchsession.go),
//     ListOffsetFor and EndOffsetForEpoch (OffsetForLeaderEpoch), DeleteRecords
//     (the leader's log start moves, then the low watermark over the alive replicas
//     is awaited: deleterecords.go) and LogDirReplicas (DescribeLogDirs) — the
//     request handlers the wire server (netfetch) calls;
//   - the replica fetcher manager: per source broker num.replica.fetchers
//     fetcher goroutines, each with one FetchConn, partition p of topic t on
//     fetcher FetcherFor(t, p, n) = abs(31*t.hashCode()+p) % n; truncation by
//     leader epoch (KIP-101/279) before fetching from a new leader; a round reuses
//     the last plan (FetchRequest.Reused), rereading only the partitions whose position
//     moved (FetchRequest.Moved), instead of walking them all;
//   - ISR expiration (every replica.lag.time.max.ms/2) and ISR expansion
//     (proposed by the fetch path, applied by the ISR goroutine) through the
//     controller's AlterPartition, called directly or through
//     Config.AlterPartition (a lost answer is sent again; the change stays
//     pending, the HW counting the maximal ISR, until it is settled);
//   - log retention (every log.retention.check.interval.ms, bounded by the HW);
//   - heartbeats to the controller and the HW checkpoint file
//     <DataDir>/replication-offset-checkpoint (Kafka format: "0", count, then
//     "topic partition hw" lines).
//
// The ISR expiration and the HW checkpoint visit only the replicas that changed since their
// previous pass (isrbench.housekeeping.changed.only, changes.go): an idle broker's passes
// cost nothing per partition.
//
// Offsets: LEO and HW are exclusive ends (LEO = next offset to write, HW =
// first offset consumers cannot read); log start and fetch offsets are
// inclusive.
//
// Lifecycle: New -> Start -> (Produce/Fetch/... from any goroutine) ->
// Close (clean: checkpoints written, logs closed) or Kill (abrupt: nothing
// written, files left as the page cache has them) or Crash (Kill + a power loss
// of Config.FS). A stopped Broker is not restarted: a new Broker is built on the
// same DataDir and recovers from it.
//
// Incarnations: Start recovers every replica the controller assigns to this broker,
// then registers a new incarnation (controller.RegisterBroker: a new broker epoch),
// reporting the replicas that lost acknowledged data (a log shorter than its
// checkpointed HW, a missing directory or checkpoint). The controller has then
// fenced the previous incarnation: the new one leads nothing and is in no ISR (except
// as the last member of an offline partition) until it truncated to the leader and
// met the join rule. Replica fetches carry the broker epoch (FetchRequest.ReplicaEpoch)
// and a leader refuses those of an older incarnation; AlterPartition carries the
// leader's and the new members' epochs (KIP-903).
//
// Damaged replicas (damage.go): a batch failing its CRC in bytes the log found on disk,
// found by a read about to serve it or by the background scrub (isrbench.log.scrub.*), is
// never served (the fetch gets KAFKA_STORAGE_ERROR; the log directory stays online). The
// replica is reported (log line with file and offset, DamageStats, Config.OnDamage), then
// controller.ReportDamagedReplica takes it out of the leadership and the ISR; as a follower
// it truncates to the damaged offset and re-replicates, and rejoins by the join rule. A
// follower refuses a fetched batch that fails its CRC (counted in DamageStats).
//
// Storage failures: a KAFKA_STORAGE_ERROR from any log operation takes the log
// directory offline (Kafka's offline log dir): the broker reports it to the
// controller (ReportOfflineLogDir: fenced, leaderships move) and answers every later
// request for its replicas with KAFKA_STORAGE_ERROR. Running out of file descriptors
// is not a storage failure (log.IsResourceError): the operation that could not open
// its file fails (a produce with REQUEST_TIMED_OUT, which clients retry), the failure
// is counted (ResourceErrors) and logged at most every 10 s, the directory stays
// online, and a replica that could not be opened is opened by RetryResourceFailures
// (every HW checkpoint interval) once descriptors are free.
//
// Topic configs: a topic config change reaches the broker as a controller update;
// it reconfigures its replicas (retention, segment size, index interval, flush
// policy, min.insync.replicas, max.message.bytes, which replication throttles apply).
// A produce is held to max.message.bytes (MESSAGE_TOO_LARGE) and, when larger than
// that, to one segment (RECORD_LIST_TOO_LARGE) before it appends. A client's produce to an
// internal topic (IsInternalTopic) is refused with INVALID_TOPIC_EXCEPTION; the coordinators
// mark their own writes InternalTopicsAllowed (internaltopics.go).
//
// Reassignment (controller.AlterPartitionReassignments): a broker a reassignment adds
// hears of a state naming it, opens an empty replica and follows the leader like any
// follower outside the ISR; a broker it removes hears of the state that no longer names
// it and deletes its replica (reassign.go: out of its fetcher, closed, directory and
// HW checkpoint entry removed).
//
// Replication throttles (quota.go, Kafka's ReplicationQuotaManager): the leader and
// follower quotas (leader/follower.replication.throttled.rate) bound the replication
// traffic of the throttled replicas (topic configs leader/follower.replication.throttled.replicas)
// that are outside the ISR: a leader over its quota leaves them out of replica fetch
// responses, a follower over its quota leaves them out of its fetches.
//
// Dynamic broker configs (controller.BrokerConfigUpdate, the cluster-wide defaults
// overlaid by this broker's own): num.replica.fetchers resizes the fetcher pools
// live (Kafka's resizeThreadPool: every partition whose FetcherFor index changes
// moves to its new fetcher with its fetch state, answers in flight to the old one
// are dropped, the fetchers of removed indexes stop); min.insync.replicas and the
// log.* defaults reconfigure every replica without a topic override; the throttle rates
// set the quotas' bounds.
//
// Topic deletion (a TopicUpdate with Deleted): the topic's replicas leave their
// fetchers, are closed (waiting acks=all produces end NOT_LEADER_OR_FOLLOWER), their
// directories are removed and their HW checkpoint entries dropped. At Start,
// replica directories the controller does not assign to this broker, or whose
// partition.metadata names another incarnation of the topic (TopicID), are set
// aside as <dir>.<n>-stray, as Kafka does with stray logs.
//
// Concurrency: every exported method of Broker is safe for concurrent use.
// Goroutines started by a Broker carry the runtime/pprof labels
// broker=<id> and role=replica-fetcher | isr-expiration | housekeeping;
// Produce and Fetch run on the caller's goroutine (netfetch labels them
// role=produce / fetch-serve). Controller changes are applied one at a time
// (Broker.apply); fetcher partition maps are guarded by each fetcher's mutex.
// Nothing on the produce -> replica fetch -> HW -> ack path takes a
// broker-wide lock except a read lock on the replica map, and no lock is held
// across disk I/O on the fetch path: a consumer or replica Fetch reads the log's
// in-memory index under its read lock and sends the file by sendfile with none,
// and a replica fetcher releases its mutex around every follower append and
// truncation. With Config.Manual no goroutine is started: the caller (the
// simulator) runs every loop's step.
//
// # Lock order
//
// The broker's locks, each guarding the fields grouped with it, in the order they may be
// taken (a lock may be taken while holding only locks above it):
//
//  1. Broker.apply: serialises controller state application (onUpdate, Start's recovery,
//     the answer to an AlterPartition, topic deletion, dynamic broker configs) and guards
//     every hosted.applied / hosted.topicConfigs and Broker.apply.dyn. Held across the
//     changes it applies (MakeLeader writes the leader-epoch checkpoint, a new replica's
//     log is opened and recovered), which are not on the fetch path.
//  2. Broker.ckpt: the HW checkpoint entries read at New. WriteHWCheckpoint holds it
//     across the checkpoint write (it serialises writers) and takes Broker.mu for reading
//     inside.
//  3. Broker.mu (read/write): the replica and fetcher maps. Held for map operations only.
//  4. Fetcher.mu: one fetcher's partition map and fetch states. Never held across disk
//     I/O: the goroutine running Plan or an Apply method releases it around each append or
//     truncation (Fetcher.beginIO/endIO) and sets mu.io meanwhile; whoever changes the
//     map (assignLocked, removeFromFetchers, resizeFetchersLocked, all under
//     Broker.apply) waits for mu.io to clear, so that once removeFromFetchers returns
//     the fetcher never touches that partition again.
//  5. A partition.Replica's locks (its role mutex, then a producer's append mutex, then
//     the producer-state mutex; the epoch cache's and the HW-lag ring's mutexes; Kafka's
//     leaderIsrUpdateLock in the isrbench.hw.update=mutex ablation): see core/partition.
//  6. A core/log.Log's locks (its writer mutex, group-commit queue mutex and segment-table
//     read/write lock): see core/log.
//
// Leaves, under which nothing else is taken: Broker.exp (ISR expansion proposals),
// Broker.changed (the Changed channel) and hosted.alter (AlterPartition error
// de-duplication); a changeSet's mutex (changes.go) takes only a replica's signal and a
// waiter's locks inside. Broker.pause (Pause/Resume state) is a leaf except that Heartbeat
// calls the controller under it, so that a heartbeat cannot race a Pause.
//
// The controller's locks come after all of these: it may be called with Broker.apply,
// Broker.ckpt or Broker.pause held (a storage failure reports the offline log dir from
// wherever it is noticed), never with Broker.mu or a Fetcher's mu held. alterISR calls
// AlterPartition (or Config.AlterPartition) with no lock held and takes Broker.apply only to
// apply the answer, which Config.AlterPartition may deliver from any goroutine. The
// controller never calls back into a broker synchronously: subscription delivery runs on
// its own goroutine (or the simulator's DeliverPending) with none of its locks held.
//
// # Replica fetcher protocol
//
// Each fetcher runs rounds of its partitions' partition.FetchState: while paused it
// waits; partitions that truncate ask OffsetForLeaderEpoch (KIP-101/KIP-279 rounds;
// the "hw" ablation and a replica with no epoch truncate to the local HW), partitions
// whose fetch was out of range ask ListOffsets as a replica for the leader's log start
// and end (Kafka's fetchOffsetAndTruncate: start over at the leader's log start, or
// truncate to its end); otherwise one FetchRequest of all fetching partitions
// (FetchOffset = local LEO) and AppendAsFollower(records, leader HW) for each result, then
// FollowLeaderLogStart(leader log start): a follower's log start follows the leader's (up to
// its HW), deleting its whole segments below it, so that after a failover the new leader
// does not serve offsets the old one had deleted.
// FENCED_LEADER_EPOCH -> the partition waits for the next controller state;
// UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER and others -> retried after
// replica.fetch.backoff.ms. Connection errors close the FetchConn, back off (a timer
// interrupted by reassignment or stop) and re-dial. A response that arrives while the
// broker is paused is dropped with its connection.
//
// # What the wire server (netfetch) calls
//
//   - Registration: Start calls controller.RegisterBroker itself with Config.Addr
//     (every start is a new incarnation). It heartbeats every
//     Config.HeartbeatIntervalMs; calling controller.CheckSessions (or
//     Controller.Run) is the cluster's job.
//   - Produce: call Broker.Produce on the connection goroutine; it applies
//     Config.ProduceDelay and Config.ProduceSpin itself (the server must not add them) and, for
//     acks=0, returns after the append (send no response).
//   - Fetch (consumer and replica): Broker.Fetch, then write each
//     partition's Records (sendfile) and Release them.
//   - OffsetForLeaderEpoch: Broker.EndOffsetForEpoch per partition.
//   - ListOffsets: Broker.ListOffsetFor(replicaID, ...) (replicaID -1: a
//     consumer, answered up to the HW; >= 0 a follower and -2 the debugging
//     id, answered up to the LEO; partition.FetchEnd), with the leader epoch from the
//     same replica.
//   - Controller offsets: a Broker implements controller.Offsets for its own
//     id (ReplicaOffsets); the cluster dispatches by broker id.
//   - Shutdown: stop serving, then Close (clean), Kill or Crash.
package broker
