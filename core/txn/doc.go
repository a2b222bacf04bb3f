// Package txn is isrbench's transaction coordinator (KIP-98, KIP-447): producer ids and
// epochs for transactional ids, the transactions' partitions, and the COMMIT / ABORT markers
// written to those partitions' leaders, with the state stored in the internal topic
// __transaction_state and replicated by the core like any topic.
//
// # What it owns
//
//   - machine.go: the decision rules, pure functions of a transactional id's state (Meta),
//     the request and the time in ms: Init (InitProducerId: a new producer id, or the next
//     epoch, which fences the previous producer; an open transaction is aborted first with
//     a bumped epoch, Fence), AddPartitions (AddPartitionsToTxn, AddOffsetsToTxn), End
//     (EndTxn: Ongoing -> PrepareCommit / PrepareAbort), Complete (-> CompleteCommit /
//     CompleteAbort once the markers are written), Expired (transaction.timeout.ms),
//     IDExpired (transactional.id.expiration.ms: an idle id's tombstone) and Verify
//     (KIP-890's verify-only AddPartitionsToTxn: does the open transaction hold a partition).
//   - records.go: the TransactionLogKey / TransactionLogValue records of __transaction_state
//     (Kafka's schemas).
//   - Coordinator (coordinator.go, requests.go): one per broker. It watches the broker's
//     __transaction_state replicas (broker.Changed): a new leader of a partition replays
//     its log up to the log end (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and finishes the
//     transactions it finds prepared; a broker that stops leading a partition drops its ids
//     (NOT_COORDINATOR). Every state change is written with acks=all before it is
//     installed and answered, and an answer that needs no change but relies on a state
//     not yet below the HW (loaded past it) writes that state again first, since a leader
//     change may truncate it; a request on an id with a write or markers in flight is
//     CONCURRENT_TRANSACTIONS, as Kafka's pendingState. Markers go through a MarkerWriter
//     to each partition's leader (broker.AppendTxnMarkers there), with the coordinator epoch
//     = the leader epoch of the __transaction_state partition, retried until written.
//     Transactions open longer than their timeout are aborted every
//     transaction.abort.timed.out.transaction.cleanup.interval.ms, with a bumped epoch;
//     ids idle past transactional.id.expiration.ms are expired every
//     transaction.remove.expired.transaction.cleanup.interval.ms (a tombstone, then forgotten).
//   - EnsureStateTopic / Locate: __transaction_state is created on first use with
//     transaction.state.log.num.partitions (50) partitions, min(replication factor 3, alive
//     brokers) replicas and min.insync.replicas min(2, replicas). The coordinator of an id
//     is the leader of partition PartitionFor(id) = Utils.abs(id.hashCode) % partitions.
//
// # Concurrency
//
// The Coordinator's methods are safe for concurrent use: one mutex guards the loaded
// partitions and ids, never held across a write, a marker or a load. The request logic is
// written once, as continuations (async.go): by default each wait runs on a goroutine of the
// coordinator's; the blocking methods wait for the continuation's answer.
//
// # Lifecycle
//
// NewCoordinator -> Start -> requests from any goroutine -> Close. A broker incarnation has
// its own Coordinator; the next one loads what the log holds. With Config.Manual (the
// simulator) Start starts nothing: the caller runs Scan, Tick and Poll, uses the Async
// methods, and markers go through Config.MarkersAsync; every callback runs on its goroutine.
package txn
