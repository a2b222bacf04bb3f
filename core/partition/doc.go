// Package partition owns the replication state of one partition replica on
// one broker, with Kafka's semantics: log end offset (LEO), high watermark
// (HW), in-sync replica set (ISR), leader epoch and the leader epoch cache,
// and (on the leader) every follower's fetch progress.
//
// # Offsets
//
// LEO and HW are exclusive: the LEO is the next offset to be written, the HW
// the first offset consumers cannot read (they read [logStart, HW); replica
// fetches read up to the LEO). The LSO (last stable offset, txnstate.go) is exclusive too:
// the first offset of the earliest open transaction, or the HW; read_committed consumers
// read [logStart, LSO) and LSO <= HW. Log start offsets, fetch offsets and "last
// offset" values are inclusive. A truncation offset is exclusive: the log
// keeps [logStart, offset).
//
// # Layers
//
// decide.go is the pure decision logic — no goroutines, no clock reads, no
// I/O — in the style of etcd's raft: HighWatermark (min LEO of the maximal
// ISR, only while len(ISR) >= the effective min.insync.replicas,
// EffectiveMinISR), CaughtUpUpdate, CaughtUp and ShrinkISR (Kafka's
// lastCaughtUpTimeMs rule against replica.lag.time.max.ms), CanJoinISR (LEO
// >= HW and >= the start of the leader's epoch), FollowerHW, FetchEnd (HW for
// consumers, LEO for replicas) and TruncationOffset (KIP-101 / KIP-279
// divergence from an OffsetForLeaderEpoch answer). Replica and the broker call
// these functions and keep no copy of a rule, so the rule tests test what
// production runs. fetchstate.go is the follower's per-partition
// replica-fetch state machine (FetchState: truncating, fetching, resolving an
// out-of-range offset with ListOffsets, awaiting a new assignment), pure as
// well; the broker's fetchers run it and carry out its actions. EpochCache is Kafka's LeaderEpochFileCache,
// persisted to <replica dir>/leader-epoch-checkpoint through
// core/log.WriteCheckpoint (truncations, fsynced) and WriteCheckpointNoSync (new epochs;
// an entry a crash loses is restored from the recovered log's batch epochs when the replica
// is opened: see EpochCache):
//
//	0            <- version
//	2            <- number of entries
//	0 0          <- "leaderEpoch startOffset", ascending
//	3 1500
//
// Replica wires the decisions to a core/log.Log, an injected clock and the
// waiting produce requests. The scripted scenarios in testdata/*.txt (run by
// TestScripts, internal/scripttest) drive several Replicas through the seed articles'
// worked examples, ISR shrink/expand, strict min.insync.replicas, KIP-101's two
// scenarios and KIP-279's fast failover, and unclean election, with the state after
// every step recorded under it (-rewrite updates it); the real core/controller elects
// the leaders, checks the ISR changes and registers every restart as a new incarnation.
//
// # Lifecycle
//
// NewReplica (loads the epoch cache; no role yet) -> optionally RestoreHW
// with the checkpointed HW -> MakeLeader or MakeFollower on every controller
// change (leader epochs only move forward) -> Close (closes the log).
//
// Leader: AppendAsLeader, then WaitForHW (or CheckHW) with the append's leader
// epoch for acks=all; UpdateFollower on every replica fetch (reports whether the
// follower may join); PrepareShrink every replica.lag.time.max.ms/2 and
// PrepareExpand for a joiner mark an ISR change pending; the broker sends it to
// the controller (AlterPartition) and calls ApplyISR with the accepted state or
// AbortISRChange. A broker that visits only the replicas that changed registers a
// Waiter with WatchISRChanges / WatchHWChanges and asks PrepareShrinkLagging, which
// also says whether an ISR follower is still behind (visit again).
//
// Follower: the fetcher's FetchState truncates (OffsetForLeaderEpoch rounds
// against the new leader, TruncationFor + TruncateTo; or to the local HW in the
// "hw" ablation) before fetching, then AppendAsFollower(records, leader HW) per
// fetch response, so the HW is applied only after any truncation, then
// FollowLeaderLogStart(leader log start): the log start follows the leader's, up to the HW.
//
// DeleteRecords (deleterecords.go): DeleteRecordsOnLeader moves the leader's log start up
// to an offset at most the HW; LowWatermark is the smallest log start over the leader and
// the followers on alive brokers (each reports its own in its fetches), which the caller
// awaits (LowWatermarkChanged).
//
// # Concurrency
//
// Every exported method of Replica and EpochCache is safe for concurrent
// use; the pure functions are trivially so. With isrbench.hw.update=atomic
// (default) nothing on the produce -> follower fetch -> HW advance -> ack
// path takes a mutex: the HW is an atomic.Int64 advanced by
// compare-and-swap-to-max (it never decreases on a leader), follower
// progress fields are atomics, the role and ISR are an immutable snapshot in
// an atomic.Pointer replaced on change (copy-on-write), and acks=all waiters
// park on a channel that the HW advance closes and replaces only when
// someone armed it (so the advance allocates nothing while nobody waits).
// Long-poll fetches park in the purgatory keyed by partition (purgatory.go,
// Kafka's DelayedOperationPurgatory): a Waiter registered on each watched
// replica's LEO or HW signal, which marks only its own index, so a wake-up
// costs the same whatever the number of partitions watched. A fetch session subscribes a
// Waiter for good (Subscribe, session.go) and leaves quiet followers out of its fetches; its
// FetchClock keeps their caught-up time as Kafka's per-fetch record would.
//
// # Why the lock-free HW is linearizable with ISR and role changes
//
// An HW computed from a snapshot that has been replaced must not be published
// when the change would make it wrong. Every leader operation (AppendAsLeader,
// UpdateFollower and the HW advance they make) registers on the snapshot it
// read (snapshot.active: raise the count, then check the snapshot is still
// current, else retry); every change (install) stores the next snapshot, then
// waits until the old one's count is zero. After install returns, no
// operation that read the old snapshot is still running, so:
//
//   - ISR expansion (PrepareExpand): the joiner first enters the maximal ISR
//     (a pending change, KIP-497), the old snapshot drains, and only then is
//     "joiner LEO >= HW" checked. From then on every HW computation counts the
//     joiner, so the HW cannot pass its LEO before or after the controller
//     commits the change: a member of the ISR always holds [log start, HW).
//     A failed check or a refused AlterPartition withdraws the joiner.
//   - ISR shrink: the removed member stays in the maximal ISR until the
//     controller commits; computing over more members only holds the HW back.
//   - Demotion (MakeFollower, re-election, Close): a fencing snapshot stops new
//     leader operations, running ones drain, then the term's final HW is read
//     and recorded (prevTerm). No append or HW advance of the old term lands
//     after the role change, and an acks=all wait is answered by the HW of the
//     term its batch was appended in (CheckHW): committed if that term's HW
//     passed it, else NOT_LEADER_OR_FOLLOWER, even if a later term's HW passes
//     the same offset over other records.
//
// Changing min.insync.replicas (SetMinInsyncReplicas) is an atomic and takes
// effect at the next computation; a lower value can only let the HW advance
// where Kafka would.
//
// The only locks are: the role mutex (MakeLeader, MakeFollower, ApplyISR,
// PrepareShrink/PrepareExpand, follower appends, truncation, Close — rare or
// single-caller), the epoch cache's mutex (never on the leader's append/ack
// path), the HW-lag ring's small mutex (only with Config.OnHWLag, after the
// waiters are signalled) and, in the isrbench.hw.update=mutex ablation, Kafka's
// leaderIsrUpdateLock as a read/write lock (HW advances read, snapshot changes
// write). Batches of idempotent and transactional producers (producer id >= 0,
// producerstate.go, txnstate.go), and transaction markers (AppendMarkerAsLeader),
// are the exception on the leader's append path: each producer id's check +
// append + record runs under that producer's own mutex (and a short map
// mutex), so retries are deduplicated exactly; batches without a producer id
// never take them.
package partition
