package target

import (
	"fmt"
	"sort"
	"strings"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/workloads/spec"
)

// Settings on a kafka:// cluster. The embedded cluster is built from the spec, so every setting
// holds there by construction; a Kafka cluster has its own configuration, and a run against it
// applies the spec's settings the way Kafka lets a client change them (ConfigSession):
//
//   - topic settings (topic.min.insync.replicas always; unclean.leader.election.enable,
//     log.segment.bytes, log.retention.bytes, log.retention.ms, flush.messages, flush.ms when
//     the spec gives them) become the benchmark topic's configs (min.insync.replicas,
//     unclean.leader.election.enable, segment.bytes, retention.bytes, retention.ms,
//     flush.messages, flush.ms) at CreateTopics, or, on a topic that exists with other values,
//     are changed with IncrementalAlterConfigs and restored at the end;
//   - broker settings whose Kafka dynamic update mode is cluster-wide (num.replica.fetchers,
//     max.connections, max.connections.per.ip; DynamicBrokerConfig.scala) are set, when the
//     spec gives them and the brokers report another value, with IncrementalAlterConfigs on
//     the cluster-wide default (resource name ""), the run waits until DescribeConfigs shows
//     the value on every broker, and the original is restored at the end of the run or sweep,
//     also on error and Ctrl-C. num.replica.fetchers is a thread pool: Kafka refuses a change
//     to less than half or more than double the current count (DynamicThreadPool), so a change
//     from 1 to 4 goes 1 -> 2 -> 4, each step waited for;
//   - broker settings that are read-only in Kafka (replica.fetch.max.bytes,
//     replica.fetch.wait.max.ms, replica.lag.time.max.ms, ...: set in server.properties, a
//     restart to change) and isrbench's own broker switches (isrbench.io, ...: `isrbench
//     serve --set`) cannot be changed by the run. When the spec gives one, every broker must
//     already report that value through DescribeConfigs, or the user says it is set with
//     --assume key=value; otherwise the run stops before it starts, naming the key. One given
//     at the harness's default (default.yaml lists them all) is not required: result.json
//     records the brokers' value. A sweep over such a key is refused before the first point
//     (restart the brokers per value);
//   - settings of the harness's embedded cluster alone (brokers, isrbench.min.free.disk) are
//     not a cluster's; result.json notes what was ignored.
//
// What was set, how, and what the brokers reported afterwards is result.json target_config.

// kafkaMode is how a spec setting reaches a Kafka cluster.
type kafkaMode int

const (
	kafkaTopic    kafkaMode = iota + 1 // a topic config: CreateTopics, or IncrementalAlterConfigs on the topic
	kafkaDynamic                       // a cluster-wide dynamic broker config: IncrementalAlterConfigs on the cluster default
	kafkaReadOnly                      // read-only on Kafka brokers: must already hold (--assume)
	kafkaHarness                       // the embedded cluster's or the harness's own: not a cluster setting
)

func (m kafkaMode) String() string {
	switch m {
	case kafkaTopic:
		return "topic config"
	case kafkaDynamic:
		return "cluster-wide dynamic broker config"
	case kafkaReadOnly:
		return "read-only broker config"
	case kafkaHarness:
		return "embedded-cluster setting"
	}
	return "unknown"
}

// kafkaSetting describes one spec setting on a Kafka cluster.
type kafkaSetting struct {
	mode kafkaMode
	// name is Kafka's name of the config on its resource: the topic config for kafkaTopic,
	// the broker config otherwise.
	name string
	// threadPool: Kafka refuses a change below half or above double the current value.
	threadPool bool
	// kafkaDefault is Kafka's default, the starting point of the steps of a thread pool whose
	// brokers report no value.
	kafkaDefault int
}

// kafkaSettings maps each broker-side spec key (canonical) to how it reaches a Kafka cluster.
// Keys not listed are the harness's client side (producers, consumers, duration, ...). Every
// key of a config registry entry (core/config) is derived from it (kafkaSettingOf): a topic
// config when the registry names one, else dynamic when Kafka's "Dynamic Update Mode" is
// (DynamicBrokerConfig.AllDynamicConfigs, 3.x/4.x), else read-only; the others are listed
// here. TestKafkaSettingsCoverBrokerKeys keeps the table complete.
var kafkaSettings = deriveKafkaSettings(map[string]kafkaSetting{
	"topic.min.insync.replicas": {mode: kafkaTopic, name: "min.insync.replicas"},
	"brokers":                   {mode: kafkaHarness},
	"isrbench.min.free.disk":    {mode: kafkaHarness},
	// The embedded cluster's replication listener; a kafka:// cluster has its own and a run
	// refuses any other value there (CheckClientTarget).
	"security.inter.broker.protocol": {mode: kafkaHarness},
})

// kafkaSettingOf is how the registry entry e reaches a Kafka cluster.
func kafkaSettingOf(e *config.Entry) kafkaSetting {
	switch {
	case e.TopicConfig != "":
		return kafkaSetting{mode: kafkaTopic, name: e.TopicConfig}
	case e.Update != config.ReadOnly:
		ks := kafkaSetting{mode: kafkaDynamic, name: e.Name, threadPool: e.ThreadPool}
		if e.ThreadPool {
			ks.kafkaDefault = int(e.DefaultInt())
		}
		return ks
	}
	return kafkaSetting{mode: kafkaReadOnly, name: e.Name}
}

// deriveKafkaSettings adds to own the setting of every param of a registry entry.
func deriveKafkaSettings(own map[string]kafkaSetting) map[string]kafkaSetting {
	for _, p := range spec.Params() {
		if p.Entry() != "" {
			own[p.Key] = kafkaSettingOf(config.Get(p.Entry()))
		}
	}
	return own
}

// ParseAssume parses --assume flags ("key=value"): broker settings already in effect on a
// kafka:// cluster, which the run then neither changes nor requires the brokers to report.
// Each key must be a broker setting of the spec (see kafkaSettings) and appear once. It
// returns canonical key -> value; apply them to the spec with ApplyAssume.
func ParseAssume(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("--assume %q: want key=value", f)
		}
		p := spec.Lookup(k)
		if p == nil {
			return nil, fmt.Errorf("--assume %s: unknown key %q (known keys: %s)", f, k, strings.Join(spec.Keys(), ", "))
		}
		ks, ok := kafkaSettings[p.Key]
		if !ok || ks.mode == kafkaHarness {
			return nil, fmt.Errorf("--assume %s: %s is not a broker setting; allowed %s", f, p.Key, strings.Join(assumableKeys(), ", "))
		}
		if _, dup := out[p.Key]; dup {
			return nil, fmt.Errorf("--assume %s: %s assumed twice", f, p.Key)
		}
		if err := p.Set(spec.DefaultSpec(), v); err != nil {
			return nil, fmt.Errorf("--assume %s: %w", f, err)
		}
		out[p.Key] = v
	}
	return out, nil
}

func assumableKeys() []string {
	var ks []string
	for k, s := range kafkaSettings {
		if s.mode != kafkaHarness {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return ks
}

// CheckSweepOnTarget refuses, before any run, the axes a kafka:// cluster cannot be swept
// over: read-only broker settings (a restart per value), the embedded cluster's own
// settings, and assumed ones (an assumption holds for the whole sweep).
func CheckSweepOnTarget(target string, axes []spec.Axis, assume map[string]string) error {
	if target == "" || target == "embedded" {
		return nil
	}
	for _, ax := range axes {
		ks, ok := kafkaSettings[ax.Key]
		if !ok {
			continue // client side
		}
		if _, assumed := assume[ax.Key]; assumed {
			return fmt.Errorf("%w: sweep over %s with --assume %s: an assumed value holds for every point; drop one", spec.ErrTargetSetting, ax.Key, ax.Key)
		}
		switch ks.mode {
		case kafkaReadOnly:
			return fmt.Errorf("%w: sweep over %s on %s: %s is a read-only broker config (Kafka changes it only with a restart); run one sweep per value, restarting the brokers with it, each with --assume %s=VALUE",
				spec.ErrTargetSetting, ax.Key, target, ks.name, ax.Key)
		case kafkaHarness:
			return fmt.Errorf("%w: sweep over %s on %s: it sizes the embedded cluster, not a kafka:// one", spec.ErrTargetSetting, ax.Key, target)
		}
	}
	return nil
}
