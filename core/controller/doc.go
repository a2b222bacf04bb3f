// Package controller is isrbench's metadata plane: the in-process equivalent
// of a KRaft controller quorum that never fails. Brokers call it directly.
//
// It owns:
//   - broker registrations and liveness: RegisterBroker, Heartbeat,
//     CheckSessions (fences brokers whose last heartbeat is older than
//     broker.session.timeout.ms), BrokerDown / BrokerUp;
//   - topics: CreateTopic validates the name (Kafka's rules), partition count,
//     replication factor and topic configs (known keys, Kafka's ranges) and
//     places replicas round-robin over the alive brokers with a per-topic
//     start, so leaders are balanced;
//   - each partition's PartitionState (leader, leader epoch, partition epoch,
//     replicas, ISR), changed only here: leader elections (ISR first, in
//     replica order; outside the ISR only when unclean.leader.election.enable,
//     counting the offsets that loses), ISR shrinks when a broker is fenced,
//     and the leaders' AlterPartition requests, checked against the current
//     leader, leader epoch and partition epoch;
//   - forced elections for tools and fault injection: ElectLeader (Kafka's
//     ElectLeaders PREFERRED / UNCLEAN), TransferLeader (clean move to an
//     alive ISR member), BalanceLeaders (auto.leader.rebalance.enable's
//     preferred-leader balancing with leader.imbalance.per.broker.percentage;
//     RunLeaderBalancer runs it every leader.imbalance.check.interval.seconds);
//   - topic ids (topicid.go, KIP-516): each topic incarnation has a random TopicID made
//     at creation and kept in its topic record; TopicIDIndex resolves ids lock-free;
//   - manual placement: CreateTopicAssigned (CreateTopics with replica assignments,
//     KRaft's checks);
//   - the admin surface: DeleteTopic (each topic incarnation has a TopicID, so a
//     name deleted and created again is a new topic), CreatePartitions (count
//     increases only; placement continues CreateTopic's, or a manual
//     assignment), ChangeTopicConfig (IncrementalAlterConfigs SET/DELETE or
//     legacy AlterConfigs' replace, validate_only; enabling unclean election
//     elects offline partitions at once) and the dynamic broker configs
//     (ChangeBrokerConfig: the cluster-wide default, resource "", and per
//     broker, for the configs Kafka updates at run time:
//     DynamicBrokerConfigNames);
//   - partition reassignment (KIP-455, reassign.go): AlterPartitionReassignments
//     widens a partition's replicas to the target plus the current ones (adding and
//     removing replicas recorded in its state), the added replicas join the ISR by
//     the usual rule, and the ISR change that brings the whole target in sync
//     completes it (replicas = target, removed replicas leave the ISR, a removed
//     leader is replaced by an election); cancelling reverts to the original
//     replicas; ListPartitionReassignments lists those in progress;
//   - change notification: Subscribe delivers every change of the partitions
//     a broker hosts, of their topics (configs, deletion) and of the broker's
//     dynamic configs, in order, from one goroutine per subscriber; Sync waits
//     (with a context deadline) until a broker's subscribers have caught up,
//     so tests never sleep.
//
// Durability. With Config.Dir every operation's changes are one batch of the metadata log
// (store.go, metalog.go: checksummed frames, two copies, snapshots), fsynced before any
// subscriber hears of them. An operation whose batch cannot be persisted is rolled back
// (image.go: the live state is restored from the durable one) and fails with ErrMetadataLog;
// nothing of it is delivered. CheckMetadata and RepairMetadata read and mend a metadata
// directory for `isrbench metadata`.
//
// Epochs. LeaderEpoch is bumped by every leader change, including a change
// to or from NoLeader (-1), and by a reassignment's change that removes
// replicas. PartitionEpoch is bumped by every change of the state (leader,
// ISR or replicas). Both start at 0 at topic creation.
//
// ISR invariants. The ISR is never empty; while a partition has a leader the
// leader is in it and every member is unfenced (fencing removes a broker from
// every ISR it is in unless it is the last member; AlterPartition rejects
// fenced brokers). An offline partition (Leader == NoLeader) keeps the last
// member(s) of its ISR, so the replica that was last in sync is the one
// that comes back as leader (clean) when its broker is up again.
//
// Offsets. The controller stores no offsets. Stats.LostOffsets uses the
// optional Offsets interface: for an unclean election it adds
// max(0, old HW - new leader LEO), both exclusive offsets as Kafka defines
// them (HW: first offset consumers cannot read; LEO: next offset to write).
//
// Lifecycle. New returns a ready Controller; it starts no goroutine except
// one delivery goroutine per Subscribe, which ends on cancel or Close. Time
// comes from Config.Now (nanoseconds) so tests inject a clock; the embedded
// cluster calls CheckSessions periodically, or runs Run.
//
// Tests. The scripts in testdata/ (TestScripts, internal/scripttest) tell elections,
// AlterPartition, session fencing, unclean election and reassignment as stories, with the
// metadata recorded after every step.
//
// Concurrency. Every method is safe for concurrent use. One mutex guards
// all state (the metadata plane is not on the produce/fetch path); no
// callback (subscription fn, Offsets) is ever called while it is held, so
// callbacks may call back into the Controller. All returned states and slices
// are private copies.
package controller
