package netfetch

import (
	"slices"
	"strconv"
	"time"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// brokerConfigDef is one broker config DescribeConfigs reports: its Kafka type and default
// and how to read its static value (what the cluster was started with) from a
// ClusterConfig. Whether it may change at run time is the controller's
// (controller.DynamicBrokerConfigNames: Kafka's dynamic update mode cluster-wide; every
// other one is read-only, as in Kafka).
type brokerConfigDef struct {
	name string
	typ  string // controller.Type*
	def  string // Kafka's default ("" for none: log.dirs)
	get  func(c *ClusterConfig, id int32, dir string) string
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

// brokerConfigDefs lists the broker configs isrbench has, sorted by name. The defaults are
// Kafka's; isrbench's own defaults are the same except default.replication.factor
// (min(3, brokers)).
var brokerConfigDefs = sortedDefs([]brokerConfigDef{
	{"auto.create.topics.enable", controller.TypeBoolean, "true", func(c *ClusterConfig, _ int32, _ string) string { return btoa(c.AutoCreateTopics) }},
	{"auto.leader.rebalance.enable", controller.TypeBoolean, "true", func(c *ClusterConfig, _ int32, _ string) string { return btoa(c.AutoLeaderRebalanceEnable) }},
	{"broker.id", controller.TypeInt, "-1", func(_ *ClusterConfig, id int32, _ string) string { return decimal(id) }},
	{"broker.session.timeout.ms", controller.TypeInt, "9000", func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(orDefault(c.Controller.BrokerSessionTimeoutMs, controller.DefaultBrokerSessionTimeoutMs))
	}},
	{"compression.type", controller.TypeString, "producer", constant("producer")},
	{"default.replication.factor", controller.TypeShort, "1", func(c *ClusterConfig, _ int32, _ string) string {
		if c.DefaultReplicationFactor > 0 {
			return decimal(c.DefaultReplicationFactor)
		}
		return decimal(min(3, max(1, c.Brokers)))
	}},
	{"group.initial.rebalance.delay.ms", controller.TypeInt, "3000", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Group.InitialRebalanceDelayMs) }},
	{"group.max.session.timeout.ms", controller.TypeInt, "1800000", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Group.MaxSessionTimeoutMs) }},
	{"group.max.size", controller.TypeInt, "2147483647", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Group.MaxSize) }},
	{"group.min.session.timeout.ms", controller.TypeInt, "6000", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Group.MinSessionTimeoutMs) }},
	{"isrbench.hw.update", controller.TypeString, "atomic", func(c *ClusterConfig, _ int32, _ string) string { return orString(c.Broker.HWUpdate, "atomic") }},
	{"isrbench.io", controller.TypeString, "pwritev", func(c *ClusterConfig, _ int32, _ string) string { return writerName(c.Broker.Log.Writer) }},
	{"isrbench.truncate.mode", controller.TypeString, "epoch", func(c *ClusterConfig, _ int32, _ string) string { return orString(c.Broker.TruncateMode, "epoch") }},
	{"isrbench.zero.copy", controller.TypeBoolean, "true", func(c *ClusterConfig, _ int32, _ string) string { return btoa(c.ZeroCopy) }},
	{"isrbench.zero.copy.min.bytes", controller.TypeLong, decimal(DefaultZeroCopyMinBytes), func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.ZeroCopyMinBytes) }},
	{"isrbench.fetch.sessions", controller.TypeBoolean, "true", func(c *ClusterConfig, _ int32, _ string) string { return btoa(c.FetchSessions) }},
	{"max.incremental.fetch.session.cache.slots", controller.TypeInt, "1000", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.FetchSessionCacheSlots) }},
	{"max.connections", controller.TypeInt, decimal(DefaultMaxConnections), func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(c.Limits.withDefaults().MaxConnections)
	}},
	{"max.connections.per.ip", controller.TypeInt, decimal(DefaultMaxConnectionsPerIP), func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(c.Limits.withDefaults().MaxConnectionsPerIP)
	}},
	{"connections.max.idle.ms", controller.TypeLong, "600000", func(c *ClusterConfig, _ int32, _ string) string {
		return msOrNever(c.Limits.withDefaults().ConnectionsMaxIdle)
	}},
	{"isrbench.request.read.timeout.ms", controller.TypeLong, "30000", func(c *ClusterConfig, _ int32, _ string) string {
		return msOrNever(c.Limits.withDefaults().RequestReadTimeout)
	}},
	{"queued.max.request.bytes", controller.TypeLong, "-1", func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(c.Limits.withDefaults().QueuedMaxRequestBytes)
	}},
	{"leader.imbalance.check.interval.seconds", controller.TypeLong, "300", func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(orDefault(c.LeaderImbalanceCheckIntervalSeconds, DefaultLeaderImbalanceCheckIntervalSeconds))
	}},
	{"leader.imbalance.per.broker.percentage", controller.TypeInt, "10", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.LeaderImbalancePerBrokerPercentage) }},
	{"log.cleanup.policy", controller.TypeList, "delete", constant("delete")},
	{"log.dirs", controller.TypeString, "", func(_ *ClusterConfig, _ int32, dir string) string { return dir }},
	{"log.flush.interval.messages", controller.TypeLong, "9223372036854775807", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.Log.FlushMessages) }},
	{"log.flush.interval.ms", controller.TypeLong, "9223372036854775807", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.Log.FlushMs) }},
	{"log.index.interval.bytes", controller.TypeInt, "4096", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.Log.IndexIntervalBytes) }},
	{"log.index.size.max.bytes", controller.TypeInt, "10485760", constant("10485760")},
	{"log.message.timestamp.type", controller.TypeString, "CreateTime", constant("CreateTime")},
	{"log.preallocate", controller.TypeBoolean, "false", constant("false")},
	{"log.retention.bytes", controller.TypeLong, "-1", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.Log.RetentionBytes) }},
	{"log.retention.check.interval.ms", controller.TypeLong, "300000", func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(orDefault(c.Broker.LogRetentionCheckIntervalMs, 300000))
	}},
	{"log.retention.ms", controller.TypeLong, "604800000", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.Log.RetentionMs) }},
	{"log.roll.ms", controller.TypeLong, "604800000", constant("604800000")},
	{"log.segment.bytes", controller.TypeInt, "1073741824", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.Log.SegmentBytes) }},
	{"log.segment.delete.delay.ms", controller.TypeLong, "60000", constant("60000")},
	{"message.max.bytes", controller.TypeInt, "1048588", func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(orDefault(c.MessageMaxBytes, DefaultMessageMaxBytes))
	}},
	{"min.insync.replicas", controller.TypeInt, "1", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.MinInsyncReplicas) }},
	{"num.partitions", controller.TypeInt, "1", func(c *ClusterConfig, _ int32, _ string) string { return decimal(orDefault(c.NumPartitions, 1)) }},
	{"num.replica.fetchers", controller.TypeInt, "1", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.NumReplicaFetchers) }},
	{"offset.metadata.max.bytes", controller.TypeInt, "4096", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Group.OffsetMetadataMaxBytes) }},
	{"offsets.commit.timeout.ms", controller.TypeInt, "5000", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Group.OffsetsCommitTimeoutMs) }},
	{"offsets.topic.num.partitions", controller.TypeInt, "50", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Group.OffsetsTopicNumPartitions) }},
	{"offsets.topic.replication.factor", controller.TypeShort, "3", func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(c.Group.OffsetsTopicReplicationFactor)
	}},
	{"offsets.topic.segment.bytes", controller.TypeInt, "104857600", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Group.OffsetsTopicSegmentBytes) }},
	{"replica.fetch.backoff.ms", controller.TypeInt, "1000", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.ReplicaFetchBackoffMs) }},
	{"replica.fetch.max.bytes", controller.TypeInt, "1048576", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.ReplicaFetchMaxBytes) }},
	{"replica.fetch.min.bytes", controller.TypeInt, "1", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.ReplicaFetchMinBytes) }},
	{"replica.fetch.response.max.bytes", controller.TypeInt, "10485760", func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(c.Broker.ReplicaFetchResponseMaxBytes)
	}},
	{"replica.fetch.wait.max.ms", controller.TypeInt, "500", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.ReplicaFetchWaitMaxMs) }},
	{"replica.high.watermark.checkpoint.interval.ms", controller.TypeLong, "5000", func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(orDefault(c.Broker.ReplicaHighWatermarkCheckpointIntervalMs, 5000))
	}},
	{"replica.lag.time.max.ms", controller.TypeLong, "30000", func(c *ClusterConfig, _ int32, _ string) string { return decimal(c.Broker.ReplicaLagTimeMaxMs) }},
	{"socket.request.max.bytes", controller.TypeInt, "104857600", func(c *ClusterConfig, _ int32, _ string) string {
		return decimal(orDefault(c.SocketRequestMaxBytes, DefaultSocketRequestMaxBytes))
	}},
	{"unclean.leader.election.enable", controller.TypeBoolean, "false", func(c *ClusterConfig, _ int32, _ string) string {
		return btoa(c.Controller.UncleanLeaderElectionEnable)
	}},
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

func constant(v string) func(*ClusterConfig, int32, string) string {
	return func(*ClusterConfig, int32, string) string { return v }
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
		return "pwritev"
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
// explicitly (ClusterConfig.Set) or differing from Kafka's default.
func (c *ClusterConfig) staticBrokerConfigs(id int32, dir string) map[string]string {
	out := map[string]string{}
	for _, d := range brokerConfigDefs {
		v := d.get(c, id, dir)
		if c.explicit[d.name] || v != d.def {
			out[d.name] = v
		}
	}
	return out
}
