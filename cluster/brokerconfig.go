package cluster

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/netfetch"
)

// brokerConfigDef is one broker config DescribeConfigs reports (netfetch): its Kafka type
// and default, and how to read its static value (what the cluster was started with) from a
// Config, which a broker's wire server gets as netfetch.ServerConfig.BrokerConfigs. Whether
// it may change at run time is the controller's (controller.DynamicBrokerConfigNames: Kafka's
// dynamic update mode cluster-wide; every other one is read-only, as in Kafka).
type brokerConfigDef struct {
	name string
	typ  string // controller.Type*
	def  string // Kafka's default ("" for none: log.dirs)
	get  func(c *Config, id int32, dir string) string
}

func decimal[T ~int | ~int16 | ~int32 | ~int64](v T) string { return strconv.FormatInt(int64(v), 10) }

func btoa(v bool) string { return strconv.FormatBool(v) }

// msOrNever is a duration in ms, -1 for never (a negative duration).
func msOrNever(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return decimal(d.Milliseconds())
}

// described is the DescribeConfigs definition of registry entry name (its type and
// default are the registry's, core/config) read from a Config with get.
func described(name string, get func(c *Config, id int32, dir string) string) brokerConfigDef {
	e := config.Get(name)
	return brokerConfigDef{name: name, typ: string(e.Type), def: e.Default, get: get}
}

// fixedDef is the definition of a registry entry isrbench implements at its default only.
func fixedDef(name string) brokerConfigDef {
	return described(name, constant(config.Get(name).Default))
}

// brokerConfigDefs lists the broker configs that have a typed field, sorted by name (every
// other one is read from Config.Settings). The defaults are Kafka's; isrbench's own defaults are the
// same except default.replication.factor (min(3, brokers)).
var brokerConfigDefs = sortedDefs([]brokerConfigDef{
	described("auto.create.topics.enable", func(c *Config, _ int32, _ string) string { return btoa(c.AutoCreateTopics) }),
	described("auto.leader.rebalance.enable", func(c *Config, _ int32, _ string) string { return btoa(c.AutoLeaderRebalanceEnable) }),
	described("broker.id", func(_ *Config, id int32, _ string) string { return decimal(id) }),
	described("broker.session.timeout.ms", func(c *Config, _ int32, _ string) string {
		return decimal(orDefault(c.Controller.BrokerSessionTimeoutMs, controller.DefaultBrokerSessionTimeoutMs))
	}),
	fixedDef("compression.type"),
	described("default.replication.factor", func(c *Config, _ int32, _ string) string {
		if c.DefaultReplicationFactor > 0 {
			return decimal(c.DefaultReplicationFactor)
		}
		return decimal(min(3, max(1, c.Brokers)))
	}),
	described("group.initial.rebalance.delay.ms", func(c *Config, _ int32, _ string) string { return decimal(c.Group.InitialRebalanceDelayMs) }),
	described("group.max.session.timeout.ms", func(c *Config, _ int32, _ string) string { return decimal(c.Group.MaxSessionTimeoutMs) }),
	described("group.max.size", func(c *Config, _ int32, _ string) string { return decimal(c.Group.MaxSize) }),
	described("group.min.session.timeout.ms", func(c *Config, _ int32, _ string) string { return decimal(c.Group.MinSessionTimeoutMs) }),
	described("isrbench.hw.update", func(c *Config, _ int32, _ string) string {
		return orString(c.Broker.HWUpdate, config.HWUpdateAtomic.String())
	}),
	described("isrbench.io", func(c *Config, _ int32, _ string) string { return writerName(c.Broker.Log.Writer) }),
	described("isrbench.truncate.mode", func(c *Config, _ int32, _ string) string {
		return orString(c.Broker.TruncateMode, config.TruncateEpoch.String())
	}),
	described("isrbench.produce.delay", func(c *Config, _ int32, _ string) string { return c.Broker.ProduceDelay.String() }),
	described("isrbench.produce.spin", func(c *Config, _ int32, _ string) string { return c.Broker.ProduceSpin.String() }),
	described("isrbench.zero.copy", func(c *Config, _ int32, _ string) string { return btoa(c.ZeroCopy) }),
	described("isrbench.zero.copy.min.bytes", func(c *Config, _ int32, _ string) string { return decimal(c.ZeroCopyMinBytes) }),
	described("isrbench.fetch.sessions", func(c *Config, _ int32, _ string) string { return btoa(c.FetchSessions) }),
	described("isrbench.socket.read.when.ready", func(c *Config, _ int32, _ string) string { return btoa(c.ReadWhenReady) }),
	described("isrbench.log.scrub.enable", func(c *Config, _ int32, _ string) string { return btoa(c.Broker.ScrubEnable) }),
	described("isrbench.log.scrub.bytes.per.second", func(c *Config, _ int32, _ string) string {
		return decimal(orDefault(c.Broker.ScrubBytesPerSecond, config.DefaultOf("isrbench.log.scrub.bytes.per.second")))
	}),
	described("isrbench.log.scrub.interval.ms", func(c *Config, _ int32, _ string) string {
		return decimal(orDefault(c.Broker.ScrubIntervalMs, config.DefaultOf("isrbench.log.scrub.interval.ms")))
	}),
	described("max.incremental.fetch.session.cache.slots", func(c *Config, _ int32, _ string) string { return decimal(c.FetchSessionCacheSlots) }),
	described("max.connections", func(c *Config, _ int32, _ string) string {
		return decimal(c.Limits.WithDefaults().MaxConnections)
	}),
	described("max.connections.per.ip", func(c *Config, _ int32, _ string) string {
		return decimal(c.Limits.WithDefaults().MaxConnectionsPerIP)
	}),
	described("connections.max.idle.ms", func(c *Config, _ int32, _ string) string {
		return msOrNever(c.Limits.WithDefaults().ConnectionsMaxIdle)
	}),
	described("isrbench.request.read.timeout.ms", func(c *Config, _ int32, _ string) string {
		return msOrNever(c.Limits.WithDefaults().RequestReadTimeout)
	}),
	described("queued.max.request.bytes", func(c *Config, _ int32, _ string) string {
		return decimal(c.Limits.WithDefaults().QueuedMaxRequestBytes)
	}),
	described("leader.imbalance.check.interval.seconds", func(c *Config, _ int32, _ string) string {
		return decimal(orDefault(c.LeaderImbalanceCheckIntervalSeconds, DefaultLeaderImbalanceCheckIntervalSeconds))
	}),
	described("leader.imbalance.per.broker.percentage", func(c *Config, _ int32, _ string) string { return decimal(c.LeaderImbalancePerBrokerPercentage) }),
	described("leader.replication.throttled.rate", func(c *Config, _ int32, _ string) string {
		return decimal(orDefault(c.Broker.LeaderReplicationThrottledRate, math.MaxInt64))
	}),
	described("follower.replication.throttled.rate", func(c *Config, _ int32, _ string) string {
		return decimal(orDefault(c.Broker.FollowerReplicationThrottledRate, math.MaxInt64))
	}),
	fixedDef("replication.quota.window.num"),
	fixedDef("replication.quota.window.size.seconds"),
	fixedDef("log.cleanup.policy"),
	described("log.dirs", func(_ *Config, _ int32, dir string) string { return dir }),
	described("log.flush.interval.messages", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.Log.FlushMessages) }),
	described("log.flush.interval.ms", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.Log.FlushMs) }),
	described("log.index.interval.bytes", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.Log.IndexIntervalBytes) }),
	fixedDef("log.index.size.max.bytes"),
	fixedDef("log.message.timestamp.type"),
	fixedDef("log.preallocate"),
	described("log.retention.bytes", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.Log.RetentionBytes) }),
	described("log.retention.check.interval.ms", func(c *Config, _ int32, _ string) string {
		return decimal(orDefault(c.Broker.LogRetentionCheckIntervalMs, 300000))
	}),
	described("log.retention.ms", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.Log.RetentionMs) }),
	fixedDef("log.roll.ms"),
	described("log.segment.bytes", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.Log.SegmentBytes) }),
	described("isrbench.log.tail.bytes", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.Log.TailBytes) }),
	fixedDef("log.segment.delete.delay.ms"),
	described("min.insync.replicas", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.MinInsyncReplicas) }),
	described("num.partitions", func(c *Config, _ int32, _ string) string { return decimal(orDefault(c.NumPartitions, 1)) }),
	described("num.replica.fetchers", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.NumReplicaFetchers) }),
	described("offset.metadata.max.bytes", func(c *Config, _ int32, _ string) string { return decimal(c.Group.OffsetMetadataMaxBytes) }),
	described("offsets.commit.timeout.ms", func(c *Config, _ int32, _ string) string { return decimal(c.Group.OffsetsCommitTimeoutMs) }),
	described("offsets.retention.check.interval.ms", func(c *Config, _ int32, _ string) string {
		return decimal(c.Group.OffsetsRetentionCheckIntervalMs)
	}),
	described("offsets.retention.minutes", func(c *Config, _ int32, _ string) string { return decimal(c.Group.OffsetsRetentionMinutes) }),
	described("offsets.topic.num.partitions", func(c *Config, _ int32, _ string) string { return decimal(c.Group.OffsetsTopicNumPartitions) }),
	described("offsets.topic.replication.factor", func(c *Config, _ int32, _ string) string {
		return decimal(c.Group.OffsetsTopicReplicationFactor)
	}),
	described("offsets.topic.segment.bytes", func(c *Config, _ int32, _ string) string { return decimal(c.Group.OffsetsTopicSegmentBytes) }),
	described("transaction.state.log.num.partitions", func(c *Config, _ int32, _ string) string { return decimal(c.Txn.WithDefaults().NumPartitions) }),
	described("transaction.state.log.replication.factor", func(c *Config, _ int32, _ string) string {
		return decimal(c.Txn.WithDefaults().ReplicationFactor)
	}),
	described("transaction.state.log.min.isr", func(c *Config, _ int32, _ string) string { return decimal(c.Txn.WithDefaults().MinISR) }),
	described("transaction.state.log.segment.bytes", func(c *Config, _ int32, _ string) string { return decimal(c.Txn.WithDefaults().SegmentBytes) }),
	described("transaction.max.timeout.ms", func(c *Config, _ int32, _ string) string { return decimal(c.Txn.WithDefaults().MaxTimeoutMs) }),
	described("transaction.abort.timed.out.transaction.cleanup.interval.ms", func(c *Config, _ int32, _ string) string {
		return decimal(c.Txn.WithDefaults().AbortCheckIntervalMs)
	}),
	described("replica.fetch.backoff.ms", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.ReplicaFetchBackoffMs) }),
	described("replica.fetch.max.bytes", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.ReplicaFetchMaxBytes) }),
	described("replica.fetch.min.bytes", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.ReplicaFetchMinBytes) }),
	described("replica.fetch.response.max.bytes", func(c *Config, _ int32, _ string) string {
		return decimal(c.Broker.ReplicaFetchResponseMaxBytes)
	}),
	described("replica.fetch.wait.max.ms", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.ReplicaFetchWaitMaxMs) }),
	described("replica.high.watermark.checkpoint.interval.ms", func(c *Config, _ int32, _ string) string {
		return decimal(orDefault(c.Broker.ReplicaHighWatermarkCheckpointIntervalMs, 5000))
	}),
	described("replica.lag.time.max.ms", func(c *Config, _ int32, _ string) string { return decimal(c.Broker.ReplicaLagTimeMaxMs) }),
	described("socket.request.max.bytes", func(c *Config, _ int32, _ string) string {
		return decimal(orDefault(c.SocketRequestMaxBytes, netfetch.DefaultSocketRequestMaxBytes))
	}),
	described("unclean.leader.election.enable", func(c *Config, _ int32, _ string) string {
		return btoa(c.Controller.UncleanLeaderElectionEnable)
	}),
})

func sortedDefs(defs []brokerConfigDef) []brokerConfigDef {
	slices.SortFunc(defs, func(a, b brokerConfigDef) int {
		if a.name < b.name {
			return -1
		}
		if a.name > b.name {
			return 1
		}
		return 0
	})
	return defs
}

func constant(v string) func(*Config, int32, string) string {
	return func(*Config, int32, string) string { return v }
}

func orDefault[T ~int | ~int32 | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func orString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func writerName(w log.Writer) string {
	if w == nil {
		return config.IOPwritev.String()
	}
	return w.Name()
}

// lookupBrokerConfig returns the definition of a broker config name.
func lookupBrokerConfig(name string) (brokerConfigDef, bool) {
	i, ok := slices.BinarySearchFunc(brokerConfigDefs, name, func(d brokerConfigDef, n string) int {
		switch {
		case d.name < n:
			return -1
		case d.name > n:
			return 1
		}
		return 0
	})
	if !ok {
		return brokerConfigDef{}, false
	}
	return brokerConfigDefs[i], true
}

// staticBrokerConfigs is broker id's STATIC_BROKER_CONFIG values: the broker configs set
// explicitly (Config.Set) or differing from Kafka's default. A setting with a typed field
// reads it (brokerConfigDefs), any other its value in Config.Settings.
func (c *Config) staticBrokerConfigs(id int32, dir string) map[string]string {
	out := map[string]string{}
	for _, e := range config.Entries() {
		v := c.Settings.Text(e.Name)
		if d, ok := lookupBrokerConfig(e.Name); ok {
			v = d.get(c, id, dir)
		}
		if c.Settings.IsSet(e.Name) || v != e.Default {
			out[e.Name] = v
		}
	}
	return out
}
