package spec

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/internal/sched"
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
	if err := s.validateClient(); err != nil {
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
	// Kafka refuses to start with a fetch wait longer than the lag time (KafkaConfig).
	wait, lag := s.Settings.Int("replica.fetch.wait.max.ms"), s.Settings.Int("replica.lag.time.max.ms")
	if wait > lag {
		return fmt.Errorf("replica.fetch.wait.max.ms: %d is more than replica.lag.time.max.ms (%d), which Kafka requires; allowed 0..%d", wait, lag, lag)
	}
	if t := s.Settings.Int("replica.socket.timeout.ms"); wait > t {
		return fmt.Errorf("replica.fetch.wait.max.ms: %d is more than replica.socket.timeout.ms (%d), which Kafka requires; allowed 0..%d", wait, t, t)
	}
	if err := s.Settings.Check(); err != nil { // queued.max.request.bytes >= socket.request.max.bytes
		return err
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
	return s.validateTxn()
}

// Set overrides one setting by flat key (full path or short name, see Keys) from its text form.
func (s *Spec) Set(key, value string) error {
	p := Lookup(key)
	if rest, ok := strings.CutPrefix(key, TargetPrefix); ok && p == nil {
		return s.setClientProp(rest, value)
	}
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
	maps.Copy(m, s.clientConfigEntries())
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
	// entry is the config registry entry (core/config) of a broker setting, "" for the
	// harness's and the clients' own keys.
	entry string
	set   func(s *Spec, v string) error
	get   func(s *Spec) any
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
	fmt.Fprintf(&b, "  %-48s %s\n", "target.<client property>", "a Kafka client property of a kafka:// target (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...; as --command-config), or target.bootstrap.servers; secrets recorded as [hidden]")
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
		if params[i].Path() == full {
			return &params[i]
		}
	}
	return nil
}

// Path is the YAML path of p (broker.NAME for a broker setting), its canonical key otherwise.
func (p *Param) Path() string {
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
		path := params[i].Path()
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

// Broker settings of the config registry (core/config): their range, modes and help are
// the registry's; entry names the registry entry (the key is its name but for flush.messages
// and flush.ms, the topic-level names of log.flush.interval.messages / .ms).

// brokerHelp is the help of a registry key: its description, then its default, or
// note where the harness's default is not Kafka's.
func brokerHelp(e *config.Entry, note string) string {
	h := e.Doc
	if note != "" {
		return h + "; " + note
	}
	def := e.Default
	switch {
	case e.Type == config.Duration && def == "0s":
		def = "0"
	case e.Default == strconv.FormatInt(math.MaxInt64, 10):
		def += " (never)"
	}
	return h + ", default " + def
}

// settingB is the broker setting name kept in Spec.Settings under its registry name; its
// spec key is name and its YAML path broker.NAME.
func settingB(name string) Param { return setting(name, name, nil, "") }

// setting is a broker setting kept in Spec.Settings: its spec key (the registry name entry,
// but for flush.messages and flush.ms, the topic-level names of log.flush.interval.messages
// / .ms), its aliases besides broker.KEY, and a note where the harness's default is not
// Kafka's. Its type, range, default and the check of a value are all the registry's
// (core/config).
func setting(key, entry string, aliases []string, note string) Param {
	e := config.Get(entry)
	return Param{Key: key, Aliases: append([]string{"broker." + key}, aliases...), entry: entry,
		Help: fmt.Sprintf("%s (%s %s)", brokerHelp(e, note), e.Type, e.Range()),
		set: func(s *Spec, v string) error {
			err := s.Settings.Set(entry, specText(e, v))
			if err != nil && key != entry {
				err = fmt.Errorf("%s: %w", key, err)
			}
			return err
		},
		get: func(s *Spec) any {
			switch {
			case e.Type.Numeric():
				return s.Settings.Int(entry)
			case e.Type == config.Boolean:
				return s.Settings.Bool(entry)
			case e.Type == config.Duration:
				return s.Settings.Duration(entry)
			}
			return s.Settings.Text(entry)
		}}
}

// specText is v in the form the registry parses, given the spellings a spec has always
// accepted besides it: digits grouped with _ (1_000), a float for the largest long
// (9.223372036854776e+18, as YAML writes it) and Go's boolean spellings (1, t, True).
func specText(e *config.Entry, v string) string {
	switch {
	case e.Type.Numeric():
		t := strings.ReplaceAll(v, "_", "")
		if _, err := strconv.ParseInt(t, 10, 64); err != nil && e.Max == math.MaxInt64 {
			if f, ferr := strconv.ParseFloat(v, 64); ferr == nil && f >= 9.2e18 {
				return strconv.FormatInt(math.MaxInt64, 10)
			}
		}
		return t
	case e.Type == config.Boolean:
		if b, err := strconv.ParseBool(v); err == nil {
			return strconv.FormatBool(b)
		}
	}
	return v
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

func SplitList(v string) []string {
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
	enumP("hw.lag.client", nil, []string{"auto", "on", "off"}, "measure the HW lag a client observes (a fetch parked at the HW on every leader; it costs the cluster a fetch per HW advance): auto = on for kafka:// targets, off on embedded and kfake; default auto", func(s *Spec) *string { return &s.HWLagClient }),
	enumP("sched.policy", nil, sched.Policies, "kernel scheduling policy of every thread of the harness process (the embedded cluster, kfake and the clients alike), set before the target starts: batch = SCHED_BATCH (a thread woken does not preempt the one running: the Go runtime's wake-ups no longer interrupt the thread that made them), other = SCHED_OTHER, inherit = as the process was started (chrt); default batch", func(s *Spec) *string { return &s.SchedPolicy }),
	{Key: "description", Help: "free text",
		set: func(s *Spec, v string) error { s.Description = v; return nil },
		get: func(s *Spec) any { return s.Description }},
	intP("brokers", nil, 1, 16, "embedded cluster size, default 3", func(s *Spec) *int { return &s.Brokers }),
	durP("duration", nil, 100*time.Millisecond, 24*time.Hour, "measurement window, default 20s", func(s *Spec) *time.Duration { return &s.Duration }),
	durP("warmup", nil, 0, time.Hour, "warm-up before measurement (samples discarded), default 5s", func(s *Spec) *time.Duration { return &s.Warmup }),
	intP("probe.records", nil, 0, 1000000, "records produced one at a time before the load (each sent when the previous one is acknowledged; the first producer group's acks and message.size, round robin over the first 100 partitions at most, each written once untimed first): the service time the load's ack p50 and p99 are reported against (queueing, result.json probe); 0 = off, default 1000", func(s *Spec) *int { return &s.ProbeRecords }),
	intP("reassign.throttle", nil, 0, math.MaxInt64, "replication throttle of the reassign faults' catch-up (bytes/s, as kafka-reassign-partitions --throttle; 0 = none), default 0", func(s *Spec) *int64 { return &s.ReassignThrottle }),

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

	settingB("num.replica.fetchers"),
	settingB("replica.fetch.wait.max.ms"),
	settingB("replica.fetch.backoff.ms"),
	settingB("replica.fetch.min.bytes"),
	settingB("replica.fetch.max.bytes"),
	settingB("replica.fetch.response.max.bytes"),
	settingB("replica.socket.timeout.ms"),
	settingB("replica.lag.time.max.ms"),
	settingB("unclean.leader.election.enable"),
	settingB("broker.session.timeout.ms"),
	setting("log.segment.bytes", "log.segment.bytes", nil, "harness default 67108864 (Kafka 1073741824) so retention, which never deletes the active segment, keeps the disk bounded"),
	setting("log.retention.bytes", "log.retention.bytes", []string{"retention.bytes"}, "harness default 268435456 (Kafka -1): a replica holds at most about retention.bytes + log.segment.bytes"),
	setting("log.retention.ms", "log.retention.ms", []string{"retention.ms"}, ""),
	setting("log.retention.check.interval.ms", "log.retention.check.interval.ms", nil, "harness default 1000 (Kafka 300000)"),
	{Key: "isrbench.min.free.disk", Aliases: []string{"broker.isrbench.min.free.disk", "min.free.disk"},
		Help: "stop the run when the data dir's filesystem has less free space: bytes (2147483648), a size (2GiB, 500MiB, 10GB) or a percentage of the filesystem (5%); 0 = off; default 2GiB",
		set: func(s *Spec, v string) error {
			f, err := ParseDiskFloor("isrbench.min.free.disk", v)
			if err == nil {
				s.MinFreeDisk = f
			}
			return err
		}, get: func(s *Spec) any { return s.MinFreeDisk.String() }},
	setting("flush.messages", "log.flush.interval.messages", nil, ""),
	setting("flush.ms", "log.flush.interval.ms", nil, ""),
	settingB("isrbench.zero.copy"),
	enumP("security.inter.broker.protocol", []string{"broker.security.inter.broker.protocol"}, securityProtocols,
		"the embedded cluster's replication listener (with target.security.protocol: TLS material and SCRAM users made for the run), default PLAINTEXT; a kafka:// cluster's is its own",
		func(s *Spec) *string { return &s.InterBrokerProtocol }),
	TargetProtocolParam,
	settingB("isrbench.fetch.sessions"),
	settingB("isrbench.socket.read.when.ready"),
	settingB("isrbench.replica.fetch.uring"),
	settingB("isrbench.produce.answer.inline"),
	settingB("isrbench.housekeeping.changed.only"),
	settingB("isrbench.close.syncfs"),
	settingB("isrbench.partition.metadata.async"),
	settingB("isrbench.log.scrub.enable"),
	settingB("isrbench.log.scrub.interval.ms"),
	settingB("isrbench.log.scrub.bytes.per.second"),
	settingB("isrbench.produce.wake.after.response"),
	settingB("max.incremental.fetch.session.cache.slots"),
	settingB("isrbench.log.tail.bytes"),
	settingB("isrbench.log.drop.behind.bytes"),
	settingB("isrbench.log.drop.behind.wait"),
	settingB("isrbench.leader.epoch.checkpoint.async"),
	settingB("isrbench.zero.copy.min.bytes"),
	settingB("isrbench.io"),
	settingB("isrbench.hw.update"),
	settingB("isrbench.truncate.mode"),
	settingB("replica.high.watermark.checkpoint.interval.ms"),
	settingB("isrbench.housekeeping.stagger"),
	settingB("isrbench.produce.delay"),
	settingB("isrbench.produce.spin"),
	settingB("max.connections"),
	settingB("max.connections.per.ip"),
	settingB("connections.max.idle.ms"),
	settingB("isrbench.request.read.timeout.ms"),
	setting("queued.max.request.bytes", "queued.max.request.bytes", nil, "harness default 104857600 (Kafka -1, unbounded); at least socket.request.max.bytes"),

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
	intP("producers.message.size", []string{"message.size"}, MinMessageSize, 1000000, "record value bytes, default 1024", func(s *Spec) *int { return &s.Producers.MessageSize }),
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
	intP("producers.request.timeout.ms", []string{"request.timeout.ms"}, 1, 24*3600*1000, "produce request timeout the leader applies to an acks=all wait (ms; kgo ProduceRequestTimeout), default 10000", func(s *Spec) *int { return &s.Producers.RequestTimeoutMs }),

	intP("producers.retries", []string{"retries"}, 0, math.MaxInt32, "producer retries of a retriable error, default 2147483647", func(s *Spec) *int { return &s.Producers.Retries }),
	enumP("producers.pacer", nil, PacerModes, "how the open-loop pacer waits for a slot: timerfd (a periodic timer), timerfd-oneshot (armed for each slot), spin, sleep; default timerfd", func(s *Spec) *string { return &s.Producers.Pacer }),
	boolP("producers.pacer.dither", nil, "move each producer's schedule by a random part of one interval every 64 slots, the rate unchanged, so that it cannot stay in phase with the kernel's tick, at which CPU profiles sample (the cost table's cluster/clients split, flame graphs); false: slots exactly 1/rate apart; default true", func(s *Spec) *bool { return &s.Producers.PacerDither }),
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
	setting("group.initial.rebalance.delay.ms", "group.initial.rebalance.delay.ms", nil, "harness default 100 (Kafka 3000)"),
	settingB("offsets.topic.num.partitions"),
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

// Get returns p's value in s.
func (p *Param) Get(s *Spec) any { return p.get(s) }

// Set sets p to v in s, checking v (the error names the key and the allowed values).
func (p *Param) Set(s *Spec, v string) error { return p.set(s, v) }

// Entry is the core/config registry name of a broker setting, "" for the harness's and the
// clients' own keys.
func (p *Param) Entry() string { return p.entry }
