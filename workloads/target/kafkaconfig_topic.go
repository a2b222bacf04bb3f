package target

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/spec"
)

// The benchmark topic's configs on a kafka:// target (see kafkaconfig.go).

// TopicConfigs returns the topic configs a kafka:// target's topic is created with:
// min.insync.replicas, and the topic settings the spec gives (see kafkaconfig.go).
func TopicConfigs(s *spec.Spec) map[string]*string {
	out := map[string]*string{}
	for key, ks := range kafkaSettings {
		if ks.mode == kafkaTopic && (key == "topic.min.insync.replicas" || s.Given(key)) {
			v := specValue(s, key)
			out[ks.name] = &v
		}
	}
	return out
}

// applyTopic gives an existing topic the spec's value of a topic config (a created topic got
// it from CreateTopics) and waits until DescribeConfigs shows it.
func (cs *ConfigSession) applyTopic(ctx context.Context, topic string, ks kafkaSetting, want string, created bool, ts *results.TargetSetting) error {
	cur, src, err := cs.topicConfig(ctx, topic, ks.name)
	if err != nil {
		return err
	}
	ts.Reported = map[string]string{"topic": cur}
	ts.Source = src.String()
	switch {
	case cur == want && created:
		ts.How = "create-topic"
		return nil
	case cur == want:
		ts.How = "already-set"
		return nil
	case created:
		return fmt.Errorf("%w: topic %s was created with %s=%s, but DescribeConfigs reports %q", spec.ErrTargetSetting, topic, ks.name, want, cur)
	}
	if cs.checkOnly {
		ts.How = "waited-for"
	} else {
		if err := cs.needAPI(ctx, apiIncrementalAlterConfigs, "IncrementalAlterConfigs", []string{ks.name + "=" + want + " on the existing topic " + topic}); err != nil {
			return err
		}
		ch := configChange{topic: topic, name: ks.name, ks: ks, origEffective: cur}
		if src == kmsg.ConfigSourceDynamicTopicConfig {
			o := cur
			ch.orig = &o
		}
		if !slices.ContainsFunc(cs.changes, func(c configChange) bool { return c.topic == topic && c.name == ks.name }) {
			cs.changes = append(cs.changes, ch)
		}
		cs.logf("target: topic %s %s=%s (was %s)", topic, ks.name, want, cur)
		if err := cs.alter(ctx, topic, ks.name, &want); err != nil {
			return err
		}
		ts.How = "incremental-alter-configs"
	}
	why := poll.Until(ctx, cs.wait, 100*time.Millisecond, func() string {
		cur, _, err := cs.topicConfig(ctx, topic, ks.name)
		if err != nil {
			return err.Error()
		}
		if cur != want {
			return fmt.Sprintf("reports %q", cur)
		}
		return ""
	})
	if why != "" {
		return fmt.Errorf("topic %s %s=%s: not in effect after %s: %s", topic, ks.name, want, cs.wait, why)
	}
	ts.Reported = map[string]string{"topic": want}
	return nil
}

// topicConfig is one config of a topic as DescribeConfigs reports it ("" when not reported).
func (cs *ConfigSession) topicConfig(ctx context.Context, topic, name string) (string, kmsg.ConfigSource, error) {
	rcs, err := cs.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", 0, fmt.Errorf("DescribeConfigs of topic %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return "", 0, fmt.Errorf("DescribeConfigs of topic %s: %w", topic, err)
	}
	if rc.Err != nil {
		return "", 0, fmt.Errorf("DescribeConfigs of topic %s: %w %s", topic, rc.Err, rc.ErrMessage)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c.MaybeValue(), c.Source, nil
		}
	}
	return "", 0, nil
}
