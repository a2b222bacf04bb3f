package netfetch

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// SettableKeys lists the keys Set accepts (Kafka config names and isrbench.* switches).
func SettableKeys() []string {
	keys := make([]string, 0, len(setters))
	for k := range setters {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type setter func(c *ClusterConfig, v string) error

func intSetter(lo, hi int64, set func(c *ClusterConfig, n int64)) setter {
	return func(c *ClusterConfig, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is outside [%d, %d]", n, lo, hi)
		}
		set(c, n)
		return nil
	}
}

func boolSetter(set func(c *ClusterConfig, b bool)) setter {
	return func(c *ClusterConfig, v string) error {
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

func oneOfSetter(allowed []string, set func(c *ClusterConfig, v string) error) setter {
	return func(c *ClusterConfig, v string) error {
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("%q is not one of %s", v, strings.Join(allowed, ", "))
		}
		return set(c, v)
	}
}

// msOrNeverSetter takes a time in milliseconds: -1 = never, else 1..(max Duration in ms).
func msOrNeverSetter(set func(c *ClusterConfig, d time.Duration)) setter {
	const maxMs = math.MaxInt64 / int64(time.Millisecond)
	return func(c *ClusterConfig, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil:
			return fmt.Errorf("not an integer: %q; allowed -1 (never) or 1..%d", v, maxMs)
		case n == -1:
			set(c, -1)
		case n < 1 || n > maxMs:
			return fmt.Errorf("%d is out of range; allowed -1 (never) or 1..%d", n, maxMs)
		default:
			set(c, time.Duration(n)*time.Millisecond)
		}
		return nil
	}
}

// queuedMaxRequestBytesSetter takes -1 (unbounded) or a number of bytes (Check compares it
// with socket.request.max.bytes).
func queuedMaxRequestBytesSetter(c *ClusterConfig, v string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n == 0 || n < -1 {
		return fmt.Errorf("%q: allowed -1 (unbounded) or a number of bytes >= socket.request.max.bytes", v)
	}
	c.Limits.QueuedMaxRequestBytes = n
	return nil
}

var setters = map[string]setter{
	"num.replica.fetchers":                      intSetter(1, 64, func(c *ClusterConfig, n int64) { c.Broker.NumReplicaFetchers = int(n) }),
	"replica.fetch.wait.max.ms":                 intSetter(0, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Broker.ReplicaFetchWaitMaxMs = int32(n) }),
	"replica.fetch.min.bytes":                   intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Broker.ReplicaFetchMinBytes = int32(n) }),
	"replica.fetch.max.bytes":                   intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Broker.ReplicaFetchMaxBytes = int32(n) }),
	"replica.fetch.response.max.bytes":          intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Broker.ReplicaFetchResponseMaxBytes = int32(n) }),
	"replica.fetch.backoff.ms":                  intSetter(0, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Broker.ReplicaFetchBackoffMs = int32(n) }),
	"replica.lag.time.max.ms":                   intSetter(1, math.MaxInt64, func(c *ClusterConfig, n int64) { c.Broker.ReplicaLagTimeMaxMs = n }),
	"min.insync.replicas":                       intSetter(1, math.MaxInt16, func(c *ClusterConfig, n int64) { c.Broker.MinInsyncReplicas = int(n) }),
	"log.segment.bytes":                         intSetter(14, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Broker.Log.SegmentBytes = n }),
	"log.index.interval.bytes":                  intSetter(0, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Broker.Log.IndexIntervalBytes = int(n) }),
	"log.retention.bytes":                       intSetter(-1, math.MaxInt64, func(c *ClusterConfig, n int64) { c.Broker.Log.RetentionBytes = n }),
	"log.retention.ms":                          intSetter(-1, math.MaxInt64, func(c *ClusterConfig, n int64) { c.Broker.Log.RetentionMs = n }),
	"log.retention.check.interval.ms":           intSetter(1, math.MaxInt64, func(c *ClusterConfig, n int64) { c.Broker.LogRetentionCheckIntervalMs = n }),
	"flush.messages":                            intSetter(1, math.MaxInt64, func(c *ClusterConfig, n int64) { c.Broker.Log.FlushMessages = n }),
	"flush.ms":                                  intSetter(0, math.MaxInt64, func(c *ClusterConfig, n int64) { c.Broker.Log.FlushMs = n }),
	"broker.session.timeout.ms":                 intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Controller.BrokerSessionTimeoutMs = n }),
	"unclean.leader.election.enable":            boolSetter(func(c *ClusterConfig, b bool) { c.Controller.UncleanLeaderElectionEnable = b }),
	"auto.create.topics.enable":                 boolSetter(func(c *ClusterConfig, b bool) { c.AutoCreateTopics = b }),
	"num.partitions":                            intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.NumPartitions = int32(n) }),
	"default.replication.factor":                intSetter(1, math.MaxInt16, func(c *ClusterConfig, n int64) { c.DefaultReplicationFactor = int16(n) }),
	"socket.request.max.bytes":                  intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.SocketRequestMaxBytes = int32(n) }),
	"message.max.bytes":                         intSetter(0, math.MaxInt32, func(c *ClusterConfig, n int64) { c.MessageMaxBytes = int32(n) }),
	"group.initial.rebalance.delay.ms":          intSetter(0, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Group.InitialRebalanceDelayMs = n }),
	"group.min.session.timeout.ms":              intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Group.MinSessionTimeoutMs = int32(n) }),
	"group.max.session.timeout.ms":              intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Group.MaxSessionTimeoutMs = int32(n) }),
	"group.max.size":                            intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Group.MaxSize = int(n) }),
	"offsets.topic.num.partitions":              intSetter(1, controller.MaxPartitions, func(c *ClusterConfig, n int64) { c.Group.OffsetsTopicNumPartitions = int32(n) }),
	"offsets.topic.replication.factor":          intSetter(1, math.MaxInt16, func(c *ClusterConfig, n int64) { c.Group.OffsetsTopicReplicationFactor = int16(n) }),
	"offsets.topic.segment.bytes":               intSetter(14, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Group.OffsetsTopicSegmentBytes = n }),
	"offsets.commit.timeout.ms":                 intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Group.OffsetsCommitTimeoutMs = n }),
	"offset.metadata.max.bytes":                 intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Group.OffsetMetadataMaxBytes = int(n) }),
	"max.connections":                           intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Limits.MaxConnections = int(n) }),
	"max.connections.per.ip":                    intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.Limits.MaxConnectionsPerIP = int(n) }),
	"connections.max.idle.ms":                   msOrNeverSetter(func(c *ClusterConfig, d time.Duration) { c.Limits.ConnectionsMaxIdle = d }),
	"isrbench.request.read.timeout.ms":          msOrNeverSetter(func(c *ClusterConfig, d time.Duration) { c.Limits.RequestReadTimeout = d }),
	"queued.max.request.bytes":                  queuedMaxRequestBytesSetter,
	"isrbench.zero.copy":                        boolSetter(func(c *ClusterConfig, b bool) { c.ZeroCopy = b }),
	"isrbench.zero.copy.min.bytes":              intSetter(0, math.MaxInt32, func(c *ClusterConfig, n int64) { c.ZeroCopyMinBytes = n }),
	"max.incremental.fetch.session.cache.slots": intSetter(0, math.MaxInt32, func(c *ClusterConfig, n int64) { c.FetchSessionCacheSlots = int(n) }),
	"isrbench.fetch.sessions":                   boolSetter(func(c *ClusterConfig, b bool) { c.FetchSessions = b }),
	"isrbench.hw.update":                        oneOfSetter([]string{"atomic", "mutex"}, func(c *ClusterConfig, v string) error { c.Broker.HWUpdate = v; return nil }),
	"isrbench.truncate.mode":                    oneOfSetter([]string{"epoch", "hw"}, func(c *ClusterConfig, v string) error { c.Broker.TruncateMode = v; return nil }),
	"log.flush.interval.messages":               intSetter(1, math.MaxInt64, func(c *ClusterConfig, n int64) { c.Broker.Log.FlushMessages = n }),
	"log.flush.interval.ms":                     intSetter(0, math.MaxInt64, func(c *ClusterConfig, n int64) { c.Broker.Log.FlushMs = n }),
	"auto.leader.rebalance.enable":              boolSetter(func(c *ClusterConfig, b bool) { c.AutoLeaderRebalanceEnable = b }),
	"isrbench.io": oneOfSetter([]string{"pwritev", "uring", "write"}, func(c *ClusterConfig, v string) error {
		w, err := log.NewWriter(v)
		if err != nil {
			return err
		}
		c.Broker.Log.Writer = w
		return nil
	}),

	// The controller's preferred-leader balancing.
	"leader.imbalance.check.interval.seconds": intSetter(1, math.MaxInt32, func(c *ClusterConfig, n int64) { c.LeaderImbalanceCheckIntervalSeconds = n }),
	"leader.imbalance.per.broker.percentage":  intSetter(0, 100, func(c *ClusterConfig, n int64) { c.LeaderImbalancePerBrokerPercentage = int(n) }),
}

// Set applies one "key=value" setting under its Kafka name (or isrbench.*
// switch) to the cluster config; an unknown key or bad value is an error
// naming the key and the allowed values.
func (c *ClusterConfig) Set(key, value string) error {
	s, ok := setters[key]
	if !ok {
		return fmt.Errorf("unknown setting %q (known: %s)", key, strings.Join(SettableKeys(), ", "))
	}
	if err := s(c, value); err != nil {
		return fmt.Errorf("setting %s: %w", key, err)
	}
	if c.explicit == nil {
		c.explicit = map[string]bool{}
	}
	c.explicit[brokerConfigName(key)] = true
	return nil
}

// Check applies the rules between settings (each was range-checked when set):
// queued.max.request.bytes against socket.request.max.bytes, as Kafka does.
func (c *ClusterConfig) Check() error {
	return c.Limits.Check(c.SocketRequestMaxBytes)
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
func (c *ClusterConfig) SetKV(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("setting %q: want key=value", kv)
	}
	return c.Set(strings.TrimSpace(k), v)
}
