// Package netfetch is isrbench's network layer: a Kafka wire-protocol
// server per broker, zero-copy Fetch responses, the TCP replica-fetcher
// transport (with fault-injecting links) and the embedded cluster.
//
// # What it owns
//
//   - Server: one TCP listener per broker. Kafka framing (int32 size,
//     request header v1/v2, response header v0/v1), one goroutine per
//     connection that reads a request, handles it and writes its response
//     before reading the next (responses in request order). One file per
//     API key: 00_produce.go, 01_fetch.go, 02_list_offsets.go,
//     03_metadata.go, 18_api_versions.go, 19_create_topics.go,
//     22_init_producer_id.go, 23_offset_for_leader_epoch.go,
//     32_describe_configs.go. Requests are decoded with kmsg; responses are
//     encoded with kmsg except Fetch.
//   - Fetch responses (v4..v12) are encoded by hand into a per-connection
//     buffer (no allocation per request once grown), and each partition's
//     records go straight from the segment file to the socket with
//     sendfile(2) at an explicit offset (isrbench.zero.copy=true), or with
//     pread+write (false). Stats count both.
//   - Transport: broker.Transport over TCP (Fetch v12 and
//     OffsetForLeaderEpoch v4 with replica_id), with optional LinkFault
//     wrappers (latency, jitter, bandwidth, down) per (source, follower).
//   - Cluster: one controller, N brokers with their own listener, data
//     directory (<root>/broker-<id>) and fetchers; fault operations
//     (kill, crash, restart, pause, resume, links).
//
// # Offsets
//
// Offsets follow Kafka: a fetch offset is the first offset wanted
// (inclusive); HW and LEO are exclusive ends; ListOffsets -2 gives the log
// start (inclusive), -1 the HW (exclusive end of what consumers read).
//
// # Lifecycle
//
// StartCluster -> CreateTopic/clients -> faults -> Close (removes a
// temporary data dir). A Server: NewServer -> Serve (in a goroutine) ->
// Pause/Resume -> Close (closes the listener and every connection).
//
// # Pause and kill
//
// PauseBroker freezes a broker like SIGSTOP: the broker stops fetching and
// heartbeating, and the server handles no further request and writes no
// response (connections stay open) until ResumeBroker; the controller
// fences it once broker.session.timeout.ms passes without a heartbeat.
// KillBroker closes the listener and every connection and fences the
// broker at once (KillBrokerAwaitSession leaves the fencing to the session
// timeout, as a real Kafka controller would).
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
// the others need.
//
// # Concurrency
//
// Server, Cluster and Transport are safe for concurrent use. A connection's
// buffers belong to its goroutine. A FetchConn is used by one fetcher
// goroutine (Close may come from anywhere). Counters are atomics.
//
// # Unsupported
//
// Consumer groups, transactions and fetch sessions (every Fetch is a full
// fetch, session id 0) are not implemented; an unsupported API key or
// version closes the connection with a logged reason, except ApiVersions,
// which always answers (UNSUPPORTED_VERSION with the ranges, as v0).
package netfetch
