// Package netfetch is isrbench's network layer: a Kafka wire-protocol
// server per broker, zero-copy Fetch responses and the TCP replica-fetcher
// transport (with fault-injecting links). The embedded cluster that runs
// these servers is package cluster; its admin HTTP API cluster/adminapi.
//
// # What it owns
//
//   - Server (server.go: listener, accept loop, pause; conn.go: the
//     connection loop): one TCP listener per broker. Kafka framing (int32 size,
//     request header v1/v2, response header v0/v1), one goroutine per
//     connection that reads a request, handles it and writes its response
//     before reading the next (responses in request order). On a plaintext
//     connection the loop runs inside one RawConn.Read and waits for
//     readability right after a read that emptied the socket, with no read
//     that finds it empty (isrbench.socket.read.when.ready, readready.go; the
//     replica fetchers do the same per round trip). An acks=all produce on such a
//     connection is answered by the goroutine that completes it, the HW advance
//     past its batches, with one non-blocking write, while its connection stays
//     muted (isrbench.produce.answer.inline, produceinline.go). With
//     isrbench.produce.wake.after.response an acks=0/1 produce is answered before
//     its appends wake the followers' parked fetches, Kafka's order (00_produce.go). One file per
//     API key, NN_name.go (00_produce.go, 01_fetch.go, ...). Each registers its key,
//     version range and handler from its own init (registry.go); ApiVersions
//     advertises what is registered, so adding an API is adding its file. Requests are decoded with kmsg;
//     responses are encoded with kmsg except Fetch.
//   - The group coordinator's wire side (groups.go and the group API files):
//     the server routes the group APIs to the core/group.Coordinator it is given
//     (ServerConfig.Groups; the embedded cluster builds, starts and closes one per
//     broker). JoinGroup and
//     SyncGroup park the connection goroutine until the rebalance answers
//     them (Kafka also handles one request per connection at a time); the
//     coordinator holds no lock meanwhile, and a closing connection or server
//     releases them.
//   - Fetch responses (v4..v13) are encoded by hand into a per-connection
//     buffer (no allocation per request once grown; fetch_encode.go), and each
//     partition's records go straight from the segment file to the socket with
//     sendfile(2) at an explicit offset (isrbench.zero.copy=true), or with
//     pread+write (false; fetch_send.go). Stats count both. 01_fetch.go is the
//     handler: sessions, topic ids, the broker's Fetch.
//   - Transport: broker.Transport over TCP (Fetch v12, ListOffsets v7 and
//     OffsetForLeaderEpoch v4 with replica_id), with optional LinkFault
//     wrappers (latency, jitter, bandwidth, down) per (source, follower):
//     link.go's LinkFaults, which NewFaultyTransport reads.
//     The replica fetch protocol sits in replica_fetch*.go: the versions and
//     the ReplicaState tag both ends use (replica_fetch.go), the follower's
//     client and its incremental fetch session; the leader answers in the
//     API files (01_fetch.go, 02_list_offsets.go, 23_offset_for_leader_epoch.go).
//   - The admin surface (configs.go, brokerconfig.go, alter.go and the admin API files;
//     the broker configs are the core/config registry's, their static values per broker
//     ServerConfig.BrokerConfigs):
//     DeleteTopics, CreatePartitions, ElectLeaders, DescribeCluster and the
//     partition reassignment APIs (AlterPartitionReassignments,
//     ListPartitionReassignments) through the controller; DescribeConfigs with every topic and broker config, its
//     value, source (TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG,
//     DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG),
//     read_only flag and synonyms; AlterConfigs / IncrementalAlterConfigs of
//     topic configs and of the broker configs Kafka changes at run time
//     (controller.DynamicBrokerConfigNames), refusing the others as Kafka does.
//     Mutating admin requests answer once the alive brokers applied the change
//     (bounded by the request's timeout).
//   - Listener security (security.go, sasl_mechanisms.go, 17_sasl_handshake.go,
//     36_sasl_authenticate.go, 50/51 SCRAM users, acls.go): a server's listeners each have
//     Kafka's security protocol; TLS is handshaken on the connection's goroutine, SASL
//     PLAIN and SCRAM-SHA-256/512 are served against the controller's SCRAM users, and
//     nothing but ApiVersions and the SASL exchange is served before authentication.
//     Under TLS, Fetch records take the copy path (TLSCopyBytes). The replica fetchers
//     run the inter-broker listener's TLS and SASL (replica_fetch_security.go).
//
// # Offsets
//
// Offsets follow Kafka: a fetch offset is the first offset wanted
// (inclusive); HW and LEO are exclusive ends; ListOffsets -2 gives the log
// start (inclusive), -1 the HW (exclusive end of what consumers read), with the leader
// epoch from the same replica.
//
// # Lifecycle
//
// A Server: NewServer -> Serve (in a goroutine) -> Pause/Resume -> Close
// (closes the listener and every connection). Pause freezes the server like
// SIGSTOP: it handles no further request and writes no response
// (connections stay open) until Resume. Servers may share Counters
// (ServerConfig.Counters), as an embedded cluster's brokers do, with their replica-fetch
// Transports (SetCounters); Counters.Cost is the cost accounting's share of them.
//
// # Buffers
//
// A request that fits a connection's 64 KiB read buffer is decoded in place
// in it; a larger one is read into the connection's request buffer. Produce
// records are passed to broker.Produce aliasing either, which is safe
// because Produce appends (and copies to the page cache) before it returns.
// Fetch slices are released after the response is written. A replica
// FetchConn's Records alias its response buffer until its next call.
//
// # Connection bounds
//
// ConnLimits (limits.go) bound what clients can hold, under Kafka's names:
// max.connections and max.connections.per.ip (a connection over them is
// closed as soon as it is accepted), connections.max.idle.ms (no request
// started for that long), isrbench.request.read.timeout.ms (a request must
// arrive within it once its first byte has), and queued.max.request.bytes
// (a per-broker pool for request buffers larger than the read buffer: a
// request that does not fit waits, unread, until memory is released or its
// read timeout passes). The brokers of a process share its RLIMIT_NOFILE:
// each keeps a guaranteed FDShare of it for client connections and may use a
// shared part besides, so one broker's clients cannot take the descriptors
// the others need. The shared part also holds the logs' open segment files
// (at most LogFiles, however many replicas); a limit too low for them bounds
// the partition replicas the process hosts (ReplicaCapacity), which the
// embedded cluster's controller enforces on CreateTopics and CreatePartitions.
//
// # Tests
//
// The tests that need brokers with a controller (the API files end to end,
// groups, replica fetch sessions, link faults) are external (package
// netfetch_test) and start an embedded cluster with cluster/clustertest;
// export_test.go gives them the few internals they check against.
//
// # Concurrency
//
// Server, Transport, LinkFaults and Counters are safe for concurrent use. A connection's
// buffers belong to its goroutine. A FetchConn is used by one fetcher
// goroutine (Close may come from anywhere). Counters are atomics.
//
// # Versions
//
// Produce is served from v0 and FindCoordinator is advertised from v0
// because librdkafka infers codec support from the advertised ranges
// (rdkafka_feature.c, rdkafka_msgset_writer.c): gzip and snappy need
// Produce v0 in the range, lz4 also FindCoordinator v0, zstd Produce v7 and
// Fetch v10. Produce v0-v2 carry message sets of magic 0/1, which are
// answered UNSUPPORTED_FOR_MESSAGE_FORMAT per partition (isrbench stores
// RecordBatch v2 only); magic != 2 from v3 on is INVALID_RECORD, zstd before
// v7 UNSUPPORTED_COMPRESSION_TYPE (records.CheckProduceFormat). The broker
// checks the sizes (max.message.bytes, the segment size) and refuses internal topics
// (INVALID_TOPIC_EXCEPTION) when it appends.
// Metadata is served from v0 (kafka-python's version probe sends it).
//
// Topic ids (KIP-516): every topic has a random UUID made at creation and kept in the
// metadata log (controller.TopicID). Metadata (v10+) and CreateTopics (v7+) answer it;
// Metadata (v12), DeleteTopics (v6) and Fetch (v13) resolve a topic given by id,
// UNKNOWN_TOPIC_ID when no topic has it (a Fetch resolves through the controller's lock-free
// TopicIDIndex; its unknown ids stay out of fetch sessions and are answered on every request
// that names them).
//
// # Transactions
//
// Transactions (core/txn) are served: FindCoordinator key type 1, InitProducerId with a
// transactional id, AddPartitionsToTxn (v0-v3, the clients' versions, and v4: KIP-890's
// batched form, VerifyOnly transactions verified), AddOffsetsToTxn, EndTxn (v0-v3),
// WriteTxnMarkers, TxnOffsetCommit (v0-v3), DescribeTransactions, ListTransactions;
// read_committed fetches stop at the LSO and carry the aborted transactions of their range.
// With transaction.partition.verification.enable (default true; KIP-890 part 1,
// txnverify.go), a leader asks the producer's coordinator (ServerConfig.VerifyTxn) before a
// transactional batch opens a transaction on a partition; one not in the transaction is
// refused with INVALID_TXN_STATE and not appended, as is one a marker reached between its
// verification and its append (Kafka's VerificationGuard, core/broker's txnverify.go).
//
// # Unsupported
//
// Config documentation in DescribeConfigs and BROKER_LOGGER / GROUP / CLIENT_METRICS config
// resources (INVALID_REQUEST); an unsupported API key or version closes the connection with
// a logged reason, except ApiVersions, which always answers (UNSUPPORTED_VERSION with the
// ranges, as v0).
package netfetch
