package controller

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/config"
)

// Config types, as Kafka's ConfigDef types (DescribeConfigs' config_type).
const (
	TypeBoolean = "boolean"
	TypeString  = "string"
	TypeInt     = "int"
	TypeShort   = "short"
	TypeLong    = "long"
	TypeList    = "list"
)

// TopicConfigDef describes one topic config: its type, the broker config that gives its
// default when the topic has no override (Kafka's ServerTopicConfigSynonyms; "" for the
// throttled replicas lists, which have none) and Kafka's default of both. Type and default
// are the registry's (core/config).
type TopicConfigDef struct {
	Name          string
	Type          string
	BrokerSynonym string
	Default       string
}

// topicConfigDefs lists every topic config CreateTopic accepts (topicConfigs' keys), sorted
// by name: the registry's topic synonyms and the throttled replicas lists.
var topicConfigDefs = func() []TopicConfigDef {
	defs := []TopicConfigDef{
		{Name: ConfigLeaderThrottledReplicas, Type: TypeList},
		{Name: ConfigFollowerThrottledReplicas, Type: TypeList},
	}
	for _, e := range config.Entries() {
		if e.TopicConfig != "" {
			defs = append(defs, TopicConfigDef{Name: e.TopicConfig, Type: string(e.Type), BrokerSynonym: e.Name, Default: e.Default})
		}
	}
	slices.SortFunc(defs, func(a, b TopicConfigDef) int { return strings.Compare(a.Name, b.Name) })
	return defs
}()

// TopicConfigDefs returns the definitions of every supported topic config, sorted by name.
func TopicConfigDefs() []TopicConfigDef { return slices.Clone(topicConfigDefs) }

// ConfigChange is a change of one resource's config overrides: IncrementalAlterConfigs'
// SET and DELETE operations, or (Replace) legacy AlterConfigs, which sets exactly Set and
// deletes every other override. ValidateOnly checks the change without applying it.
type ConfigChange struct {
	Set          map[string]string
	Delete       []string
	Replace      bool
	ValidateOnly bool
}

// dynamicBrokerConfigs are the broker configs Kafka updates at run time (DynamicBrokerConfig:
// DynamicThreadPool's num.replica.fetchers, DynamicLogConfig's broker synonyms of topic
// configs, the replication quotas) that isrbench applies: the brokers resize their fetcher
// pools, reconfigure their logs and replicas and their throttles; the controller applies
// unclean.leader.election.enable; message.max.bytes applies to the next produce. The
// synonyms of topic configs whose feature isrbench lacks accept only Kafka's default (the
// registry's Fixed entries). Type, range and default are the registry's (core/config); the
// value is whether only the cluster-wide default may be set (the controller reads it, and
// isrbench's controller is no broker whose own config could apply).
var dynamicBrokerConfigs = map[string]bool{
	"num.replica.fetchers":                false,
	"min.insync.replicas":                 false,
	"unclean.leader.election.enable":      true,
	"message.max.bytes":                   false,
	"log.segment.bytes":                   false,
	"log.index.interval.bytes":            false,
	"log.retention.bytes":                 false,
	"log.retention.ms":                    false,
	"log.flush.interval.messages":         false,
	"log.flush.interval.ms":               false,
	"log.cleanup.policy":                  false,
	"compression.type":                    false,
	"log.message.timestamp.type":          false,
	"log.roll.ms":                         false,
	"log.index.size.max.bytes":            false,
	"log.segment.delete.delay.ms":         false,
	"log.preallocate":                     false,
	"leader.replication.throttled.rate":   false,
	"follower.replication.throttled.rate": false,
}

// DynamicBrokerConfigNames returns the broker configs that may be changed at run time
// (ChangeBrokerConfig), sorted.
func DynamicBrokerConfigNames() []string { return slices.Sorted(maps.Keys(dynamicBrokerConfigs)) }

// BrokerConfigType returns the type of a dynamic broker config ("" if it is not one).
func BrokerConfigType(name string) string {
	if _, ok := dynamicBrokerConfigs[name]; !ok {
		return ""
	}
	return string(config.Get(name).Type)
}

// ValidateBrokerConfig checks a value of the dynamic broker config name and returns it
// normalized. Errors wrap kerr.InvalidRequest (Kafka's broker-side validation of broker
// configs) and name the key and the allowed values.
func ValidateBrokerConfig(name, value string) (string, error) {
	if _, ok := dynamicBrokerConfigs[name]; !ok {
		return "", fmt.Errorf("cannot update broker config %s dynamically (the dynamic ones: %s): %w",
			name, strings.Join(DynamicBrokerConfigNames(), ", "), kerr.InvalidRequest)
	}
	norm, err := config.Parse(name, value)
	if err != nil {
		return "", fmt.Errorf("broker config %s=%q: %w: %w", name, value, err, kerr.InvalidRequest)
	}
	return norm, nil
}

// validBrokerConfigResource checks a broker-config resource name: "" (the cluster-wide
// default) or a broker id.
func validBrokerConfigResource(res string) error {
	if res == "" {
		return nil
	}
	if n, err := strconv.ParseInt(res, 10, 32); err != nil || n < 0 {
		return fmt.Errorf("broker resource %q: node id must be an integer >= 0 or \"\" for the cluster-wide default: %w", res, kerr.InvalidRequest)
	}
	return nil
}

// BrokerConfigs returns the dynamic broker configs of resource: "" the cluster-wide
// defaults (DYNAMIC_DEFAULT_BROKER_CONFIG), "<id>" broker id's own
// (DYNAMIC_BROKER_CONFIG). A private copy, never nil.
func (c *Controller) BrokerConfigs(resource string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := maps.Clone(c.mu.brokerConfigs[resource])
	if out == nil {
		out = map[string]string{}
	}
	return out
}

// effectiveBrokerConfigsLocked is broker id's dynamic configs: the cluster-wide defaults
// overlaid by its own (mu held; a new map).
func (c *Controller) effectiveBrokerConfigsLocked(id int32) map[string]string {
	out := maps.Clone(c.mu.brokerConfigs[""])
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, c.mu.brokerConfigs[strconv.Itoa(int(id))])
	return out
}

// EffectiveBrokerConfigs returns broker id's dynamic configs: the cluster-wide defaults
// overlaid by its own. A private copy, never nil.
func (c *Controller) EffectiveBrokerConfigs(id int32) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.effectiveBrokerConfigsLocked(id)
}

// applyChange computes the overrides after ch from cur, validating each set value with
// check; del checks that a deleted key is known.
func applyChange(cur map[string]string, ch ConfigChange, check func(k, v string) (string, error), known func(k string) error) (map[string]string, error) {
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]string{}
	}
	if ch.Replace {
		clear(next)
	}
	for _, k := range slices.Sorted(maps.Keys(ch.Set)) {
		v, err := check(k, ch.Set[k])
		if err != nil {
			return nil, err
		}
		next[k] = v
	}
	for _, k := range ch.Delete {
		if err := known(k); err != nil {
			return nil, err
		}
		if _, both := ch.Set[k]; both {
			return nil, fmt.Errorf("config %s is both set and deleted: %w", k, kerr.InvalidRequest)
		}
		delete(next, k)
	}
	return next, nil
}

// ChangeBrokerConfig changes the dynamic broker configs of resource ("" the cluster-wide
// default, "<id>" one registered broker), atomically: every key must be a dynamic broker
// config (DynamicBrokerConfigNames) with a valid value, and
// unclean.leader.election.enable may only be set cluster-wide. The new set is recorded in
// the metadata log and delivered to the brokers it concerns (an Update with BrokerConfigs:
// each broker's effective dynamic configs), which apply it; enabling
// unclean.leader.election.enable elects the offline partitions of the topics without an
// override at once.
//
// Errors wrap kerr.InvalidRequest (a bad resource name, a key that is not dynamic, a bad
// value, a key both set and deleted) or kerr.BrokerIDNotRegistered.
func (c *Controller) ChangeBrokerConfig(resource string, ch ConfigChange) (err error) {
	if err := validBrokerConfigResource(resource); err != nil {
		return err
	}
	var snap offsetSnapshot
	if resource == "" && !ch.ValidateOnly {
		if v, err := ValidateBrokerConfig(ConfigUncleanLeaderElectionEnable, ch.Set[ConfigUncleanLeaderElectionEnable]); err == nil && v == "true" {
			snap = c.offlineOffsets(func(string) bool { return true })
		}
	}
	c.lock()
	defer c.unlockErr(&err)
	if resource != "" {
		id, _ := strconv.Atoi(resource)
		if _, ok := c.mu.brokers[int32(id)]; !ok {
			return fmt.Errorf("broker resource %q: broker %d is not registered: %w", resource, id, kerr.BrokerIDNotRegistered)
		}
	}
	check := func(k, v string) (string, error) {
		if resource != "" && dynamicBrokerConfigs[k] {
			return "", fmt.Errorf("broker config %s may only be set as the cluster-wide default (resource \"\"), not for broker %s: %w", k, resource, kerr.InvalidRequest)
		}
		return ValidateBrokerConfig(k, v)
	}
	known := func(k string) error {
		if _, ok := dynamicBrokerConfigs[k]; !ok {
			_, err := ValidateBrokerConfig(k, "")
			return err
		}
		return nil
	}
	next, err := applyChange(c.mu.brokerConfigs[resource], ch, check, known)
	if err != nil {
		return fmt.Errorf("alter broker configs %q: %w", resource, err)
	}
	if ch.ValidateOnly {
		return nil
	}
	wasUnclean := c.clusterUncleanLocked()
	if len(next) == 0 {
		delete(c.mu.brokerConfigs, resource)
	} else {
		c.mu.brokerConfigs[resource] = next
	}
	c.recordBrokerConfigLocked(resource)
	for id := range c.mu.brokers {
		if resource == "" || resource == strconv.Itoa(int(id)) {
			c.notifyBrokerConfigsLocked(id)
		}
	}
	if resource == "" && !wasUnclean {
		for _, name := range c.sortedTopicsLocked() {
			if !c.uncleanLocked(name) {
				continue
			}
			c.electOfflineLocked(c.mu.topics[name], snap)
		}
	}
	return nil
}

// ChangeTopicConfig changes a topic's config overrides atomically (IncrementalAlterConfigs'
// SET and DELETE, or legacy AlterConfigs with Replace): each key is validated as in
// CreateTopic, against the topic's replication factor. The change is recorded and delivered
// to the brokers hosting the topic (a TopicUpdate), which apply it to their replicas. When
// it enables unclean leader election, the topic's offline partitions get an unclean
// election at once (as the KRaft controller does).
//
// Errors: kerr.UnknownTopicOrPartition for an unknown topic; kerr.InvalidConfig naming the
// key for an unknown key or a bad value; kerr.InvalidRequest for a key both set and
// deleted.
func (c *Controller) ChangeTopicConfig(topic string, ch ConfigChange) (err error) {
	// Offsets for a possible unclean election, queried without the lock.
	var snap offsetSnapshot
	if !ch.ValidateOnly {
		snap = c.offlineOffsets(func(name string) bool { return name == topic })
	}
	c.lock()
	defer c.unlockErr(&err)
	t, ok := c.mu.topics[topic]
	if !ok {
		return fmt.Errorf("alter topic config %q: %w", topic, kerr.UnknownTopicOrPartition)
	}
	rf := int16(len(t.parts[0].Replicas))
	check := func(k, v string) (string, error) { return ValidateTopicConfig(k, v, rf) }
	known := func(k string) error {
		if _, ok := topicConfigs[k]; !ok {
			return fmt.Errorf("delete: unknown topic config name %q (supported: %s): %w", k, strings.Join(SupportedTopicConfigs(), ", "), kerr.InvalidConfig)
		}
		return nil
	}
	next, err := applyChange(t.configs, ch, check, known)
	if err != nil {
		return fmt.Errorf("alter topic config %q: %w", topic, err)
	}
	if ch.ValidateOnly {
		return nil
	}
	t.configs = next
	c.recordTopicLocked(t)
	c.notifyTopicLocked(t, false)
	if c.uncleanLocked(topic) {
		c.electOfflineLocked(t, snap)
	}
	return nil
}

// electOfflineLocked elects a leader, uncleanly if it must, for every offline partition of
// t: unclean.leader.election.enable was just turned on for it (c.mu held; snap holds the
// offsets the unclean elections lose).
func (c *Controller) electOfflineLocked(t *topicState, snap offsetSnapshot) {
	for i := range t.parts {
		st := &t.parts[i]
		if st.Leader != NoLeader {
			continue
		}
		if leader, unclean := c.chooseLeaderLocked(st, true); leader != NoLeader {
			c.installLeaderLocked(st, leader, unclean, snap)
		}
	}
}

// offlineOffsets asks Offsets (if set), without the lock, about the replicas of the offline
// partitions of the topics for which want returns true: for the lost-offset count of the
// unclean elections a config change may trigger.
func (c *Controller) offlineOffsets(want func(topic string) bool) offsetSnapshot {
	c.mu.Lock()
	o := c.mu.offsets
	var jobs []offJob
	if o != nil {
		for name, t := range c.mu.topics {
			if !want(name) {
				continue
			}
			for i := range t.parts {
				if t.parts[i].Leader == NoLeader {
					jobs = append(jobs, offJob{tpKey{name, int32(i)}, slices.Clone(t.parts[i].Replicas)})
				}
			}
		}
	}
	c.mu.Unlock()
	return queryOffsets(o, jobs)
}
