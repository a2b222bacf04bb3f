// Package workloads is the runner of the isrbench harness: Run drives one workload (a
// spec.Spec) on a target and writes its run directory; Sweep runs a spec over the points of
// its axes. The harness is four packages, by job:
//
//   - spec: the workload language (YAML, flat keys, faults, vary, the embedded specs);
//   - target: the cluster a run drives (embedded, kfake, kafka://) and the Kafka config mapping;
//   - load: the producers and their pacer, the consumers and group members, the HW observer;
//   - workloads (this package): the runner, the fault schedule, the timelines, the
//     verification and the reports.
//
// spec imports none of the others; target and load build on spec only; this package imports
// all three (layout_test.go enforces the direction).
//
// A run goes through five phases, each a function of the run's input and of the values the
// earlier phases returned: setup opens the target and creates the clients and the schedule
// (prepared), measure runs the load and the loops alongside it (measured), settle heals,
// drains and lists the end offsets (settled), verify reads everything back (verified), and
// report writes the run directory from them (runner_values.go). No phase changes an earlier
// phase's value; what must end with the run is closed when Run returns.
//
// Before the start offsets are read, with every follower fetching and nothing else running,
// setup runs the one-at-a-time probe (runner_probe.go, load.RunProbe): probe.records records,
// each sent once the previous one was acknowledged. Its ack latency is the service time of
// the same invocation; report relates the load's ack p50 and p99 to its p50 (result.json
// probe.queueing). Its records lie before the start offsets, so the consumers and the
// read-back never see them.
//
// # Faults
//
// The spec's fault schedule (spec.Fault) runs alongside the load: at is relative to the start
// of measurement, and each fault is healed duration after it was applied, at the latest when
// the measurement ends.
// Every kind but exec and restart-producer acts on the embedded cluster's brokers from
// inside the process (a kafka:// target takes those two only). Kinds (FaultKinds; pause, kill, restart, crash are
// accepted as aliases):
//
//   - pause-broker: PauseBroker, like SIGSTOP or a long GC pause (the broker stops fetching,
//     heartbeating and answering); resumed after duration.
//   - kill-broker: an abrupt stop (no checkpoints); restarted from its data dir after
//     duration, or with duration 0 left down until a restart-broker fault or the end of the
//     measurement. fence: now (default) fences it in the controller at once; fence: session
//     only after broker.session.timeout.ms, so a quick restart keeps its ISR membership.
//   - crash-broker: kill-broker plus a power loss: every log loses what was not fsynced
//     (flush.messages / flush.ms).
//   - restart-broker: starts a stopped broker, or restarts a running one cleanly (HW
//     checkpoint written, ISR membership kept); no duration.
//   - slow-link: latency (+ uniform jitter) per request direction and a token-bucket
//     bandwidth cap in bytes/s per connection and direction, on every replica link between
//     the target and the other brokers. The cap is per connection, so more fetchers
//     (num.replica.fetchers: one connection each) get more bandwidth, as on a real WAN link.
//   - partition: no replica traffic between two groups of brokers ("0|1,2", or the target
//     and every other broker). The in-process controller still sees every broker and client
//     connections stay up: the cut-off followers leave the ISR after replica.lag.time.max.ms.
//   - exec: a shell command at at and an optional undo at at + duration, for any target
//     (docker compose stop, kubectl, tc, isrbench broker/link against isrbench serve); the
//     target resolved to a broker whose id and address replace {broker}, {host}, {port}; the
//     output saved in the run directory, the exit statuses in result.json (faultexec.go).
//   - reassign: the target's replicas moved under load (faultreassign.go); a target
//     leader-of: an internal topic partition moves that partition alone (a coordinator move).
//   - restart-producer: transactional producer N (the target) killed half-way through a
//     transaction and restarted with the same transactional.id: the zombie is fenced and
//     must not commit (faultproducer.go, load/producer_restart.go); no duration.
//
// target is a broker id, leader-of:TOPIC-PARTITION, follower-of:TOPIC-PARTITION (the first
// running ISR follower), any-follower (a random running follower of faults[].partition), or
// leader / follower (of faults[].partition of the benchmark topic); roles are resolved when
// the fault starts. After the schedule, Run heals whatever is still broken (HealAll), waits
// for full ISRs, then checks durability. Applied faults are listed in result.json faults in
// schedule order, each with its timeline figures.
//
// Scenario specs (specs/): follower-pause, leader-kill, min-isr (two producer groups, acks=all
// refused with NOT_ENOUGH_REPLICAS while acks=1 is accepted), unclean-election (loss counted),
// power-loss (sweep over flush.messages), cross-dc (sweep over num.replica.fetchers x
// replica.fetch.max.bytes behind a slow link) and kip101-truncate-hw (the KIP-101 sequence,
// sweep over isrbench.truncate.mode). Their tests run each in a short form and check its
// outcome (scenarios_test.go), plus randomized kill/restart/pause sequences.
//
// # Partition timeline
//
// partitions.csv (linked from result.json files.partitions; on a kafka:// target from Metadata
// and ListOffsets, without LEOs, which clients cannot see: package target) has one row per
// partition every 100 ms (above 100 partitions less often: every second at 1,000, as the
// sampling costs O(partitions)) from the start of measurement until the cluster is
// fully replicated again after the run: leader, leader epoch, replicas, ISR, the leader's HW,
// each running replica's LEO, under-replicated / under-min-ISR flags and the produce errors
// by error name in that interval (ISR changes shorter than the period can be missed there;
// result.json isr counts every one until the ISRs are full again after the run: the brokers'
// IsrShrinks/IsrExpands counters plus the ISR shrinks the controller makes when it fences a
// killed or timed-out broker). From it the
// summary lists the ISR shrinks and expands with their times, and per fault: the time from the
// fault's start to the first ISR shrink, from its end to full ISRs again, the failed produces
// and the partition-seconds without a leader meanwhile. These measurements go to faults.json
// (FaultsReport, named by result.json files.faults) and, as text, to result.json faults[i].detail,
// not to config, which identifies a configuration for grouping and sweeps.
//
// # Producer groups
//
// producers may be a list of groups ({count, acks, rate, ...} each, rate per group); the flat
// producers.* keys set the first group. Durability is reported per acks level
// (durability.by_acks), failures per group in faults.json producer_groups.
//
// # Durability
//
// Every record value starts with (producer id, seq) (see load.Header). After the run the
// partitions are read back through a consumer from the leaders, from the offsets listed
// before the load (inclusive) to the HW after it (exclusive): acknowledged / verified
// (found) / lost / duplicated / out of order, per acks level. On every target the replicas
// are compared batch by batch up to each replica's HW with internal/replicaverify (isrbench
// verify-replicas): a divergence of an ISR member sets durability.replicas_identical false
// and is named in the notes; stopped and out-of-sync replicas that cannot be read are
// skipped (notes durability.replicas_checked). On the embedded target every running
// replica's log is also read directly (batches parsed with core/records) over the same
// range: replica logs must hold the leader's records at the same offsets (faults.json
// replica_logs). A run with acks=all
// producers that lost an acknowledged record fails (ErrDurability, exit 1) unless the spec
// allows loss: unclean.leader.election.enable, isrbench.truncate.mode=hw, or crash-broker
// without flush.messages=1 (result.json durability.loss_expected says which).
//
// Retention (see Disk) may delete the oldest acknowledged records before the read-back. The
// read-back therefore starts at max(offset before the load, log start after retention was
// applied once more on every broker); the replica-log comparison starts at the latest log
// start of the partition's replicas. An acknowledged record that is missing counts as expired
// (durability.expired, not lost) when retention moved its partition's log start past the
// pre-load offset and its sequence is below the first sequence of its producer still read
// in that partition (the producer records the partition of every acknowledged record, one
// byte per record, to place it). A record lost below the log start cannot be told from an
// expired one; a missing record of a producer with nothing left in its partition counts as
// lost. Verified+Lost+Expired == Acked.
//
// # Disk
//
// Disk is finite: the embedded cluster's data dir is temporary, and retention bounds a long
// run. The harness's defaults differ from Kafka's there: log.segment.bytes 64 MiB (Kafka
// 1 GiB), log.retention.bytes 256 MiB per partition replica (Kafka unlimited) and
// log.retention.check.interval.ms 1000 (Kafka 5 min); log.retention.ms stays 7 days. A
// replica's log holds at most about retention.bytes + segment.bytes (retention never deletes
// the active segment nor past the HW) plus one check interval of writes, so 6 partitions x
// RF 3 stay below ~6.5 GiB whatever the duration (a 60 s max-throughput run without retention
// wrote 47 GB). Set log.retention.bytes=-1 to keep everything.
//
// The disk guard (embedded target; a kafka:// cluster's disks are its own) checks the free
// space of the data dir's filesystem (statfs f_bavail) before
// the load and every second during it. Below isrbench.min.free.disk (default 2GiB; a size or
// a percentage of the filesystem, 0 = off) the run stops producing, ends with a *LowDiskError
// (ErrLowDisk) naming the path, the free bytes and the floor (exit 1), and its data dir is
// removed. result.json notes["disk"] has the data dir's peak size and the least free space.
//
// # HW lag
//
// On the embedded target the core reports, per leader batch, the time from its append until
// the HW passed it, weighted by its record count (broker Config.OnHWLag) into one
// results.Recorder, counted when the HW advance happens inside the measurement window. A
// kafka:// cluster does not expose that; its hw_lag histogram stays empty. On every target
// the HW lag is also observed from a client (load.HWObserver): the acknowledged records'
// offsets against the HW that a fetch parked on every leader reports, from the
// acknowledgement (hw_lag_client_us) and from the intended send (hw_lag_client_send_us),
// with the observer's resolution in result.json hw_observer.
//
// # Transactions
//
// A transactional spec (spec.Spec.Transactional: producers.transactional.id, or the pipeline)
// adds the parts of runner_txn.go: load.LSOObserver polls ListOffsets LATEST at both isolation
// levels for the LSO lag (lso_lag_us), the producers record their commit latency
// (commit_latency_us), read_committed consumers their e2e as e2e_read_committed_us, and the
// pipeline members (load.Pipeline) run alongside the consumers. settle waits for the LSO to
// reach the HW and the pipeline to commit every input; verify reads the topics back
// read_committed (load.CheckTransactions, load.CheckPipeline) into result.json transactions,
// and anomalies fail the run with ErrDurability.
//
// # External clusters and workers
//
// On a kafka:// target the spec's settings are applied the way Kafka lets a client change
// them (target.ConfigSession): topic configs at creation, cluster-wide dynamic
// broker configs by IncrementalAlterConfigs (restored at the end), read-only ones checked
// against DescribeConfigs or assumed (Options.Assume). Options.Worker makes a run the K-th of
// N load generators of one spec (load.Worker); results.MergeRuns merges their run directories.
//
// # Lifecycle and concurrency
//
// Run is called from one goroutine and owns everything it starts: the target (an embedded
// cluster and its temp data dir under os.TempDir() are removed before Run returns, also on
// error or cancellation), one goroutine per producer (pprof label role=producer-client) and
// consumer (role=consumer-client), the timeline sampler and the fault scheduler. Producer
// histograms are recorded from kgo's promise goroutines through results.Recorder (one small
// lock per producer); send delay and e2e histograms have a single owner goroutine. All are
// merged after the goroutines stopped. Samples whose intended send time lies outside
// [measurement start, measurement end) are not recorded, so warm-up needs no reset.
//
// After the measurement the producers are drained, the faults healed, the consumers catch up
// to the HW, and the durability checks run (see Durability). The partition timeline has its
// own goroutine; it reads the producers' error counts under their locks.
package workloads
