// Package sim is isrbench's deterministic simulator of the replication core: the real
// partition, broker, controller, fetcher and log code (not copies of it), run on one
// goroutine on virtual time with a seeded scheduler, in the spirit of FoundationDB's
// simulation testing and TigerBeetle's VOPR.
//
// A Sim owns:
//   - a virtual clock (ns) given to the controller, every broker, every log and every
//     file system, so nothing reads the wall clock;
//   - per broker a vfs.MemFS (its disk: a crash keeps only what was fsynced, a full disk
//     fails writes) and the controller's metadata log on a MemFS of its own;
//   - the brokers in Config.Manual mode (no goroutines) and the controller with manual
//     delivery: the simulator decides when a fetcher sends its round, when each message
//     arrives (delayed, dropped, held while the peer is paused), when a broker learns of
//     a metadata change, when it heartbeats, expires ISR members or proposes expansions;
//   - the leaders' AlterPartition requests (broker.Config.AlterPartition), carried to the
//     controller and answered over the network model: delayed each way, so reordered with
//     fetches, appends, metadata deliveries, shrinks and elections that land while a change
//     is in flight, and lost (one in eight each way while faults run, every one while the
//     broker is cut from the controller), which the broker hears as REQUEST_TIMED_OUT and
//     answers by sending the request again;
//   - clients: producers (acks 0, 1, all) that send to the leader they last saw in the
//     metadata, and consumers (a read that returns a record at or past the leader's HW
//     fails the seed, as does an acks=all wait answered NOT_ENOUGH_REPLICAS_AFTER_APPEND
//     before the HW passed its batch); one acks=all wait in four is first looked at up to
//     2.5 s late, as a produce handler that waits on its request's partitions one after the
//     other does for the later ones;
//   - faults: kill, crash (power loss), restart within or after the session timeout,
//     pause/resume, network partitions and slow links between brokers, a broker cut off
//     from the controller, leader moves (half of them moved back soon after: a flapping
//     leadership), a full disk, a restart of the whole cluster with its controller (the
//     metadata log reloaded), num.replica.fetchers changed at run time (partitions move
//     between fetchers with rounds in flight), partitions added to the topic,
//     preferred-leader balancing, and the topic's retention.bytes limited or not (every
//     broker's retention passes then delete old segments below its HW; consumers behind
//     a log start move up to it).
//
// After every step it checks the invariants: log start <= HW <= LEO on every replica; the
// leader's HW never decreases within its leadership; a follower that fetched in the current
// leader epoch has HW <= the leader's (or its own log start, when the leader's lags behind
// it); a follower that applied a fetch response took the leader's log start from it, up to
// its HW; every running member of the controller's ISR (also one whose expansion the
// leader has not heard the answer to) holds the leader's [log start, HW) byte for byte (from
// the later of the two log starts); and, periodically and at the end (after the faults heal
// and the cluster converged), every record acknowledged with acks=all is present at its
// acknowledged offset and nothing a consumer read was lost (truncated after the read),
// unless retention deleted it (below the leader's log start). When a leader acknowledges an
// acks=all batch, at least the effective min.insync.replicas = min(min.insync.replicas,
// replication factor) replicas must hold it (minisr.go: a replica down holds what it held
// when it went down, a crashed one what it held at the crash, and a leader answering from a
// term that has ended since, what it held at that term's HW). A record acknowledged at an
// offset where another was acknowledged before fails the run unless a failure excused one
// of them (an answer may arrive after a failure took its batch: recordAck).
// After the last fault heals, the run is live (liveness.go): within 30 s of virtual time
// (a bound derived from the session, request, AlterPartition and fetch-backoff timeouts),
// every partition has a leader, the ISR is the whole replica set, HW = LEO on every replica,
// every acks=all produce was answered, every idempotent batch acknowledged and no fetcher is
// stuck; a run that does not get there fails with what is missing.
// Crashes (power losses, the only fault that loses data: the page cache) hit any running
// broker, in sync or not; the disks are strict vfs.MemFS (a directory entry survives a crash
// only once its directory was synced). A crash excuses losing exactly the records that no
// live ISR member other than the crashed broker held, and while a crashed broker catches up a
// further failure excuses the records no live ISR member outside it held (the rules are
// written down in excuse.go); nothing else may be lost. One run in four sets the topic's
// flush.messages=1: every append is fsynced before anyone sees it, crashes excuse nothing, and
// a cluster restart is sometimes a power loss of every broker at once.
//
// The group coordinator runs in it too (groups.go): a core/group Coordinator per broker
// incarnation on __consumer_offsets, which the same faults hit, and consumers (dynamic and
// static members, a standalone client) joining, syncing, heartbeating, committing, fetching
// offsets, leaving and restarting over the simulated network. Its invariants: an
// acknowledged commit is never lost or rolled back, a commit is visible only once committed,
// stale generations (and replaced static member ids) are refused, a generation has one
// assignment.
//
// Transactions run in it too (txns.go): a core/txn Coordinator per broker incarnation on
// __transaction_state, markers carried to the partitions' leaders over the simulated
// network, and transactional producers that begin, write to several partitions, commit or
// abort, restart with the same transactional id (the old process going on as a zombie until
// fenced) or abandon a transaction to the coordinator's timeout. A leader verifies a batch
// that would open a transaction with the producer's coordinator over the simulated network
// before it appends it (KIP-890, core/broker's txnverify.go, as netfetch does), except in one
// seed in four, which runs with transaction.partition.verification.enable=false so that the
// partitions' own producer-epoch fencing is checked alone. Its invariants: LSO <= HW on
// every replica, the LSO never goes back within a leadership, a read_committed read never
// returns an aborted or undecided record, a transaction is visible whole or not at all on
// every partition it wrote to (except where a failure excused losing the marker that ended
// it: the producer's next marker there decides it, as in Kafka), and every transaction is
// decided once the faults heal
// (liveness, with LSO = HW everywhere). After a failure that may have lost
// __transaction_state writes, hanging transactions are aborted as an operator would
// (txnoperator.go).
//
// Run: Run(Options{Seed: n}) returns the failure (nil if none) and the trace of every
// step; the same seed gives the same trace. TestSimulation runs many seeds; -sim.seed=N
// replays one and prints its trace.
//
// Concurrency: a Sim is used by one goroutine.
package sim
