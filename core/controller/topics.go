package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/config"
)

// MaxTopicNameLength is Kafka's limit on topic name length.
const MaxTopicNameLength = 249

// MaxPartitions bounds the partition count of one topic (an isrbench limit,
// so a bad CreateTopics request cannot exhaust memory; Kafka has none).
const MaxPartitions = 100000

// Topic config names (Kafka's TopicConfig names) that CreateTopic accepts.
const (
	ConfigMinInsyncReplicas           = "min.insync.replicas"
	ConfigUncleanLeaderElectionEnable = "unclean.leader.election.enable"
	ConfigRetentionMs                 = "retention.ms"
	ConfigRetentionBytes              = "retention.bytes"
	ConfigSegmentBytes                = "segment.bytes"
	ConfigSegmentMs                   = "segment.ms"
	ConfigSegmentIndexBytes           = "segment.index.bytes"
	ConfigIndexIntervalBytes          = "index.interval.bytes"
	ConfigFlushMessages               = "flush.messages"
	ConfigFlushMs                     = "flush.ms"
	ConfigCleanupPolicy               = "cleanup.policy"
	ConfigMaxMessageBytes             = "max.message.bytes"
	ConfigMessageTimestampType        = "message.timestamp.type"
	ConfigCompressionType             = "compression.type"
	ConfigFileDeleteDelayMs           = "file.delete.delay.ms"
	ConfigPreallocate                 = "preallocate"
	// The replicas the replication throttles apply to (KIP-73): lists of
	// partition:broker, or * for all.
	ConfigLeaderThrottledReplicas   = "leader.replication.throttled.replicas"
	ConfigFollowerThrottledReplicas = "follower.replication.throttled.replicas"
)

type configCheck func(v string, rf int16) (string, error)

// topicConfigs maps each supported key to its validator, which returns the normalized value:
// the registry's check of its broker synonym (core/config: Kafka's ranges, and for the
// features isrbench does not implement only Kafka's default, so nothing is accepted and
// ignored), min.insync.replicas at most the replication factor, and the throttled replicas
// lists. Every accepted value is applied: the brokers reconfigure their replicas on a change
// (min.insync.replicas, retention, segment size, index interval, flush policy,
// max.message.bytes), the controller applies unclean.leader.election.enable.
var topicConfigs = func() map[string]configCheck {
	m := map[string]configCheck{
		ConfigLeaderThrottledReplicas:   throttledReplicas,
		ConfigFollowerThrottledReplicas: throttledReplicas,
	}
	for _, e := range config.Entries() {
		if e.TopicConfig != "" {
			m[e.TopicConfig] = registryCheck(e.Name)
		}
	}
	minISR := m[ConfigMinInsyncReplicas]
	m[ConfigMinInsyncReplicas] = func(v string, rf int16) (string, error) {
		norm, err := minISR(v, rf)
		if err == nil && len(norm) > 0 {
			if n, _ := strconv.ParseInt(norm, 10, 64); n > int64(rf) {
				return "", fmt.Errorf("%d is more than the replication factor %d; allowed 1..%d", n, rf, rf)
			}
		}
		return norm, err
	}
	return m
}()

// registryCheck checks a topic config by the registry entry of its broker synonym.
func registryCheck(name string) configCheck {
	return func(v string, _ int16) (string, error) { return config.Parse(name, v) }
}

// SupportedTopicConfigs returns the topic config names CreateTopic accepts,
// sorted.
func SupportedTopicConfigs() []string {
	return slices.Sorted(maps.Keys(topicConfigs))
}

// ValidateTopicConfig checks one topic config for a topic of replication
// factor rf and returns its normalized value (trimmed; booleans lower-case).
// Errors wrap kerr.InvalidConfig and name the key and the allowed values.
func ValidateTopicConfig(key, value string, rf int16) (string, error) {
	check, ok := topicConfigs[key]
	if !ok {
		return "", fmt.Errorf("unknown topic config name %q (supported: %s): %w",
			key, strings.Join(SupportedTopicConfigs(), ", "), kerr.InvalidConfig)
	}
	norm, err := check(value, rf)
	if err != nil {
		return "", fmt.Errorf("config %s=%q: %w: %w", key, value, err, kerr.InvalidConfig)
	}
	return norm, nil
}

// ValidateTopicName checks name against Kafka's topic name rules: 1 to 249
// characters from [a-zA-Z0-9._-], not "." or "..". Errors wrap
// kerr.InvalidTopicException.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is empty: %w", kerr.InvalidTopicException)
	case name == "." || name == "..":
		return fmt.Errorf("topic name cannot be %q: %w", name, kerr.InvalidTopicException)
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("topic name is %d characters long, the maximum is %d: %w",
			len(name), MaxTopicNameLength, kerr.InvalidTopicException)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' ||
			ch == '.' || ch == '_' || ch == '-') {
			return fmt.Errorf("topic name %q contains %q at byte %d; legal characters are ASCII alphanumerics, '.', '_' and '-': %w",
				name, ch, i, kerr.InvalidTopicException)
		}
	}
	return nil
}

// EnsureTopic creates an internal topic (__consumer_offsets, __transaction_state) on its
// first use, or returns its partitions when it exists already (created meanwhile by
// another broker's first use).
func (c *Controller) EnsureTopic(name string, partitions int32, rf int16, configs map[string]string) ([]PartitionState, error) {
	parts, err := c.CreateTopic(name, partitions, rf, configs)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		if parts, ok := c.Partitions(name); ok {
			return parts, nil
		}
	}
	return parts, err
}

// CreateTopic creates a topic with the given partition count, replication
// factor and config overrides, places its replicas over the alive brokers
// (leaders balanced) and returns the initial partition states: leader =
// first replica, ISR = all replicas, both epochs 0.
//
// Replica placement: with the n alive brokers sorted by id and s the topic's
// start index (the number of topics created before it, mod n), partition p
// gets replicas brokers[(s + p + i) % n] for i in [0, rf). Each broker thus
// leads either floor or ceil(partitions/n) partitions.
//
// Errors (each names the offending field and wraps a kerr): the name is
// invalid (InvalidTopicException) or taken, or collides with an existing
// name once '.' and '_' are identified (TopicAlreadyExists /
// InvalidTopicException, as Kafka); partitions < 1 or > MaxPartitions
// (InvalidPartitions); rf < 1 or > alive brokers (InvalidReplicationFactor);
// an unknown config key or bad value (InvalidConfig).
func (c *Controller) CreateTopic(name string, partitions int32, rf int16, configs map[string]string) (_ []PartitionState, err error) {
	c.lock()
	defer c.unlockErr(&err)
	norm, err := c.validateCreateLocked(name, partitions, rf, configs)
	if err != nil {
		return nil, err
	}
	alive := c.aliveIDsLocked()
	n := len(alive)
	start := c.mu.created % n
	assignment := make([][]int32, partitions)
	for p := range assignment {
		replicas := make([]int32, rf)
		for i := range replicas {
			replicas[i] = alive[(start+p+i)%n]
		}
		assignment[p] = replicas
	}
	return c.addTopicLocked(name, norm, assignment)
}

// addTopicLocked creates topic name with its validated configs and partition p on
// assignment[p] (each with at least one alive broker): ISR = the alive replicas, leader = the
// first of them, both epochs 0.
func (c *Controller) addTopicLocked(name string, norm map[string]string, assignment [][]int32) ([]PartitionState, error) {
	id, err := c.newTopicIDLocked()
	if err != nil {
		return nil, fmt.Errorf("create topic %q: %w", name, err)
	}
	c.mu.created++
	t := &topicState{name: name, seq: int64(c.mu.created), id: id, configs: norm, parts: make([]PartitionState, len(assignment))}
	out := make([]PartitionState, len(assignment))
	for p, replicas := range assignment {
		isr := slices.DeleteFunc(slices.Clone(replicas), func(b int32) bool { return !c.aliveLocked(b) })
		t.parts[p] = PartitionState{
			Topic:     name,
			Partition: int32(p),
			Leader:    isr[0],
			Replicas:  slices.Clone(replicas),
			ISR:       isr,
		}
		out[p] = t.parts[p].Clone()
	}
	c.mu.topics[name] = t
	c.recordTopicLocked(t)
	for p := range t.parts {
		c.recordPartitionLocked(&t.parts[p])
		c.notifyLocked(&t.parts[p])
	}
	return out, nil
}

// ValidateCreateTopic runs CreateTopic's checks without creating anything
// (for CreateTopics with validate_only).
func (c *Controller) ValidateCreateTopic(name string, partitions int32, rf int16, configs map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.validateCreateLocked(name, partitions, rf, configs)
	return err
}

func (c *Controller) validateCreateLocked(name string, partitions int32, rf int16, configs map[string]string) (map[string]string, error) {
	if err := c.checkNewTopicNameLocked(name); err != nil {
		return nil, err
	}
	if partitions < 1 || partitions > MaxPartitions {
		return nil, fmt.Errorf("create topic %q: number of partitions %d must be in [1, %d]: %w",
			name, partitions, MaxPartitions, kerr.InvalidPartitions)
	}
	alive := len(c.aliveIDsLocked())
	if rf < 1 || int(rf) > alive {
		return nil, fmt.Errorf("create topic %q: replication factor %d must be in [1, %d alive brokers]: %w",
			name, rf, alive, kerr.InvalidReplicationFactor)
	}
	if err := c.checkCapacityLocked(fmt.Sprintf("create topic %q", name), int64(partitions)*int64(rf)); err != nil {
		return nil, err
	}
	return normalizeTopicConfigs(name, configs, rf)
}

// checkNewTopicNameLocked checks that name is a valid topic name no topic has or collides
// with.
func (c *Controller) checkNewTopicNameLocked(name string) error {
	if err := ValidateTopicName(name); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	if _, ok := c.mu.topics[name]; ok {
		return fmt.Errorf("create topic %q: topic already exists: %w", name, kerr.TopicAlreadyExists)
	}
	if strings.ContainsAny(name, "._") {
		canon := collisionName(name)
		for other := range c.mu.topics {
			if collisionName(other) == canon {
				return fmt.Errorf("create topic %q: collides with existing topic %q (names may not differ only by '.' versus '_'): %w",
					name, other, kerr.InvalidTopicException)
			}
		}
	}
	return nil
}

// normalizeTopicConfigs validates a new topic's configs for replication factor rf and
// returns their normalized values.
func normalizeTopicConfigs(name string, configs map[string]string, rf int16) (map[string]string, error) {
	norm := make(map[string]string, len(configs))
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		v, err := ValidateTopicConfig(k, configs[k], rf)
		if err != nil {
			return nil, fmt.Errorf("create topic %q: %w", name, err)
		}
		norm[k] = v
	}
	return norm, nil
}

func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// TopicConfig returns a copy of the topic's config overrides (normalized
// values as accepted by CreateTopic), or nil if the topic does not exist.
func (c *Controller) TopicConfig(topic string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.mu.topics[topic]
	if !ok {
		return nil
	}
	return maps.Clone(t.configs)
}

// TopicID returns the id of the topic's current incarnation (never zero); ok is false if the
// topic does not exist.
func (c *Controller) TopicID(topic string) (TopicID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.mu.topics[topic]
	if !ok {
		return TopicID{}, false
	}
	return t.id, true
}

// Topics returns the topic names, sorted.
func (c *Controller) Topics() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.mu.topics))
}

// Partitions returns copies of the topic's partition states, indexed by
// partition id; ok is false if the topic does not exist.
func (c *Controller) Partitions(topic string) ([]PartitionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.mu.topics[topic]
	if !ok {
		return nil, false
	}
	out := make([]PartitionState, len(t.parts))
	for i := range t.parts {
		out[i] = t.parts[i].Clone()
	}
	return out, true
}

// PartitionsOf returns copies of the states of every partition broker hosts a replica of,
// ordered by topic, then partition.
func (c *Controller) PartitionsOf(broker int32) []PartitionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []PartitionState
	for _, name := range c.sortedTopicsLocked() {
		t := c.mu.topics[name]
		for i := range t.parts {
			if slices.Contains(t.parts[i].Replicas, broker) {
				out = append(out, t.parts[i].Clone())
			}
		}
	}
	return out
}

// Partition returns a copy of one partition's state; ok is false if the
// topic or partition does not exist.
func (c *Controller) Partition(topic string, p int32) (PartitionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.partLocked(topic, p)
	if st == nil {
		return PartitionState{}, false
	}
	return st.Clone(), true
}

func (c *Controller) partLocked(topic string, p int32) *PartitionState {
	t, ok := c.mu.topics[topic]
	if !ok || p < 0 || int(p) >= len(t.parts) {
		return nil
	}
	return &t.parts[p]
}

// uncleanLocked reports whether unclean leader election is enabled for the
// topic: its override if set, else the cluster's (clusterUncleanLocked).
func (c *Controller) uncleanLocked(topic string) bool {
	if t, ok := c.mu.topics[topic]; ok {
		if v, ok := t.configs[ConfigUncleanLeaderElectionEnable]; ok {
			return v == "true"
		}
	}
	return c.clusterUncleanLocked()
}

// clusterUncleanLocked is the cluster's unclean.leader.election.enable: the dynamic
// cluster-wide default if set, else Config.UncleanLeaderElectionEnable.
func (c *Controller) clusterUncleanLocked() bool {
	if v, ok := c.mu.brokerConfigs[""][ConfigUncleanLeaderElectionEnable]; ok {
		return v == "true"
	}
	return c.cfg.UncleanLeaderElectionEnable
}

// AlterTopicConfig sets and deletes topic config overrides: ChangeTopicConfig with SET and
// DELETE operations.
func (c *Controller) AlterTopicConfig(topic string, set map[string]string, del []string) error {
	return c.ChangeTopicConfig(topic, ConfigChange{Set: set, Delete: del})
}
