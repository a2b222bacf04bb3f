package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/netfetch"
)

// A binding ties a registry setting (core/config) to the typed field of Config that hands it
// to a broker, the controller, a coordinator or a wire server. Config.Settings is the value
// of every setting; the bindings are the one place where the typed fields are derived from
// it (Set, UseSettings) and where a Config built in Go is read back into it (Start).
type binding struct {
	name string
	// field returns a pointer to c's field: *int, *int16, *int32, *int64, *bool, *string,
	// *time.Duration (a Duration setting, or a setting in ms with -1 for never) or
	// *log.Writer.
	field func(c *Config) any
	// zero is the value a zero (or negative) field stands for, set in Go: the registry's
	// default where the field documents "0 = the default"; nil where zero is a value.
	zero func(c *Config) string
	// own: isrbench's default is not the registry's (Kafka's); a setting not given leaves
	// the field 0, which stands for isrbench's (zero). Only for *int16 and *int64 fields.
	own bool
}

// bind is a binding whose zero field is a value.
func bind(name string, field func(c *Config) any) binding {
	config.Get(name) // a name of the registry (panics at init otherwise)
	return binding{name: name, field: field}
}

// bindZero is a binding whose zero field stands for the registry's default.
func bindZero(name string, field func(c *Config) any) binding {
	b := bind(name, field)
	def := config.Get(name).Default
	b.zero = func(*Config) string { return def }
	return b
}

// defaultQueuedMaxRequestBytes is isrbench's default of queued.max.request.bytes (Kafka's
// is -1, unbounded).
var defaultQueuedMaxRequestBytes = netfetch.DefaultConnLimits().QueuedMaxRequestBytes

// bindings lists the settings that have a typed field, sorted by name; any other setting is
// read from Config.Settings by the code that uses it.
var bindings = sortedBindings([]binding{
	bind("auto.create.topics.enable", func(c *Config) any { return &c.AutoCreateTopics }),
	bind("auto.leader.rebalance.enable", func(c *Config) any { return &c.AutoLeaderRebalanceEnable }),
	bindZero("broker.session.timeout.ms", func(c *Config) any { return &c.Controller.BrokerSessionTimeoutMs }),
	// default.replication.factor: 0 = isrbench's own default, min(3, brokers).
	{name: "default.replication.factor", field: func(c *Config) any { return &c.DefaultReplicationFactor },
		zero: func(c *Config) string { return strconv.Itoa(min(3, max(1, c.Brokers))) }, own: true},
	bind("group.initial.rebalance.delay.ms", func(c *Config) any { return &c.Group.InitialRebalanceDelayMs }),
	bind("group.max.session.timeout.ms", func(c *Config) any { return &c.Group.MaxSessionTimeoutMs }),
	bind("group.max.size", func(c *Config) any { return &c.Group.MaxSize }),
	bind("group.min.session.timeout.ms", func(c *Config) any { return &c.Group.MinSessionTimeoutMs }),
	bind("isrbench.close.syncfs", func(c *Config) any { return &c.Broker.CloseSyncFS }),
	bind("isrbench.fetch.sessions", func(c *Config) any { return &c.FetchSessions }),
	bind("isrbench.housekeeping.changed.only", func(c *Config) any { return &c.Broker.HousekeepingChangedOnly }),
	bind("isrbench.housekeeping.stagger", func(c *Config) any { return &c.Broker.HousekeepingStagger }),
	bind("isrbench.hw.update", func(c *Config) any { return &c.Broker.HWUpdate }),
	bind("isrbench.io", func(c *Config) any { return &c.Broker.Log.Writer }),
	bindZero("isrbench.log.scrub.bytes.per.second", func(c *Config) any { return &c.Broker.ScrubBytesPerSecond }),
	bindZero("isrbench.log.scrub.interval.ms", func(c *Config) any { return &c.Broker.ScrubIntervalMs }),
	bind("isrbench.log.scrub.enable", func(c *Config) any { return &c.Broker.ScrubEnable }),
	bind("isrbench.log.drop.behind.bytes", func(c *Config) any { return &c.Broker.Log.DropBehindBytes }),
	bind("isrbench.log.drop.behind.wait", func(c *Config) any { return &c.Broker.Log.DropBehindWait }),
	bind("isrbench.log.tail.bytes", func(c *Config) any { return &c.Broker.Log.TailBytes }),
	bind("isrbench.partition.metadata.async", func(c *Config) any { return &c.Broker.PartitionMetadataAsync }),
	bind("isrbench.leader.epoch.checkpoint.async", func(c *Config) any { return &c.Broker.EpochCheckpointAsync }),
	bind("isrbench.produce.answer.inline", func(c *Config) any { return &c.AnswerInline }),
	bind("isrbench.produce.wake.after.response", func(c *Config) any { return &c.WakeAfterResponse }),
	bind("isrbench.produce.delay", func(c *Config) any { return &c.Broker.ProduceDelay }),
	bind("isrbench.produce.spin", func(c *Config) any { return &c.Broker.ProduceSpin }),
	bindZero("isrbench.request.read.timeout.ms", func(c *Config) any { return &c.Limits.RequestReadTimeout }),
	bind("isrbench.socket.read.when.ready", func(c *Config) any { return &c.ReadWhenReady }),
	bind("isrbench.replica.fetch.uring", func(c *Config) any { return &c.ReplicaFetchUring }),
	bind("isrbench.truncate.mode", func(c *Config) any { return &c.Broker.TruncateMode }),
	bind("isrbench.zero.copy", func(c *Config) any { return &c.ZeroCopy }),
	bind("isrbench.zero.copy.min.bytes", func(c *Config) any { return &c.ZeroCopyMinBytes }),
	bindZero("connections.max.idle.ms", func(c *Config) any { return &c.Limits.ConnectionsMaxIdle }),
	bindZero("follower.replication.throttled.rate", func(c *Config) any { return &c.Broker.FollowerReplicationThrottledRate }),
	bindZero("leader.imbalance.check.interval.seconds", func(c *Config) any { return &c.LeaderImbalanceCheckIntervalSeconds }),
	bind("leader.imbalance.per.broker.percentage", func(c *Config) any { return &c.LeaderImbalancePerBrokerPercentage }),
	bindZero("leader.replication.throttled.rate", func(c *Config) any { return &c.Broker.LeaderReplicationThrottledRate }),
	bind("log.flush.interval.messages", func(c *Config) any { return &c.Broker.Log.FlushMessages }),
	bind("log.flush.interval.ms", func(c *Config) any { return &c.Broker.Log.FlushMs }),
	bind("log.index.interval.bytes", func(c *Config) any { return &c.Broker.Log.IndexIntervalBytes }),
	bind("log.retention.bytes", func(c *Config) any { return &c.Broker.Log.RetentionBytes }),
	bindZero("log.retention.check.interval.ms", func(c *Config) any { return &c.Broker.LogRetentionCheckIntervalMs }),
	bind("log.retention.ms", func(c *Config) any { return &c.Broker.Log.RetentionMs }),
	bind("log.segment.bytes", func(c *Config) any { return &c.Broker.Log.SegmentBytes }),
	bindZero("max.connections", func(c *Config) any { return &c.Limits.MaxConnections }),
	bindZero("max.connections.per.ip", func(c *Config) any { return &c.Limits.MaxConnectionsPerIP }),
	bind("max.incremental.fetch.session.cache.slots", func(c *Config) any { return &c.FetchSessionCacheSlots }),
	bind("min.insync.replicas", func(c *Config) any { return &c.Broker.MinInsyncReplicas }),
	bindZero("num.partitions", func(c *Config) any { return &c.NumPartitions }),
	bind("num.replica.fetchers", func(c *Config) any { return &c.Broker.NumReplicaFetchers }),
	bind("offset.metadata.max.bytes", func(c *Config) any { return &c.Group.OffsetMetadataMaxBytes }),
	bind("offsets.commit.timeout.ms", func(c *Config) any { return &c.Group.OffsetsCommitTimeoutMs }),
	bind("offsets.retention.check.interval.ms", func(c *Config) any { return &c.Group.OffsetsRetentionCheckIntervalMs }),
	bind("offsets.retention.minutes", func(c *Config) any { return &c.Group.OffsetsRetentionMinutes }),
	bind("offsets.topic.num.partitions", func(c *Config) any { return &c.Group.OffsetsTopicNumPartitions }),
	bind("offsets.topic.replication.factor", func(c *Config) any { return &c.Group.OffsetsTopicReplicationFactor }),
	bind("offsets.topic.segment.bytes", func(c *Config) any { return &c.Group.OffsetsTopicSegmentBytes }),
	// queued.max.request.bytes: 0 = isrbench's default (netfetch.DefaultConnLimits).
	{name: "queued.max.request.bytes", field: func(c *Config) any { return &c.Limits.QueuedMaxRequestBytes },
		zero: func(*Config) string { return strconv.FormatInt(defaultQueuedMaxRequestBytes, 10) }, own: true},
	bind("replica.fetch.backoff.ms", func(c *Config) any { return &c.Broker.ReplicaFetchBackoffMs }),
	bind("replica.fetch.max.bytes", func(c *Config) any { return &c.Broker.ReplicaFetchMaxBytes }),
	bind("replica.fetch.min.bytes", func(c *Config) any { return &c.Broker.ReplicaFetchMinBytes }),
	bind("replica.fetch.response.max.bytes", func(c *Config) any { return &c.Broker.ReplicaFetchResponseMaxBytes }),
	bind("replica.fetch.wait.max.ms", func(c *Config) any { return &c.Broker.ReplicaFetchWaitMaxMs }),
	bindZero("replica.high.watermark.checkpoint.interval.ms", func(c *Config) any { return &c.Broker.ReplicaHighWatermarkCheckpointIntervalMs }),
	bind("replica.lag.time.max.ms", func(c *Config) any { return &c.Broker.ReplicaLagTimeMaxMs }),
	bindZero("socket.request.max.bytes", func(c *Config) any { return &c.SocketRequestMaxBytes }),
	bindZero("transaction.abort.timed.out.transaction.cleanup.interval.ms", func(c *Config) any { return &c.Txn.AbortCheckIntervalMs }),
	bindZero("transaction.max.timeout.ms", func(c *Config) any { return &c.Txn.MaxTimeoutMs }),
	bindZero("transaction.state.log.min.isr", func(c *Config) any { return &c.Txn.MinISR }),
	bindZero("transaction.state.log.num.partitions", func(c *Config) any { return &c.Txn.NumPartitions }),
	bindZero("transaction.state.log.replication.factor", func(c *Config) any { return &c.Txn.ReplicationFactor }),
	bindZero("transaction.state.log.segment.bytes", func(c *Config) any { return &c.Txn.SegmentBytes }),
	bind("unclean.leader.election.enable", func(c *Config) any { return &c.Controller.UncleanLeaderElectionEnable }),
})

func sortedBindings(bs []binding) []binding {
	slices.SortFunc(bs, func(a, b binding) int { return strings.Compare(a.name, b.name) })
	return bs
}

// lookupBinding returns the binding of setting name.
func lookupBinding(name string) (binding, bool) {
	i, ok := slices.BinarySearchFunc(bindings, name, func(b binding, n string) int { return strings.Compare(b.name, n) })
	if !ok {
		return binding{}, false
	}
	return bindings[i], true
}

// load sets b's field of c from c.Settings.
func (b binding) load(c *Config) error {
	s, name := c.Settings, b.name
	own := b.own && !s.IsSet(name) // 0 stands for isrbench's default
	switch p := b.field(c).(type) {
	case *int16:
		*p = int16(s.Int(name))
		if own {
			*p = 0
		}
	case *int64:
		*p = s.Int(name)
		if own {
			*p = 0
		}
	case *int:
		*p = int(s.Int(name))
	case *int32:
		*p = int32(s.Int(name))
	case *bool:
		*p = s.Bool(name)
	case *string:
		*p = s.Text(name)
	case *time.Duration:
		if config.Get(name).Type == config.Duration {
			*p = s.Duration(name)
		} else {
			*p = s.Ms(name)
		}
	case *log.Writer:
		w, err := log.NewWriter(s.Text(name))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		*p = w
	default:
		panic(fmt.Sprintf("BUG: cluster: binding %s: field of type %T", name, p))
	}
	return nil
}

// text is b's field of c in the text form of its setting.
func (b binding) text(c *Config) string {
	var n int64
	switch p := b.field(c).(type) {
	case *int:
		n = int64(*p)
	case *int16:
		n = int64(*p)
	case *int32:
		n = int64(*p)
	case *int64:
		n = *p
	case *bool:
		return strconv.FormatBool(*p)
	case *string:
		if *p == "" {
			return config.Get(b.name).Default
		}
		return *p
	case *time.Duration:
		if config.Get(b.name).Type == config.Duration {
			return p.String()
		}
		switch {
		case *p == 0 && b.zero != nil:
			return b.zero(c)
		case *p < 0:
			return "-1" // never
		}
		return strconv.FormatInt(p.Milliseconds(), 10)
	case *log.Writer:
		if *p == nil {
			return config.IOPwritev.String()
		}
		return (*p).Name()
	}
	if n <= 0 && b.zero != nil && !(n == -1 && config.Get(b.name).Never) {
		return b.zero(c)
	}
	return strconv.FormatInt(n, 10)
}

// UseSettings makes s the cluster's settings: c.Settings = s, and every typed field that
// carries a setting is derived from it. The harness hands a spec's settings to the cluster
// this way, unchanged.
func (c *Config) UseSettings(s config.Settings) error {
	next := *c
	next.Settings = s
	for _, b := range bindings {
		if err := b.load(&next); err != nil {
			return err
		}
	}
	*c = next
	return nil
}

// readFields brings into c.Settings the typed fields changed in Go since the last Set or
// UseSettings (a Config built in Go), each checked against its registry entry: the error
// names the key and the allowed values. Start calls it, so that every broker, the wire
// servers' DescribeConfigs and the controller read one Settings that agrees with the
// fields.
func (c *Config) readFields() error {
	for _, b := range bindings {
		v := b.text(c)
		if v == c.Settings.Text(b.name) {
			continue
		}
		if err := c.Settings.Set(b.name, v); err != nil {
			return err
		}
	}
	return nil
}

// staticBrokerConfigs is broker id's STATIC_BROKER_CONFIG values, read from c.Settings: the
// broker configs set explicitly (Set, UseSettings) or differing from Kafka's default, and
// broker.id and log.dirs, which are per broker.
func (c *Config) staticBrokerConfigs(id int32, dir string) map[string]string {
	out := map[string]string{"broker.id": strconv.FormatInt(int64(id), 10)}
	if dir != "" {
		out["log.dirs"] = dir
	}
	for _, e := range config.Entries() {
		if e.Name == "broker.id" || e.Name == "log.dirs" {
			continue
		}
		if v := c.Settings.Text(e.Name); c.Settings.IsSet(e.Name) || v != e.Default {
			out[e.Name] = v
		}
	}
	return out
}
