package workloads

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate checks cross-field constraints (every single field was range-checked when set).
func (s *Spec) Validate() error {
	for _, p := range params {
		if err := p.set(s.Clone(), fmt.Sprint(p.get(s))); err != nil {
			return err
		}
	}
	if _, err := CheckTarget(s.Target, s); err != nil {
		return err
	}
	if s.Topic.ReplicationFactor > s.Brokers {
		return fmt.Errorf("topic.replication.factor: %d is more than brokers (%d); allowed 1..%d",
			s.Topic.ReplicationFactor, s.Brokers, s.Brokers)
	}
	if s.Topic.MinInsyncReplicas > s.Topic.ReplicationFactor {
		return fmt.Errorf("topic.min.insync.replicas: %d is more than topic.replication.factor (%d); allowed 1..%d",
			s.Topic.MinInsyncReplicas, s.Topic.ReplicationFactor, s.Topic.ReplicationFactor)
	}
	if s.Consumers.Count == 0 && !slices.ContainsFunc(s.ProducerGroups(), func(g ProducerSpec) bool { return g.Count > 0 }) {
		return errors.New("producers.count and consumers.count are both 0: nothing to run or measure; allowed at least one producer or consumer")
	}
	if err := s.validateProducerGroups(); err != nil { // also every group's rate against the duration
		return err
	}
	if err := s.validateFaults(); err != nil {
		return err
	}
	return nil
}

// Set overrides one setting by flat key (full path or short name, see Keys) from its text form.
func (s *Spec) Set(key, value string) error {
	p := Lookup(key)
	if p == nil {
		return fmt.Errorf("unknown key %q (known keys: %s)", key, strings.Join(Keys(), ", "))
	}
	if err := p.set(s, value); err != nil {
		return err
	}
	s.markGiven(p.Key)
	return nil
}

// Get returns the effective value of one setting by flat key.
func (s *Spec) Get(key string) (any, error) {
	p := Lookup(key)
	if p == nil {
		return nil, fmt.Errorf("unknown key %q", key)
	}
	return p.get(s), nil
}

// ApplySets applies "key=value" overrides in order, then validates.
func (s *Spec) ApplySets(sets []string) error {
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("--set %q: want key=value", kv)
		}
		if err := s.Set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("--set %s: %w", kv, err)
		}
	}
	return s.Validate()
}

// Config returns every effective setting flattened under its canonical key (see Keys), for
// result.json's config. Durations are strings ("20s"), the rest numbers, booleans or strings.
func (s *Spec) Config() map[string]any {
	m := make(map[string]any, len(params)+2)
	for _, p := range params {
		v := p.get(s)
		if d, ok := v.(time.Duration); ok {
			v = d.String()
		}
		m[p.Key] = v
	}
	m["faults"] = len(s.Faults)
	if len(s.MoreProducers) > 0 {
		m["producers.groups"] = 1 + len(s.MoreProducers)
		for i, g := range s.MoreProducers {
			tmp := *s
			tmp.Producers = g
			for _, p := range params {
				if rest, ok := strings.CutPrefix(p.Key, "producers."); ok {
					m[fmt.Sprintf("producers[%d].%s", i+1, rest)] = p.get(&tmp)
				}
			}
		}
	}
	return m
}

// Param describes one flat key.
type Param struct {
	Key     string   // canonical key, as in Config()
	Aliases []string // other accepted names (the full path for broker properties, short names)
	Help    string   // default, unit and allowed values
	set     func(s *Spec, v string) error
	get     func(s *Spec) any
}

// Params lists every flat key in documentation order.
func Params() []Param { return append([]Param(nil), params...) }

// Keys lists the canonical keys.
func Keys() []string {
	out := make([]string, len(params))
	for i, p := range params {
		out[i] = p.Key
	}
	return out
}

// KeyHelp is the flat-key documentation, one line per key.
func KeyHelp() string {
	var b strings.Builder
	for _, p := range params {
		names := p.Key
		if len(p.Aliases) > 0 {
			names += " (" + strings.Join(p.Aliases, ", ") + ")"
		}
		fmt.Fprintf(&b, "  %-48s %s\n", names, p.Help)
	}
	return b.String()
}

// Lookup finds a Param by canonical key or alias; nil if unknown.
func Lookup(key string) *Param {
	for i := range params {
		if params[i].Key == key {
			return &params[i]
		}
		for _, a := range params[i].Aliases {
			if a == key {
				return &params[i]
			}
		}
	}
	return nil
}

// lookupFull finds a Param by its YAML path (section.key).
func lookupFull(full string) *Param {
	for i := range params {
		if params[i].path() == full {
			return &params[i]
		}
	}
	return nil
}

// path is the YAML path of a param: broker properties live under "broker." in YAML.
func (p *Param) path() string {
	for _, a := range p.Aliases {
		if strings.HasPrefix(a, "broker.") {
			return a
		}
	}
	return p.Key
}

func knownUnder(prefix string) string {
	var ks []string
	for i := range params {
		path := params[i].path()
		if prefix == "" {
			if !strings.Contains(path, ".") {
				ks = append(ks, path)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(path, prefix+"."); ok {
			ks = append(ks, rest)
		}
	}
	if prefix == "" {
		ks = append(ks, "topic", "broker", "producers", "consumers", "faults", "sweep")
		return "known top-level keys: " + strings.Join(ks, ", ")
	}
	return "known keys under " + prefix + ": " + strings.Join(ks, ", ")
}

// intP is an integer param of any width (int, int64): lo..hi is checked before the store.
func intP[T int | int64](key string, aliases []string, lo, hi int64, help string, f func(*Spec) *T) Param {
	return Param{Key: key, Aliases: aliases, Help: fmt.Sprintf("%s (int %d..%d)", help, lo, hi),
		set: func(s *Spec, v string) error {
			n, err := parseInt(key, v, lo, hi)
			if err == nil {
				*f(s) = T(n)
			}
			return err
		},
		get: func(s *Spec) any { return *f(s) }}
}

// minQueuedMaxRequestBytes is socket.request.max.bytes' default (104857600): Kafka requires
// queued.max.request.bytes to be -1 or at least socket.request.max.bytes.
const minQueuedMaxRequestBytes = 104857600

// orNeverP is a time in ms that takes -1 for never: -1 or 1..(max Duration in ms).
func orNeverP(key string, aliases []string, help string, f func(*Spec) *int64) Param {
	const hi = math.MaxInt64 / int64(time.Millisecond)
	return Param{Key: key, Aliases: aliases, Help: fmt.Sprintf("%s (int -1 or 1..%d)", help, hi),
		set: func(s *Spec, v string) error {
			n, err := parseInt(key, v, -1, hi)
			if err == nil && n == 0 {
				err = fmt.Errorf("%s: 0 is not allowed; allowed -1 (never) or 1..%d", key, hi)
			}
			if err == nil {
				*f(s) = n
			}
			return err
		},
		get: func(s *Spec) any { return *f(s) }}
}

func boolP(key string, aliases []string, help string, f func(*Spec) *bool) Param {
	return Param{Key: key, Aliases: aliases, Help: help + " (true|false)",
		set: func(s *Spec, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a boolean; allowed true|false", key, v)
			}
			*f(s) = b
			return nil
		},
		get: func(s *Spec) any { return *f(s) }}
}

func enumP(key string, aliases []string, allowed []string, help string, f func(*Spec) *string) Param {
	return Param{Key: key, Aliases: aliases, Help: help + " (" + strings.Join(allowed, "|") + ")",
		set: func(s *Spec, v string) error {
			e, err := parseEnum(key, v, allowed)
			if err == nil {
				*f(s) = e
			}
			return err
		},
		get: func(s *Spec) any { return *f(s) }}
}

func durP(key string, aliases []string, lo, hi time.Duration, help string, f func(*Spec) *time.Duration) Param {
	return Param{Key: key, Aliases: aliases, Help: fmt.Sprintf("%s (duration %s..%s)", help, lo, hi),
		set: func(s *Spec, v string) error {
			d, err := parseDuration(key, v, lo, hi)
			if err == nil {
				*f(s) = d
			}
			return err
		},
		get: func(s *Spec) any { return *f(s) }}
}

func parseInt(key, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 10, 64)
	if err != nil {
		if f, ferr := strconv.ParseFloat(v, 64); ferr == nil && f >= 9.2e18 && hi == math.MaxInt64 {
			return math.MaxInt64, nil
		}
		return 0, fmt.Errorf("%s: %q is not an integer; allowed %d..%d", key, v, lo, hi)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s: %d is out of range; allowed %d..%d", key, n, lo, hi)
	}
	return n, nil
}

func parseEnum(key, v string, allowed []string) (string, error) {
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s: %q is not allowed; allowed %s", key, v, strings.Join(allowed, "|"))
}

func parseDuration(key, v string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration; allowed e.g. 500ms, 20s, 1m (%s..%s)", key, v, lo, hi)
	}
	if d < lo || d > hi {
		return 0, fmt.Errorf("%s: %s is out of range; allowed %s..%s", key, d, lo, hi)
	}
	return d, nil
}

func splitList(v string) []string {
	var out []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// params is the flat key table. Broker properties have their bare Kafka name as canonical key
// (result.json config["num.replica.fetchers"]) and "broker.<name>" as the YAML path/alias.
var params = []Param{
	{Key: "name", Help: "spec name (string)",
		set: func(s *Spec, v string) error {
			if v == "" || strings.ContainsAny(v, "/ \t\n") {
				return fmt.Errorf("name: %q; allowed a non-empty word without '/' or spaces", v)
			}
			s.Name = v
			return nil
		}, get: func(s *Spec) any { return s.Name }},
	{Key: "target", Help: "embedded | kfake | kafka://host:port[,host:port], default embedded",
		set: func(s *Spec, v string) error {
			v = strings.TrimSpace(v)
			if _, err := CheckTarget(v, nil); err != nil {
				return err // names the target
			}
			s.Target = v
			return nil
		}, get: func(s *Spec) any { return s.TargetName() }},
	{Key: "description", Help: "free text",
		set: func(s *Spec, v string) error { s.Description = v; return nil },
		get: func(s *Spec) any { return s.Description }},
	intP("brokers", nil, 1, 16, "embedded cluster size, default 3", func(s *Spec) *int { return &s.Brokers }),
	durP("duration", nil, 100*time.Millisecond, 24*time.Hour, "measurement window, default 20s", func(s *Spec) *time.Duration { return &s.Duration }),
	durP("warmup", nil, 0, time.Hour, "warm-up before measurement (samples discarded), default 5s", func(s *Spec) *time.Duration { return &s.Warmup }),

	{Key: "topic.name", Help: "benchmark topic, default isrbench ([a-zA-Z0-9._-], 1..249 chars)",
		set: func(s *Spec, v string) error {
			if !validTopic(v) {
				return fmt.Errorf("topic.name: %q; allowed 1..249 characters of [a-zA-Z0-9._-], not . or ..", v)
			}
			s.Topic.Name = v
			return nil
		}, get: func(s *Spec) any { return s.Topic.Name }},
	intP("topic.partitions", []string{"partitions"}, 1, 10000, "partitions, default 6", func(s *Spec) *int { return &s.Topic.Partitions }),
	intP("topic.replication.factor", []string{"replication.factor"}, 1, 16, "replication factor (<= brokers), default 3", func(s *Spec) *int { return &s.Topic.ReplicationFactor }),
	intP("topic.min.insync.replicas", []string{"min.insync.replicas"}, 1, 16, "topic config min.insync.replicas (<= replication factor), default 2", func(s *Spec) *int { return &s.Topic.MinInsyncReplicas }),

	intP("num.replica.fetchers", []string{"broker.num.replica.fetchers"}, 1, 64, "fetcher goroutines per source broker, default 1", func(s *Spec) *int { return &s.Broker.NumReplicaFetchers }),
	intP("replica.fetch.wait.max.ms", []string{"broker.replica.fetch.wait.max.ms"}, 0, 60000, "max replica fetch long-poll wait (ms), default 500", func(s *Spec) *int { return &s.Broker.ReplicaFetchWaitMaxMs }),
	intP("replica.fetch.backoff.ms", []string{"broker.replica.fetch.backoff.ms"}, 0, 600000, "a follower's wait before it fetches a partition again after an error (ms), default 1000", func(s *Spec) *int { return &s.Broker.ReplicaFetchBackoffMs }),
	intP("replica.fetch.min.bytes", []string{"broker.replica.fetch.min.bytes"}, 1, math.MaxInt32, "min bytes before a replica fetch returns, default 1", func(s *Spec) *int { return &s.Broker.ReplicaFetchMinBytes }),
	intP("replica.fetch.max.bytes", []string{"broker.replica.fetch.max.bytes"}, 1024, math.MaxInt32, "max bytes per partition per replica fetch, default 1048576", func(s *Spec) *int { return &s.Broker.ReplicaFetchMaxBytes }),
	intP("replica.fetch.response.max.bytes", []string{"broker.replica.fetch.response.max.bytes"}, 1024, math.MaxInt32, "max bytes per replica fetch response, default 10485760", func(s *Spec) *int { return &s.Broker.ReplicaFetchResponseMaxBytes }),
	intP("replica.lag.time.max.ms", []string{"broker.replica.lag.time.max.ms"}, 1, 24*3600*1000, "ISR lag time (ms), default 30000", func(s *Spec) *int64 { return &s.Broker.ReplicaLagTimeMaxMs }),
	boolP("unclean.leader.election.enable", []string{"broker.unclean.leader.election.enable"}, "elect out-of-sync replicas, default false", func(s *Spec) *bool { return &s.Broker.UncleanLeaderElectionEnable }),
	intP("broker.session.timeout.ms", []string{"broker.broker.session.timeout.ms"}, 1, 24*3600*1000, "controller fences a broker silent this long (ms), default 9000", func(s *Spec) *int64 { return &s.Broker.BrokerSessionTimeoutMs }),
	intP("log.segment.bytes", []string{"broker.log.segment.bytes"}, 14, math.MaxInt32, "segment size; harness default 67108864 (Kafka 1073741824) so retention, which never deletes the active segment, keeps the disk bounded", func(s *Spec) *int64 { return &s.Broker.LogSegmentBytes }),
	intP("log.retention.bytes", []string{"broker.log.retention.bytes", "retention.bytes"}, -1, math.MaxInt64, "bytes kept per partition replica before the oldest segments are deleted, -1 = unlimited; harness default 268435456 (Kafka -1): a replica holds at most about retention.bytes + log.segment.bytes", func(s *Spec) *int64 { return &s.Broker.LogRetentionBytes }),
	intP("log.retention.ms", []string{"broker.log.retention.ms", "retention.ms"}, -1, math.MaxInt64, "delete segments whose newest record is older (ms), -1 = unlimited; default 604800000", func(s *Spec) *int64 { return &s.Broker.LogRetentionMs }),
	intP("log.retention.check.interval.ms", []string{"broker.log.retention.check.interval.ms"}, 1, 24*3600*1000, "how often each broker applies retention (ms); harness default 1000 (Kafka 300000)", func(s *Spec) *int64 { return &s.Broker.LogRetentionCheckIntervalMs }),
	{Key: "isrbench.min.free.disk", Aliases: []string{"broker.isrbench.min.free.disk", "min.free.disk"},
		Help: "stop the run when the data dir's filesystem has less free space: bytes (2147483648), a size (2GiB, 500MiB, 10GB) or a percentage of the filesystem (5%); 0 = off; default 2GiB",
		set: func(s *Spec, v string) error {
			f, err := ParseDiskFloor("isrbench.min.free.disk", v)
			if err == nil {
				s.Broker.MinFreeDisk = f
			}
			return err
		}, get: func(s *Spec) any { return s.Broker.MinFreeDisk.String() }},
	intP("flush.messages", []string{"broker.flush.messages"}, 1, math.MaxInt64, "fsync every N messages, default 9223372036854775807 (never)", func(s *Spec) *int64 { return &s.Broker.FlushMessages }),
	intP("flush.ms", []string{"broker.flush.ms"}, 0, math.MaxInt64, "fsync every N ms, default 9223372036854775807 (never)", func(s *Spec) *int64 { return &s.Broker.FlushMs }),
	boolP("isrbench.zero.copy", []string{"broker.isrbench.zero.copy"}, "sendfile fetch responses, default true", func(s *Spec) *bool { return &s.Broker.ZeroCopy }),
	boolP("isrbench.fetch.sessions", []string{"broker.isrbench.fetch.sessions"}, "replica fetchers use incremental fetch sessions (KIP-227), default true", func(s *Spec) *bool { return &s.Broker.FetchSessions }),
	intP("max.incremental.fetch.session.cache.slots", []string{"broker.max.incremental.fetch.session.cache.slots"}, 0, math.MaxInt32, "incremental fetch sessions a broker keeps, 0 = none, default 1000", func(s *Spec) *int { return &s.Broker.FetchSessionCacheSlots }),
	intP("isrbench.zero.copy.min.bytes", []string{"broker.isrbench.zero.copy.min.bytes"}, 0, math.MaxInt32, "with zero copy, record slices smaller than this are copied (pread) instead of sent with sendfile; 0 = sendfile always, default 32768", func(s *Spec) *int64 { return &s.Broker.ZeroCopyMinBytes }),
	enumP("isrbench.io", []string{"broker.isrbench.io"}, []string{"pwritev", "uring", "write"}, "log write path, default pwritev", func(s *Spec) *string { return &s.Broker.IO }),
	enumP("isrbench.hw.update", []string{"broker.isrbench.hw.update"}, []string{"atomic", "mutex"}, "HW advance, default atomic", func(s *Spec) *string { return &s.Broker.HWUpdate }),
	enumP("isrbench.truncate.mode", []string{"broker.isrbench.truncate.mode"}, []string{"epoch", "hw"}, "follower truncation, default epoch (hw: ablation)", func(s *Spec) *string { return &s.Broker.TruncateMode }),
	intP("replica.high.watermark.checkpoint.interval.ms", []string{"broker.replica.high.watermark.checkpoint.interval.ms"}, 1, 24*3600*1000, "how often each broker writes its HW checkpoint (ms), default 5000", func(s *Spec) *int64 { return &s.Broker.HWCheckpointIntervalMs }),
	durP("isrbench.produce.delay", []string{"broker.isrbench.produce.delay"}, 0, time.Minute, "artificial delay per produce, default 0", func(s *Spec) *time.Duration { return &s.Broker.ProduceDelay }),
	durP("isrbench.produce.spin", []string{"broker.isrbench.produce.spin"}, 0, time.Second, "artificial CPU work per produce request (a computation calibrated to take this long; the gate's CPU-regression test), default 0", func(s *Spec) *time.Duration { return &s.Broker.ProduceSpin }),
	intP("max.connections", []string{"broker.max.connections"}, 1, math.MaxInt32, "connections each broker accepts at once (further ones are closed at once; each broker's share of RLIMIT_NOFILE lowers it), default 2147483647", func(s *Spec) *int { return &s.Broker.MaxConnections }),
	intP("max.connections.per.ip", []string{"broker.max.connections.per.ip"}, 1, math.MaxInt32, "connections from one client IP address each broker accepts at once, default 2147483647", func(s *Spec) *int { return &s.Broker.MaxConnectionsPerIP }),
	orNeverP("connections.max.idle.ms", []string{"broker.connections.max.idle.ms"}, "close a connection on which no request started for this long (ms), -1 = never, default 600000", func(s *Spec) *int64 { return &s.Broker.ConnectionsMaxIdleMs }),
	orNeverP("isrbench.request.read.timeout.ms", []string{"broker.isrbench.request.read.timeout.ms"}, "close a connection whose request has not fully arrived this long after its first byte (ms), -1 = never, default 30000 (Kafka clients' request.timeout.ms)", func(s *Spec) *int64 { return &s.Broker.RequestReadTimeoutMs }),
	{Key: "queued.max.request.bytes", Aliases: []string{"broker.queued.max.request.bytes"},
		Help: fmt.Sprintf("bytes of request buffers each broker's connections may hold at once (over it a request waits, unread, until isrbench.request.read.timeout.ms), -1 = unbounded (Kafka's default); harness default 104857600 (allowed -1 or %d..%d)", minQueuedMaxRequestBytes, int64(math.MaxInt64)),
		set: func(s *Spec, v string) error {
			n, err := parseInt("queued.max.request.bytes", v, -1, math.MaxInt64)
			if err == nil && n != -1 && n < minQueuedMaxRequestBytes {
				err = fmt.Errorf("queued.max.request.bytes: %d is smaller than socket.request.max.bytes (%d), which Kafka requires; allowed -1 (unbounded) or %d..%d",
					n, minQueuedMaxRequestBytes, minQueuedMaxRequestBytes, int64(math.MaxInt64))
			}
			if err == nil {
				s.Broker.QueuedMaxRequestBytes = n
			}
			return err
		}, get: func(s *Spec) any { return s.Broker.QueuedMaxRequestBytes }},

	intP("producers.count", nil, 0, 1024, "producer clients, default 2", func(s *Spec) *int { return &s.Producers.Count }),
	{Key: "producers.acks", Aliases: []string{"acks"}, Help: "required acks, default all (all|-1|1|0)",
		set: func(s *Spec, v string) error {
			switch v {
			case "all", "-1":
				s.Producers.Acks = "all"
			case "1", "0":
				s.Producers.Acks = v
			default:
				return fmt.Errorf("producers.acks: %q is not allowed; allowed all|-1|1|0", v)
			}
			return nil
		}, get: func(s *Spec) any { return s.Producers.Acks }},
	intP("producers.message.size", []string{"message.size"}, HeaderSize, 1000000, "record value bytes, default 1024", func(s *Spec) *int { return &s.Producers.MessageSize }),
	{Key: "producers.rate", Aliases: []string{"rate"}, Help: "total records/s over all producers, 0 = as fast as possible, default 5000 (0..10000000)",
		set: func(s *Spec, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(f) {
				return fmt.Errorf("producers.rate: %q is not a number; allowed 0..10000000 records/s", v)
			}
			if f < 0 || f > 1e7 {
				return fmt.Errorf("producers.rate: %g is out of range; allowed 0..10000000 records/s", f)
			}
			s.Producers.Rate = f
			return nil
		}, get: func(s *Spec) any { return s.Producers.Rate }},
	intP("producers.linger.ms", []string{"linger.ms"}, 0, 60000, "producer linger (ms), default 0", func(s *Spec) *int { return &s.Producers.LingerMs }),
	intP("producers.batch.size", []string{"batch.size"}, 1024, 64<<20, "producer batch bytes, default 16384", func(s *Spec) *int { return &s.Producers.BatchSize }),
	enumP("producers.keys", []string{"keys"}, []string{"none", "uniform", "fixed"}, "record keys: none (round robin), uniform (random key), fixed (one key); default none", func(s *Spec) *string { return &s.Producers.Keys }),
	intP("producers.max.buffered.records", []string{"max.buffered.records"}, 1, 1000000, "kgo MaxBufferedRecords per producer, default 10000", func(s *Spec) *int { return &s.Producers.MaxBufferedRecords }),
	intP("producers.delivery.timeout.ms", []string{"delivery.timeout.ms"}, 0, 24*3600*1000, "kgo RecordDeliveryTimeout (ms, 0 = none), default 120000", func(s *Spec) *int64 { return &s.Producers.DeliveryTimeoutMs }),

	intP("producers.retries", []string{"retries"}, 0, math.MaxInt32, "producer retries of a retriable error, default 2147483647", func(s *Spec) *int { return &s.Producers.Retries }),
	boolP("producers.enable.idempotence", []string{"enable.idempotence"}, "idempotent producers (acks=all only), default true", func(s *Spec) *bool { return &s.Producers.EnableIdempotence }),

	intP("consumers.count", nil, 0, 64, "end-to-end consumers (each reads every partition; with consumers.group.id: members of the group), default 1", func(s *Spec) *int { return &s.Consumers.Count }),
	{Key: "consumers.group.id", Aliases: []string{"group.id"}, Help: "consumer group the consumers join (they then share the partitions and commit offsets); empty = no group (default)",
		set: func(s *Spec, v string) error {
			if strings.ContainsAny(v, "\n\t") || len(v) > 255 {
				return fmt.Errorf("consumers.group.id: %q; allowed an id of at most 255 characters without tabs or newlines (empty = no group)", v)
			}
			s.Consumers.GroupID = v
			return nil
		}, get: func(s *Spec) any { return s.Consumers.GroupID }},
	enumP("consumers.group.balancer", []string{"partition.assignment.strategy"}, []string{"range", "roundrobin", "sticky", "cooperative-sticky"}, "group assignor, default range", func(s *Spec) *string { return &s.Consumers.GroupBalancer }),
	intP("consumers.auto.commit.interval.ms", []string{"auto.commit.interval.ms"}, 1, 3600*1000, "group members commit their position this often (ms), default 5000", func(s *Spec) *int { return &s.Consumers.AutoCommitIntervalMs }),
	intP("group.initial.rebalance.delay.ms", []string{"broker.group.initial.rebalance.delay.ms"}, 0, 600000, "embedded coordinator's delay of a new group's first rebalance (ms); harness default 100 (Kafka 3000)", func(s *Spec) *int { return &s.Broker.GroupInitialRebalanceDelayMs }),
	intP("offsets.topic.num.partitions", []string{"broker.offsets.topic.num.partitions"}, 1, 1000, "partitions of the embedded cluster's __consumer_offsets, default 50", func(s *Spec) *int { return &s.Broker.OffsetsTopicNumPartitions }),
}

func validTopic(v string) bool {
	if v == "" || len(v) > 249 || v == "." || v == ".." {
		return false
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
