// Package cluster is isrbench's embedded Kafka cluster: one in-process controller and N
// brokers, each with its own netfetch wire server on its own listener, its own group
// coordinator (core/group, built here and handed to the server), its own data directory
// (<root>/broker-<id>) and its own replica fetchers over TCP, in one process.
//
// # What it owns
//
//   - Cluster (cluster.go): Start opens the controller's metadata log (<root>/metadata),
//     starts every broker and runs the controller's session checks and, with
//     auto.leader.rebalance.enable, its preferred-leader balancing every
//     leader.imbalance.check.interval.seconds. CreateTopic, Sync, Bootstrap, Addr and the
//     accessors (Controller, Broker, Server, Groups, Stats) serve tests, the workloads'
//     embedded target and `isrbench serve`.
//   - Offline partitions (offline.go): OfflinePartitions lists the partitions without a
//     leader with what each replica lost and the way out (an unclean election); Start logs
//     them. Damaged replicas reach a harness through Config.Broker.OnDamage.
//   - Faults (faults.go): KillBroker, CrashBroker (a power loss: what was not fsynced is
//     lost), their AwaitSession variants (fencing left to broker.session.timeout.ms),
//     RestartBroker (a new incarnation on the same data directory and port), PauseBroker /
//     ResumeBroker (SIGSTOP / SIGCONT) and SetLink (latency, jitter, bandwidth, down on one
//     replica link, netfetch.LinkFaults).
//   - States and actions (status.go): BrokerState, Statuses, Act (stop, kill, crash, pause,
//     resume, start), Links and SetBrokerLinks, which the admin HTTP API (cluster/adminapi)
//     serves.
//   - Config (cluster.go, config.go, brokerconfig.go): every broker's settings as one
//     core/config Settings, set with Set / SetKV (`isrbench serve --set`: SettableKeys,
//     SettingsHelp) or UseSettings (a spec's); the typed fields that carry some of them are
//     derived from it in one table (bindings), and a Config built in Go is read back into it,
//     range-checked, at Start; each broker's STATIC_BROKER_CONFIG values for DescribeConfigs
//     come from it (netfetch.ServerConfig.BrokerConfigs).
//
// # Lifecycle
//
// Start -> CreateTopic/clients -> faults -> Close (removes a temporary data dir). Brokers
// keep their ids, data directories and ports across restarts; the wire-server counters
// (Stats) and the cost counters (Cost, cost.go: file, log-writer and socket calls, requests,
// request times) are summed over all brokers and kept across restarts. The cost counters
// belong to the Cluster, handed down to its file system, brokers, servers and replica
// fetchers, so two clusters in one process count apart.
//
// # Pause and kill
//
// PauseBroker freezes a broker like SIGSTOP: the broker stops fetching and heartbeating,
// and its server handles no further request and writes no response (connections stay
// open) until ResumeBroker; the controller fences it once broker.session.timeout.ms passes
// without a heartbeat. KillBroker closes the listener and every connection and fences the
// broker at once (KillBrokerAwaitSession leaves the fencing to the session timeout, as a
// real Kafka controller would).
//
// # Concurrency
//
// Cluster is safe for concurrent use; its fault operations and Close are serialized with
// each other. A Config is a value: Start copies it.
package cluster
