package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/log"
)

// SettableKeys lists the keys Set accepts (Kafka config names and isrbench.* switches): every
// registry entry that is not Fixed, and flush.messages / flush.ms, the topic-level names of
// log.flush.interval.messages / .ms.
func SettableKeys() []string {
	keys := []string{"flush.messages", "flush.ms"}
	for _, e := range config.Entries() {
		if !e.Fixed {
			keys = append(keys, e.Name)
		}
	}
	slices.Sort(keys)
	return keys
}

// SettingsHelp documents the keys Set accepts, one line each, from the config registry
// (core/config): name, type and unit, Kafka's default, the allowed values, whether Kafka
// changes it at run time, and what it does.
func SettingsHelp() string {
	var b strings.Builder
	for _, k := range SettableKeys() {
		e := config.Get(brokerConfigName(k))
		typ := string(e.Type)
		if e.Unit != "" {
			typ += " " + e.Unit
		}
		doc := e.Doc
		if k != e.Name {
			doc = "topic-level name of " + e.Name
		}
		fmt.Fprintf(&b, "  %-46s %s, default %s, allowed %s, %s: %s\n", k, typ, e.Default, e.Range(), e.Update, doc)
	}
	b.WriteString(securityHelp())
	return b.String()
}

type setter func(c *Config, v string) error

// storeInt stores an integer setting by its registry name without the range check: what
// Start's check (checkRanges) sees of a Config built in Go.
var storeInt = map[string]func(c *Config, n int64){}

// intSetter takes an integer in the registry's range of entry name.
func intSetter(name string, set func(c *Config, n int64)) setter {
	e := config.Get(name)
	storeInt[name] = set
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		if n < e.Min || n > e.Max {
			return fmt.Errorf("%d is outside [%d, %d]", n, e.Min, e.Max)
		}
		set(c, n)
		return nil
	}
}

func boolSetter(set func(c *Config, b bool)) setter {
	return func(c *Config, v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			set(c, true)
		case "false":
			set(c, false)
		default:
			return fmt.Errorf("%q is not true or false", v)
		}
		return nil
	}
}

// modeSetter takes one of the registry's modes of entry name.
func modeSetter(name string, set func(c *Config, v string) error) setter {
	allowed := config.Get(name).Modes
	return func(c *Config, v string) error {
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("%q is not one of %s", v, strings.Join(allowed, ", "))
		}
		return set(c, v)
	}
}

// durSetter takes a Go duration ("30ms") in the registry's range of entry name.
func durSetter(name string, set func(c *Config, d time.Duration)) setter {
	e := config.Get(name)
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		switch {
		case err != nil:
			return fmt.Errorf("not a duration: %q; allowed e.g. 30ms (%s)", v, e.Range())
		case int64(d) < e.Min || int64(d) > e.Max:
			return fmt.Errorf("%s is outside [%s]", d, e.Range())
		}
		set(c, d)
		return nil
	}
}

// msOrNeverSetter takes a time in milliseconds: -1 = never, else the registry's range of
// entry name (1..max Duration in ms).
func msOrNeverSetter(name string, set func(c *Config, d time.Duration)) setter {
	e := config.Get(name)
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil:
			return fmt.Errorf("not an integer: %q; allowed -1 (never) or %d..%d", v, e.Min, e.Max)
		case n == -1:
			set(c, -1)
		case n < e.Min || n > e.Max:
			return fmt.Errorf("%d is out of range; allowed -1 (never) or %d..%d", n, e.Min, e.Max)
		default:
			set(c, time.Duration(n)*time.Millisecond)
		}
		return nil
	}
}

// queuedMaxRequestBytesSetter takes -1 (unbounded) or a number of bytes (Check compares it
// with socket.request.max.bytes).
func queuedMaxRequestBytesSetter(c *Config, v string) error {
	e := config.Get("queued.max.request.bytes")
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || e.CheckInt(n) != nil {
		return fmt.Errorf("%q: allowed -1 (unbounded) or a number of bytes >= socket.request.max.bytes", v)
	}
	c.Limits.QueuedMaxRequestBytes = n
	return nil
}

// setters copy the settings that have a typed field in the cluster's, a broker's or a
// coordinator's Config into it (type, range and allowed modes are the registry's,
// core/config). A setting without one is read from Config.Settings by the code that uses it,
// and needs no setter.
var setters = map[string]setter{
	"num.replica.fetchers":                          intSetter("num.replica.fetchers", func(c *Config, n int64) { c.Broker.NumReplicaFetchers = int(n) }),
	"replica.fetch.wait.max.ms":                     intSetter("replica.fetch.wait.max.ms", func(c *Config, n int64) { c.Broker.ReplicaFetchWaitMaxMs = int32(n) }),
	"replica.fetch.min.bytes":                       intSetter("replica.fetch.min.bytes", func(c *Config, n int64) { c.Broker.ReplicaFetchMinBytes = int32(n) }),
	"replica.fetch.max.bytes":                       intSetter("replica.fetch.max.bytes", func(c *Config, n int64) { c.Broker.ReplicaFetchMaxBytes = int32(n) }),
	"replica.fetch.response.max.bytes":              intSetter("replica.fetch.response.max.bytes", func(c *Config, n int64) { c.Broker.ReplicaFetchResponseMaxBytes = int32(n) }),
	"replica.fetch.backoff.ms":                      intSetter("replica.fetch.backoff.ms", func(c *Config, n int64) { c.Broker.ReplicaFetchBackoffMs = int32(n) }),
	"replica.lag.time.max.ms":                       intSetter("replica.lag.time.max.ms", func(c *Config, n int64) { c.Broker.ReplicaLagTimeMaxMs = n }),
	"replica.high.watermark.checkpoint.interval.ms": intSetter("replica.high.watermark.checkpoint.interval.ms", func(c *Config, n int64) { c.Broker.ReplicaHighWatermarkCheckpointIntervalMs = n }),
	"min.insync.replicas":                           intSetter("min.insync.replicas", func(c *Config, n int64) { c.Broker.MinInsyncReplicas = int(n) }),
	"log.segment.bytes":                             intSetter("log.segment.bytes", func(c *Config, n int64) { c.Broker.Log.SegmentBytes = n }),
	"log.index.interval.bytes":                      intSetter("log.index.interval.bytes", func(c *Config, n int64) { c.Broker.Log.IndexIntervalBytes = int(n) }),
	"isrbench.log.tail.bytes":                       intSetter("isrbench.log.tail.bytes", func(c *Config, n int64) { c.Broker.Log.TailBytes = n }),
	"log.retention.bytes":                           intSetter("log.retention.bytes", func(c *Config, n int64) { c.Broker.Log.RetentionBytes = n }),
	"log.retention.ms":                              intSetter("log.retention.ms", func(c *Config, n int64) { c.Broker.Log.RetentionMs = n }),
	"log.retention.check.interval.ms":               intSetter("log.retention.check.interval.ms", func(c *Config, n int64) { c.Broker.LogRetentionCheckIntervalMs = n }),
	"log.flush.interval.messages":                   intSetter("log.flush.interval.messages", func(c *Config, n int64) { c.Broker.Log.FlushMessages = n }),
	"log.flush.interval.ms":                         intSetter("log.flush.interval.ms", func(c *Config, n int64) { c.Broker.Log.FlushMs = n }),
	"flush.messages":                                intSetter("log.flush.interval.messages", func(c *Config, n int64) { c.Broker.Log.FlushMessages = n }),
	"flush.ms":                                      intSetter("log.flush.interval.ms", func(c *Config, n int64) { c.Broker.Log.FlushMs = n }),
	"broker.session.timeout.ms":                     intSetter("broker.session.timeout.ms", func(c *Config, n int64) { c.Controller.BrokerSessionTimeoutMs = n }),
	"unclean.leader.election.enable":                boolSetter(func(c *Config, b bool) { c.Controller.UncleanLeaderElectionEnable = b }),
	"auto.create.topics.enable":                     boolSetter(func(c *Config, b bool) { c.AutoCreateTopics = b }),
	"num.partitions":                                intSetter("num.partitions", func(c *Config, n int64) { c.NumPartitions = int32(n) }),
	"default.replication.factor":                    intSetter("default.replication.factor", func(c *Config, n int64) { c.DefaultReplicationFactor = int16(n) }),
	"socket.request.max.bytes":                      intSetter("socket.request.max.bytes", func(c *Config, n int64) { c.SocketRequestMaxBytes = int32(n) }),
	"group.initial.rebalance.delay.ms":              intSetter("group.initial.rebalance.delay.ms", func(c *Config, n int64) { c.Group.InitialRebalanceDelayMs = n }),
	"group.min.session.timeout.ms":                  intSetter("group.min.session.timeout.ms", func(c *Config, n int64) { c.Group.MinSessionTimeoutMs = int32(n) }),
	"group.max.session.timeout.ms":                  intSetter("group.max.session.timeout.ms", func(c *Config, n int64) { c.Group.MaxSessionTimeoutMs = int32(n) }),
	"group.max.size":                                intSetter("group.max.size", func(c *Config, n int64) { c.Group.MaxSize = int(n) }),
	"offsets.topic.num.partitions":                  intSetter("offsets.topic.num.partitions", func(c *Config, n int64) { c.Group.OffsetsTopicNumPartitions = int32(n) }),
	"offsets.topic.replication.factor":              intSetter("offsets.topic.replication.factor", func(c *Config, n int64) { c.Group.OffsetsTopicReplicationFactor = int16(n) }),
	"offsets.topic.segment.bytes":                   intSetter("offsets.topic.segment.bytes", func(c *Config, n int64) { c.Group.OffsetsTopicSegmentBytes = n }),
	"offsets.commit.timeout.ms":                     intSetter("offsets.commit.timeout.ms", func(c *Config, n int64) { c.Group.OffsetsCommitTimeoutMs = n }),
	"offset.metadata.max.bytes":                     intSetter("offset.metadata.max.bytes", func(c *Config, n int64) { c.Group.OffsetMetadataMaxBytes = int(n) }),
	"offsets.retention.minutes":                     intSetter("offsets.retention.minutes", func(c *Config, n int64) { c.Group.OffsetsRetentionMinutes = int32(n) }),
	"offsets.retention.check.interval.ms":           intSetter("offsets.retention.check.interval.ms", func(c *Config, n int64) { c.Group.OffsetsRetentionCheckIntervalMs = n }),
	"max.connections":                               intSetter("max.connections", func(c *Config, n int64) { c.Limits.MaxConnections = int(n) }),
	"max.connections.per.ip":                        intSetter("max.connections.per.ip", func(c *Config, n int64) { c.Limits.MaxConnectionsPerIP = int(n) }),
	"connections.max.idle.ms":                       msOrNeverSetter("connections.max.idle.ms", func(c *Config, d time.Duration) { c.Limits.ConnectionsMaxIdle = d }),
	"isrbench.request.read.timeout.ms":              msOrNeverSetter("isrbench.request.read.timeout.ms", func(c *Config, d time.Duration) { c.Limits.RequestReadTimeout = d }),
	"queued.max.request.bytes":                      queuedMaxRequestBytesSetter,
	"isrbench.zero.copy":                            boolSetter(func(c *Config, b bool) { c.ZeroCopy = b }),
	"isrbench.zero.copy.min.bytes":                  intSetter("isrbench.zero.copy.min.bytes", func(c *Config, n int64) { c.ZeroCopyMinBytes = n }),
	"max.incremental.fetch.session.cache.slots":     intSetter("max.incremental.fetch.session.cache.slots", func(c *Config, n int64) { c.FetchSessionCacheSlots = int(n) }),
	"isrbench.fetch.sessions":                       boolSetter(func(c *Config, b bool) { c.FetchSessions = b }),
	"isrbench.socket.read.when.ready":               boolSetter(func(c *Config, b bool) { c.ReadWhenReady = b }),
	"isrbench.log.scrub.enable":                     boolSetter(func(c *Config, b bool) { c.Broker.ScrubEnable = b }),
	"isrbench.log.scrub.bytes.per.second":           intSetter("isrbench.log.scrub.bytes.per.second", func(c *Config, n int64) { c.Broker.ScrubBytesPerSecond = n }),
	"isrbench.log.scrub.interval.ms":                intSetter("isrbench.log.scrub.interval.ms", func(c *Config, n int64) { c.Broker.ScrubIntervalMs = n }),
	"isrbench.hw.update":                            modeSetter("isrbench.hw.update", func(c *Config, v string) error { c.Broker.HWUpdate = v; return nil }),
	"isrbench.truncate.mode":                        modeSetter("isrbench.truncate.mode", func(c *Config, v string) error { c.Broker.TruncateMode = v; return nil }),
	"isrbench.produce.delay":                        durSetter("isrbench.produce.delay", func(c *Config, d time.Duration) { c.Broker.ProduceDelay = d }),
	"isrbench.produce.spin":                         durSetter("isrbench.produce.spin", func(c *Config, d time.Duration) { c.Broker.ProduceSpin = d }),
	"auto.leader.rebalance.enable":                  boolSetter(func(c *Config, b bool) { c.AutoLeaderRebalanceEnable = b }),
	"leader.replication.throttled.rate":             intSetter("leader.replication.throttled.rate", func(c *Config, n int64) { c.Broker.LeaderReplicationThrottledRate = n }),
	"follower.replication.throttled.rate":           intSetter("follower.replication.throttled.rate", func(c *Config, n int64) { c.Broker.FollowerReplicationThrottledRate = n }),
	"transaction.state.log.num.partitions":          intSetter("transaction.state.log.num.partitions", func(c *Config, n int64) { c.Txn.NumPartitions = int32(n) }),
	"transaction.state.log.replication.factor":      intSetter("transaction.state.log.replication.factor", func(c *Config, n int64) { c.Txn.ReplicationFactor = int16(n) }),
	"transaction.state.log.min.isr":                 intSetter("transaction.state.log.min.isr", func(c *Config, n int64) { c.Txn.MinISR = int(n) }),
	"transaction.state.log.segment.bytes":           intSetter("transaction.state.log.segment.bytes", func(c *Config, n int64) { c.Txn.SegmentBytes = n }),
	"transaction.max.timeout.ms":                    intSetter("transaction.max.timeout.ms", func(c *Config, n int64) { c.Txn.MaxTimeoutMs = int32(n) }),
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": intSetter("transaction.abort.timed.out.transaction.cleanup.interval.ms",
		func(c *Config, n int64) { c.Txn.AbortCheckIntervalMs = n }),
	"isrbench.io": modeSetter("isrbench.io", func(c *Config, v string) error {
		w, err := log.NewWriter(v)
		if err != nil {
			return err
		}
		c.Broker.Log.Writer = w
		return nil
	}),

	// The controller's preferred-leader balancing.
	"leader.imbalance.check.interval.seconds": intSetter("leader.imbalance.check.interval.seconds", func(c *Config, n int64) { c.LeaderImbalanceCheckIntervalSeconds = n }),
	"leader.imbalance.per.broker.percentage":  intSetter("leader.imbalance.per.broker.percentage", func(c *Config, n int64) { c.LeaderImbalancePerBrokerPercentage = int(n) }),
}

// Set applies one "key=value" setting under its Kafka name (or isrbench.*
// switch) to the cluster config: to Settings, and to the typed field it has, if any; an
// unknown key or bad value is an error naming the key and the allowed values.
func (c *Config) Set(key, value string) error {
	if ok, err := c.setSecurity(key, value); ok { // listeners and their security (security.go)
		if err != nil {
			return fmt.Errorf("setting %s: %w", key, err)
		}
		return nil
	}
	name := brokerConfigName(key)
	if e, ok := config.Lookup(name); !ok || e.Fixed {
		return fmt.Errorf("unknown setting %q (known: %s, and the security settings %s)", key, strings.Join(SettableKeys(), ", "), strings.Join(securityKeys, ", "))
	}
	next := *c
	if s, ok := setters[key]; ok {
		if err := s(&next, value); err != nil {
			return fmt.Errorf("setting %s: %w", key, err)
		}
	}
	if err := next.Settings.Set(name, value); err != nil {
		return fmt.Errorf("setting %s: %w", key, err)
	}
	*c = next
	return nil
}

// Check applies the rules between settings (each was range-checked when set):
// queued.max.request.bytes against socket.request.max.bytes, as Kafka does.
func (c *Config) Check() error {
	if _, err := resolveSecurity(c); err != nil {
		return err
	}
	return c.Limits.Check(c.SocketRequestMaxBytes)
}

// checkRanges checks every numeric broker config as DescribeConfigs reports it (zero fields
// that mean "the default" read as the default) against the registry's range: a
// Config built in Go, not through Set, is held to the same ranges.
func (c *Config) checkRanges() error {
	for _, d := range brokerConfigDefs {
		e := config.Get(d.name)
		if e.Fixed || !e.Type.Numeric() {
			continue
		}
		v := d.get(c, 0, "")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not an integer; allowed %s", d.name, v, e.Range())
		}
		if err := e.CheckInt(n); err != nil {
			return err
		}
	}
	return nil
}

// brokerConfigName is the broker config a setting is reported as (flush.messages and
// flush.ms are the topic-level names of log.flush.interval.messages / .ms).
func brokerConfigName(key string) string {
	switch key {
	case "flush.messages":
		return "log.flush.interval.messages"
	case "flush.ms":
		return "log.flush.interval.ms"
	}
	return key
}

// SetKV applies "key=value".
func (c *Config) SetKV(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("setting %q: want key=value", kv)
	}
	return c.Set(strings.TrimSpace(k), v)
}
