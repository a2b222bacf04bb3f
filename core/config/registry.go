package config

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	maxInt32 = math.MaxInt32
	maxInt16 = math.MaxInt16
	maxInt64 = math.MaxInt64
	never    = "9223372036854775807"
)

// broker returns a numeric broker config (read-only in Kafka unless changed with an option).
func broker(name string, t Type, unit, def string, lo, hi int64, doc string) Entry {
	return Entry{Name: name, Type: t, Unit: unit, Default: def, Min: lo, Max: hi, Side: SideBroker, Update: ReadOnly, Doc: doc}
}

// flag returns a boolean broker config.
func flag(name, def, doc string) Entry {
	return Entry{Name: name, Type: Boolean, Default: def, Side: SideBroker, Update: ReadOnly, Doc: doc}
}

// mode returns a String mode switch whose allowed values are modes (the default first).
func mode[M ~string](name string, modes []M, doc string) Entry {
	names := modeNames(modes)
	return Entry{Name: name, Type: String, Default: names[0], Modes: names, Side: SideBroker, Update: ReadOnly, Doc: doc}
}

// dur returns a Duration broker switch (isrbench's own, "500ms").
func dur(name string, lo, hi time.Duration, doc string) Entry {
	return Entry{Name: name, Type: Duration, Default: "0s", Min: int64(lo), Max: int64(hi), Side: SideBroker, Update: ReadOnly, Doc: doc}
}

// fixed returns a broker config isrbench implements at Kafka's default only; why says what
// isrbench lacks (the error that refuses another value gives it).
func fixed(name string, t Type, def string, topic string, why string) Entry {
	return Entry{Name: name, Type: t, Default: def, Side: SideBroker, Update: ClusterWide, TopicConfig: topic, Fixed: true, Doc: why}
}

func (e Entry) dynamic(u Update) Entry     { e.Update = u; return e }
func (e Entry) topic(name string) Entry    { e.TopicConfig = name; return e }
func (e Entry) orNever() Entry             { e.Never = true; return e }
func (e Entry) atLeast(other string) Entry { e.AtLeast = other; return e }
func (e Entry) threadPool() Entry          { e.ThreadPool = true; return e }

// entries is the registry, sorted by name (init). Defaults and ranges are Kafka's
// (KafkaConfig, ReplicationConfigs, ServerLogConfigs, GroupCoordinatorConfig, SocketServerConfigs)
// unless a comment says otherwise; update modes are Kafka's (DynamicBrokerConfig).
var entries = []Entry{
	broker("num.replica.fetchers", Int, "", "1", 1, 64, "fetcher goroutines (each with one connection) per source broker").dynamic(ClusterWide).threadPool(),
	broker("replica.fetch.wait.max.ms", Int, "ms", "500", 0, maxInt32, "max replica fetch long-poll wait (ms), at most replica.lag.time.max.ms"),
	broker("replica.fetch.min.bytes", Int, "bytes", "1", 1, maxInt32, "min bytes before a replica fetch returns"),
	broker("replica.fetch.max.bytes", Int, "bytes", "1048576", 1, maxInt32, "max bytes per partition per replica fetch"),
	broker("replica.fetch.response.max.bytes", Int, "bytes", "10485760", 1, maxInt32, "max bytes per replica fetch response"),
	// replica.socket.timeout.ms: at least replica.fetch.wait.max.ms (KafkaConfig; checked by
	// the broker), so that a parked fetch is not taken for a dead leader.
	broker("replica.socket.timeout.ms", Int, "ms", "30000", 1, maxInt32,
		"a follower's replica request (Fetch, ListOffsets, OffsetForLeaderEpoch) unanswered this long fails: the fetcher drops the connection and dials again after replica.fetch.backoff.ms"),
	broker("replica.fetch.backoff.ms", Int, "ms", "1000", 0, maxInt32, "a follower's wait before it fetches a partition again after an error (ms)"),
	// Min 2: ISR expiration runs every replica.lag.time.max.ms/2, which must be >= 1 ms.
	broker("replica.lag.time.max.ms", Long, "ms", "30000", 2, MaxMs, "ISR lag time (ms): a follower not caught up for this long leaves the ISR"),
	broker("replica.high.watermark.checkpoint.interval.ms", Long, "ms", "5000", 1, MaxMs, "how often each broker writes its HW checkpoint (ms)"),
	// Replication quotas (Kafka's QuotaConfig, ReplicationQuotaManager): dynamic broker
	// configs; the throttled replicas are the topic configs
	// leader/follower.replication.throttled.replicas. 0 set at start is the default
	// (unlimited), as message.max.bytes; a dynamic 0 is a bound of 0 bytes/s, as Kafka's.
	broker("leader.replication.throttled.rate", Long, "bytes/s", never, 0, maxInt64,
		"bound of the replication traffic this broker serves as a leader to the throttled replicas outside the ISR").dynamic(PerBroker),
	broker("follower.replication.throttled.rate", Long, "bytes/s", never, 0, maxInt64,
		"bound of the replication traffic this broker fetches as a follower for its throttled replicas outside the ISR").dynamic(PerBroker),
	{Name: "replication.quota.window.num", Type: Int, Default: "11", Side: SideBroker, Update: ReadOnly, Fixed: true,
		Doc: "samples kept by the replication quotas' rate"},
	{Name: "replication.quota.window.size.seconds", Type: Int, Unit: "s", Default: "1", Side: SideBroker, Update: ReadOnly, Fixed: true,
		Doc: "length of each replication quota sample (s)"},
	broker("min.insync.replicas", Int, "", "1", 1, maxInt32, "replicas that must acknowledge an acks=all produce").dynamic(ClusterWide).topic("min.insync.replicas"),
	broker("broker.session.timeout.ms", Int, "ms", "9000", 1, maxInt32, "controller fences a broker silent this long (ms)"),
	flag("unclean.leader.election.enable", "false", "elect out-of-sync replicas").dynamic(ClusterWide).topic("unclean.leader.election.enable"),
	flag("auto.create.topics.enable", "true", "create a topic on its first metadata request"),
	flag("delete.topic.enable", "true", "DeleteTopics deletes topics; false fails every topic of a DeleteTopics with TOPIC_DELETION_DISABLED"),
	flag("auto.leader.rebalance.enable", "true", "the controller elects preferred leaders back"),
	broker("leader.imbalance.check.interval.seconds", Long, "s", "300", 1, maxInt32, "how often the controller checks the preferred-leader balance (s)"),
	broker("leader.imbalance.per.broker.percentage", Int, "%", "10", 0, 100, "share of a broker's preferred partitions it may not lead before a rebalance"),
	broker("num.partitions", Int, "", "1", 1, maxInt32, "partitions of an auto-created topic"),
	broker("default.replication.factor", Short, "", "1", 1, maxInt16, "replication factor of an auto-created topic"),

	broker("log.segment.bytes", Int, "bytes", "1073741824", 14, maxInt32, "segment size").dynamic(ClusterWide).topic("segment.bytes"),
	broker("log.index.interval.bytes", Int, "bytes", "4096", 0, maxInt32, "bytes between offset index entries").dynamic(ClusterWide).topic("index.interval.bytes"),
	broker("log.retention.bytes", Long, "bytes", "-1", -1, maxInt64, "bytes kept per partition replica before the oldest segments are deleted, -1 = unlimited").dynamic(ClusterWide).topic("retention.bytes"),
	broker("log.retention.ms", Long, "ms", "604800000", -1, maxInt64, "delete segments whose newest record is older (ms), -1 = unlimited").dynamic(ClusterWide).topic("retention.ms"),
	broker("log.retention.check.interval.ms", Long, "ms", "300000", 1, MaxMs, "how often each broker applies retention (ms)"),
	broker("log.flush.interval.messages", Long, "messages", never, 1, maxInt64, "fsync every N messages").dynamic(ClusterWide).topic("flush.messages"),
	broker("log.flush.interval.ms", Long, "ms", never, 0, maxInt64, "fsync every N ms").dynamic(ClusterWide).topic("flush.ms"),
	broker("message.max.bytes", Int, "bytes", "1048588", 0, maxInt32, "largest record batch a produce may carry").dynamic(ClusterWide).topic("max.message.bytes"),
	fixed("log.cleanup.policy", List, "delete", "cleanup.policy", "log compaction is not implemented"),
	fixed("compression.type", String, "producer", "compression.type", "the broker keeps the producer's compression; recompression is not implemented"),
	fixed("log.index.size.max.bytes", Int, "10485760", "segment.index.bytes", "the offset index has no size limit"),
	fixed("log.message.timestamp.type", String, "CreateTime", "message.timestamp.type", "LogAppendTime (broker-assigned timestamps) is not implemented"),
	fixed("log.preallocate", Boolean, "false", "preallocate", "segment preallocation is not implemented"),
	fixed("log.roll.ms", Long, "604800000", "segment.ms", "time-based segment rolling is not implemented"),
	fixed("log.segment.delete.delay.ms", Long, "60000", "file.delete.delay.ms", "segments are deleted at once"),
	{Name: "broker.id", Type: Int, Default: "-1", Side: SideBroker, Update: ReadOnly, Fixed: true, Doc: "the broker's id (set per broker)"},
	{Name: "log.dirs", Type: String, Side: SideBroker, Update: ReadOnly, Fixed: true, Doc: "the broker's data directory (set per broker)"},

	broker("socket.request.max.bytes", Int, "bytes", "104857600", 1, maxInt32, "largest request a broker reads"),
	broker("max.connections", Int, "", "2147483647", 1, maxInt32, "connections each broker accepts at once (further ones are closed at once; each broker's share of RLIMIT_NOFILE lowers it)").dynamic(PerBroker),
	broker("max.connections.per.ip", Int, "", "2147483647", 1, maxInt32, "connections from one client IP address each broker accepts at once").dynamic(PerBroker),
	broker("connections.max.idle.ms", Long, "ms", "600000", 1, MaxMs, "close a connection on which no request started for this long (ms), -1 = never").orNever(),
	broker("queued.max.request.bytes", Long, "bytes", "-1", 1, maxInt64,
		"bytes of request buffers each broker's connections may hold at once (over it a request waits, unread, until isrbench.request.read.timeout.ms), -1 = unbounded").orNever().atLeast("socket.request.max.bytes"),
	broker("max.incremental.fetch.session.cache.slots", Int, "", "1000", 0, maxInt32, "incremental fetch sessions a broker keeps, 0 = none"),

	broker("group.initial.rebalance.delay.ms", Int, "ms", "3000", 0, maxInt32, "coordinator's delay of a new group's first rebalance (ms)"),
	broker("group.min.session.timeout.ms", Int, "ms", "6000", 1, maxInt32, "smallest session timeout a group member may ask for (ms)"),
	broker("group.max.session.timeout.ms", Int, "ms", "1800000", 1, maxInt32, "largest session timeout a group member may ask for (ms)"),
	broker("group.max.size", Int, "", "2147483647", 1, maxInt32, "members a group may have"),
	// Max: the controller's partition bound (controller.MaxPartitions; Kafka has none).
	broker("offsets.topic.num.partitions", Int, "", "50", 1, 100000, "partitions of __consumer_offsets"),
	broker("offsets.topic.replication.factor", Short, "", "3", 1, maxInt16, "replication factor of __consumer_offsets"),
	broker("offsets.topic.segment.bytes", Int, "bytes", "104857600", 14, maxInt32, "segment size of __consumer_offsets"),
	broker("offsets.commit.timeout.ms", Int, "ms", "5000", 1, maxInt32, "how long an offset commit waits for its replicas (ms)"),
	broker("offsets.retention.minutes", Int, "min", "10080", 1, maxInt32,
		"committed offsets expire this long after the group became empty, or after their commit (standalone consumers, topics a stable group no longer subscribes to)"),
	broker("offsets.retention.check.interval.ms", Long, "ms", "600000", 1, MaxMs, "how often the group coordinator expires committed offsets (ms)"),
	broker("offset.metadata.max.bytes", Int, "bytes", "4096", 1, maxInt32, "largest metadata string of an offset commit"),

	broker("transaction.state.log.num.partitions", Int, "", "50", 1, 100000, "partitions of __transaction_state"),
	broker("transaction.state.log.replication.factor", Short, "", "3", 1, maxInt16, "replication factor of __transaction_state (capped by the alive brokers)"),
	broker("transaction.state.log.min.isr", Int, "", "2", 1, maxInt32, "min.insync.replicas of __transaction_state (capped by its replication factor)"),
	broker("transaction.state.log.segment.bytes", Int, "bytes", "104857600", 14, maxInt32, "segment size of __transaction_state"),
	broker("transaction.max.timeout.ms", Int, "ms", "900000", 1, maxInt32, "largest transaction.timeout.ms a producer may ask for (ms)"),
	broker("transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, "ms", "10000", 1, maxInt32,
		"how often the transaction coordinator aborts transactions open longer than their transaction.timeout.ms (ms)"),
	flag("transaction.partition.verification.enable", "true",
		"KIP-890: a partition leader asks the transaction coordinator that a transactional batch's partition is in the producer's transaction before the batch opens a transaction there (else INVALID_TXN_STATE)"),
	broker("transactional.id.expiration.ms", Int, "ms", "604800000", 1, maxInt32,
		"a transactional id with no transaction open and no update for this long is expired: tombstoned in __transaction_state and forgotten (ms)"),
	broker("transaction.remove.expired.transaction.cleanup.interval.ms", Int, "ms", "3600000", 1, maxInt32,
		"how often the transaction coordinator expires idle transactional ids (ms)"),
	broker("producer.id.expiration.ms", Int, "ms", "86400000", 1, maxInt32,
		"a partition replica forgets a producer id with no transaction open whose last batch or marker is this old by its timestamp (KIP-854; its next batch is a new producer's) (ms)"),
	broker("producer.id.expiration.check.interval.ms", Int, "ms", "600000", 1, maxInt32,
		"how often each broker expires idle producer ids (ms)"),

	// isrbench's own broker switches (set at start: isrbench serve --set).
	flag("isrbench.zero.copy", "true", "sendfile fetch responses"),
	broker("isrbench.zero.copy.min.bytes", Long, "bytes", "32768", 0, maxInt32,
		"with zero copy, record slices smaller than this are copied (pread) instead of sent with sendfile; 0 = sendfile always"),
	flag("isrbench.fetch.sessions", "true", "replica fetchers use incremental fetch sessions (KIP-227)"),
	flag("isrbench.housekeeping.changed.only", "true",
		"the HW checkpoint and the ISR expiry visit only the partitions that changed since their previous pass (false: every partition at every pass)"),
	flag("isrbench.housekeeping.stagger", "false",
		"each broker's periodic HW checkpoint (with its fsync) and retention check run at a phase of their interval set by the broker id, not at the same instant on every broker of the process (false: in phase, as started)"),
	broker("isrbench.log.tail.bytes", Long, "bytes", "1048576", 0, maxInt32,
		"the newest bytes of each active segment kept in memory, from which fetch responses copy small record slices instead of reading them with pread; 0 = off"),
	broker("isrbench.log.drop.behind.bytes", Long, "bytes", "8388608", 0, maxInt32,
		"about how many of each active segment's newest bytes stay in the page cache: older ones are handed to the disk (sync_file_range) and dropped from the page cache as the log grows, a sealed segment after its roll flush; 0 = off (the kernel decides, as in Kafka)"),
	flag("isrbench.log.drop.behind.wait", "true",
		"a drop-behind step waits for its writeback, and the process's steps run one at a time on one goroutine, so replicas crossing a step together do not hand the disk one burst (false: a step only starts its writeback, on the background flushers)"),
	flag("isrbench.produce.wake.after.response", "false", "true: an acks=0/1 produce writes its response before its appends wake the followers' parked fetches, Kafka's order; false (default, no measured gain yet): the appends wake them first"),
	flag("isrbench.produce.answer.inline", "true", "an acks=all produce on a plaintext connection is answered by the goroutine that completes it (the HW advance past its batches), false: by its connection's goroutine, woken by it"),
	flag("isrbench.replica.fetch.uring", "false", "a replica fetcher on a plaintext connection sends each fetch and receives its response with one io_uring_enter (a SEND linked to a RECV), its thread sleeping in the kernel until the answer is there (false, the default: write(2), then read(2) after the runtime's poller saw the answer; where io_uring is unavailable the fetchers keep that way)"),
	flag("isrbench.socket.read.when.ready", "true", "plaintext connections wait for readability at once after a read that emptied the socket (false: a read finds it empty before every wait)"),
	broker("isrbench.request.read.timeout.ms", Long, "ms", "30000", 1, MaxMs,
		"close a connection whose request has not fully arrived this long after its first byte (ms; the default is Kafka clients' request.timeout.ms), -1 = never").orNever(),
	flag("isrbench.partition.metadata.async", "false", "true: a new replica's partition.metadata is written after its creation, for a whole batch of new replicas with one syncfs, as Kafka's flush-metadata-file task (false, the default: with the replica's directory, before it is hosted; a replica stopped or crashed before its file was written has no topic id, so a topic deleted and re-created meanwhile could not be told from it)"),
	flag("isrbench.leader.epoch.checkpoint.async", "false", "true: a new leader epoch's leader-epoch-checkpoint write (a leader's election, a follower's first batch of an epoch) is queued to one goroutine of the process instead of made by the election or the fetcher; a write a crash loses is restored from the log's batches when the replica is opened, as one a machine crash loses already is; truncations write the file before they return either way (false, the default: at once, as Kafka; no measured gain yet)"),
	flag("isrbench.close.syncfs", "true", "a broker's clean shutdown holds back the fsyncs of its replicas' files and checkpoints and makes them durable with two syncfs calls (false: fsyncs per replica, as Kafka)"),
	flag("isrbench.log.scrub.enable", "true", "a background scrub CRC-checks every replica's segments (once after the start, then every isrbench.log.scrub.interval.ms) and heals the damaged replicas it finds"),
	broker("isrbench.log.scrub.bytes.per.second", Long, "bytes/s", "10485760", 1, maxInt64, "bound of the bytes each broker's scrub reads per second"),
	broker("isrbench.log.scrub.interval.ms", Long, "ms", "3600000", 1, MaxMs, "time between two scrubs of every replica (ms)"),
	mode("isrbench.io", IOs, "log write path"),
	mode("isrbench.hw.update", HWUpdates, "HW advance"),
	mode("isrbench.truncate.mode", TruncateModes, "follower truncation (hw: ablation that can lose data)"),
	dur("isrbench.produce.delay", 0, time.Minute, "artificial delay per produce"),
	dur("isrbench.produce.spin", 0, 10*time.Millisecond,
		"artificial CPU work per produced record (a computation calibrated to take this long; the gate's CPU-regression test)"),
}

func init() {
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(entries); i++ {
		if entries[i].Name == entries[i-1].Name {
			panic("config: registry entry " + entries[i].Name + " given twice")
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.Type.Numeric() && e.Default != "" {
			if n, err := strconv.ParseInt(e.Default, 10, 64); err != nil || (!e.Fixed && e.CheckInt(n) != nil && e.AtLeast == "") {
				panic("config: registry entry " + e.Name + ": default " + e.Default + " outside " + e.Range())
			}
		}
	}
}
