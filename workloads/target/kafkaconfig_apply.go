package target

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/spec"
)

// apiIncrementalAlterConfigs is the Kafka API key of IncrementalAlterConfigs (KIP-339).
const apiIncrementalAlterConfigs = 44

// ConfigSession applies a spec's settings to a kafka:// cluster (see kafkaconfig.go) and
// restores what it changed. A run makes its own; a sweep makes one for all its points, so a
// setting is restored once, after the last point. Not safe for concurrent use: the runner
// calls it from its goroutine.
type ConfigSession struct {
	adm    *kadm.Client
	assume map[string]string
	// checkOnly: change nothing, wait until the cluster shows the settings (a worker other
	// than the first of a multi-worker run).
	checkOnly bool
	// wait bounds the wait for every broker to show a change.
	wait time.Duration
	logf func(format string, args ...any)

	changes []configChange // in the order made; Restore undoes them in reverse
}

// configChange is one resource config the session changed.
type configChange struct {
	topic string // "" = the brokers' cluster-wide default
	name  string // Kafka's config name
	// orig is the resource's own value before the first change (nil: it had none, restored
	// by DELETE); origEffective what the brokers reported before (thread pools step back to it).
	orig          *string
	origEffective string
	ks            kafkaSetting
}

// CheckOnly makes the session change nothing and wait, up to until at least, for the cluster
// to show the settings (a worker other than the first of a multi-worker run).
func (cs *ConfigSession) CheckOnly(until time.Time) {
	cs.checkOnly = true
	cs.wait = max(cs.wait, time.Until(until))
}

// NewConfigSession returns a session on the cluster adm talks to. assume lists the settings
// the user says are in effect (ParseAssume); logf (may be nil) gets one line per change.
func NewConfigSession(adm *kadm.Client, assume map[string]string, logf func(string, ...any)) *ConfigSession {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &ConfigSession{adm: adm, assume: assume, wait: 30 * time.Second, logf: logf}
}

// brokerView is what DescribeConfigs says of one config on every broker: broker id -> value
// (absent: not reported) and source.
type brokerView struct {
	value  map[int32]string
	source map[int32]kmsg.ConfigSource
}

func (v brokerView) all(ids []int32, want string) bool {
	for _, id := range ids {
		if got, ok := v.value[id]; !ok || got != want {
			return false
		}
	}
	return true
}

func (v brokerView) String() string {
	ids := make([]int32, 0, len(v.value))
	for id := range v.value {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("broker %d: %s (%s)", id, v.value[id], v.source[id]))
	}
	if len(parts) == 0 {
		return "not reported by any broker"
	}
	return strings.Join(parts, ", ")
}

// describeBrokers returns, for each config name, what every broker reports.
func (cs *ConfigSession) describeBrokers(ctx context.Context, ids []int32, names []string) (map[string]brokerView, error) {
	rcs, err := cs.adm.DescribeBrokerConfigs(ctx, ids...)
	if err != nil {
		return nil, fmt.Errorf("DescribeConfigs of brokers %v: %w", ids, err)
	}
	out := map[string]brokerView{}
	for _, n := range names {
		out[n] = brokerView{value: map[int32]string{}, source: map[int32]kmsg.ConfigSource{}}
	}
	for _, rc := range rcs {
		id, err := strconv.ParseInt(rc.Name, 10, 32)
		if err != nil {
			continue
		}
		if rc.Err != nil {
			return nil, fmt.Errorf("DescribeConfigs of broker %s: %w %s", rc.Name, rc.Err, rc.ErrMessage)
		}
		for _, c := range rc.Configs {
			if v, ok := out[c.Key]; ok && c.Value != nil {
				v.value[int32(id)], v.source[int32(id)] = *c.Value, c.Source
			}
		}
	}
	return out, nil
}

// brokerIDs lists the cluster's brokers from Metadata.
func (cs *ConfigSession) brokerIDs(ctx context.Context) ([]int32, error) {
	bm, err := cs.adm.BrokerMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	ids := make([]int32, 0, len(bm.Brokers))
	for _, b := range bm.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// specValue is the spec's value of key in Kafka's text form.
func specValue(s *spec.Spec, key string) string {
	v, _ := s.Get(key)
	return fmt.Sprint(v)
}

// Check verifies, before anything changes, the settings of s the session cannot apply: each
// read-only broker setting the spec gives must be reported by every broker with the spec's
// value, or be assumed; a dynamic one needs IncrementalAlterConfigs unless every broker
// reports the value already. Errors wrap ErrTargetSetting and name the key. notes gets the
// settings that were ignored (embedded-cluster ones).
func (cs *ConfigSession) Check(ctx context.Context, s *spec.Spec) (notes []string, err error) {
	ids, err := cs.brokerIDs(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, key := range s.GivenKeys() {
		if ks, ok := kafkaSettings[key]; ok && ks.mode != kafkaTopic && ks.mode != kafkaHarness {
			names = append(names, ks.name)
		}
	}
	views, err := cs.describeBrokers(ctx, ids, names)
	if err != nil {
		return nil, err
	}
	var needAlter []string
	for _, key := range s.GivenKeys() {
		ks, ok := kafkaSettings[key]
		if !ok {
			continue
		}
		want := specValue(s, key)
		switch ks.mode {
		case kafkaHarness:
			if key == "brokers" && len(ids) != s.Brokers {
				notes = append(notes, fmt.Sprintf("brokers=%d sizes the embedded cluster; the target has %d brokers %v", s.Brokers, len(ids), ids))
			} else if key != "brokers" {
				notes = append(notes, fmt.Sprintf("%s=%s applies to the embedded cluster only; ignored on this target", key, want))
			}
		case kafkaReadOnly, kafkaDynamic:
			v := views[ks.name]
			if _, assumed := cs.assume[key]; assumed {
				if len(v.value) > 0 && !v.all(ids, want) {
					return nil, fmt.Errorf("%w: --assume %s=%s, but the brokers report %s", spec.ErrTargetSetting, key, want, v)
				}
				continue
			}
			if v.all(ids, want) {
				continue
			}
			if ks.mode == kafkaReadOnly && want == specValue(spec.DefaultSpec(), key) {
				// Listed at the harness's default (default.yaml lists every broker setting):
				// not a choice to enforce on a cluster that runs its own configuration.
				if len(v.value) == 0 {
					notes = append(notes, fmt.Sprintf("%s=%s (the harness default) is not reported by the brokers: not verified", key, want))
				} else {
					n := fmt.Sprintf("%s=%s is the harness default, the brokers run %s: a read-only setting, so the run goes on with the brokers' value (give another value to require it)", key, want, v)
					notes = append(notes, n)
					cs.logf("target: %s", n)
				}
				continue
			}
			if ks.mode == kafkaReadOnly {
				return nil, fmt.Errorf("%w: %s=%s: %s is a read-only broker config on Kafka (it changes only with a broker restart), and the brokers report %s; set it on the brokers and restart them, then pass --assume %s=%s (or drop it from the spec)",
					spec.ErrTargetSetting, key, want, ks.name, v, key, want)
			}
			needAlter = append(needAlter, key+"="+want)
		}
	}
	if len(needAlter) > 0 && !cs.checkOnly {
		if err := cs.needAPI(ctx, apiIncrementalAlterConfigs, "IncrementalAlterConfigs", needAlter); err != nil {
			return nil, err
		}
	}
	return notes, nil
}

// needAPI fails unless every broker advertises API key (ApiVersions).
func (cs *ConfigSession) needAPI(ctx context.Context, key int16, name string, settings []string) error {
	vs, err := cs.adm.ApiVersions(ctx)
	if err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return fmt.Errorf("ApiVersions of broker %d: %w", v.NodeID, v.Err)
		}
		if _, ok := v.KeyMaxVersion(key); !ok {
			return fmt.Errorf("%w: %s: broker %d does not support %s (API key %d), so the run cannot set them; set them on the brokers (a restart) and pass --assume for each",
				spec.ErrTargetSetting, strings.Join(settings, ", "), v.NodeID, name, key)
		}
	}
	return nil
}

// Apply brings the cluster to the spec's settings (Check first): each dynamic broker setting
// the spec gives, and each topic setting of an existing topic (created false) that differs.
// It waits until DescribeConfigs shows every change and returns what result.json
// target_config records.
func (cs *ConfigSession) Apply(ctx context.Context, s *spec.Spec, created bool) ([]results.TargetSetting, error) {
	ids, err := cs.brokerIDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []results.TargetSetting
	keys := s.GivenKeys()
	if !slices.Contains(keys, "topic.min.insync.replicas") {
		keys = append(keys, "topic.min.insync.replicas")
	}
	sort.Strings(keys)
	for _, key := range keys {
		ks, ok := kafkaSettings[key]
		if !ok {
			continue
		}
		want := specValue(s, key)
		ts := results.TargetSetting{Key: key, Config: ks.name, Value: want}
		switch ks.mode {
		case kafkaTopic:
			ts.Resource = "topic " + s.Topic.Name
			if err := cs.applyTopic(ctx, s.Topic.Name, ks, want, created, &ts); err != nil {
				return out, err
			}
		case kafkaDynamic, kafkaReadOnly:
			ts.Resource = "brokers"
			if _, assumed := cs.assume[key]; assumed {
				ts.How = "assumed"
			} else if ks.mode == kafkaDynamic {
				if err := cs.applyBroker(ctx, ids, ks, want, &ts); err != nil {
					return out, err
				}
			}
			views, err := cs.describeBrokers(ctx, ids, []string{ks.name})
			if err == nil {
				ts.Reported, ts.Source = reported(views[ks.name])
			}
			if ts.How == "" { // read-only, verified by Check, or noted there
				switch {
				case len(ts.Reported) == 0:
					ts.How = "unverified"
				case !views[ks.name].all(ids, want):
					ts.How = "cluster-value" // the harness default, not enforced (see Check)
				default:
					ts.How = "already-set"
				}
			}
		default:
			continue
		}
		out = append(out, ts)
	}
	return out, nil
}

// reported turns a brokerView into result.json's reported (broker id -> value) and source.
func reported(v brokerView) (map[string]string, string) {
	if len(v.value) == 0 {
		return nil, ""
	}
	m := map[string]string{}
	var sources []string
	for id, val := range v.value {
		m[strconv.Itoa(int(id))] = val
		if s := v.source[id].String(); !slices.Contains(sources, s) {
			sources = append(sources, s)
		}
	}
	sort.Strings(sources)
	return m, strings.Join(sources, ",")
}

// applyBroker sets a dynamic broker config on the cluster default and waits until every
// broker reports it; a thread pool moves in steps of at most a doubling or halving.
func (cs *ConfigSession) applyBroker(ctx context.Context, ids []int32, ks kafkaSetting, want string, ts *results.TargetSetting) error {
	views, err := cs.describeBrokers(ctx, ids, []string{ks.name})
	if err != nil {
		return err
	}
	v := views[ks.name]
	if v.all(ids, want) {
		ts.How = "already-set"
		return nil
	}
	if cs.checkOnly {
		ts.How = "waited-for"
		return cs.waitBrokers(ctx, ids, ks.name, want)
	}
	if err := cs.noteOriginal(ctx, ks, v); err != nil {
		return err
	}
	ts.How = "incremental-alter-configs"
	return cs.stepBroker(ctx, ids, ks, v, want, func(val string) error {
		return cs.alter(ctx, "", ks.name, &val)
	})
}

// stepBroker moves a broker config from what v reports to want: in one step, or for a thread
// pool in steps within [current/2, 2*current] on every broker, each waited for. set applies one value.
func (cs *ConfigSession) stepBroker(ctx context.Context, ids []int32, ks kafkaSetting, v brokerView, want string, set func(string) error) error {
	if !ks.threadPool {
		if err := set(want); err != nil {
			return err
		}
		return cs.waitBrokers(ctx, ids, ks.name, want)
	}
	target, err := strconv.Atoi(want)
	if err != nil {
		return fmt.Errorf("%s=%q: not an integer", ks.name, want)
	}
	cur := make([]int, 0, len(ids))
	for _, id := range ids {
		c := ks.kafkaDefault
		if s, ok := v.value[id]; ok {
			if n, err := strconv.Atoi(s); err == nil {
				c = n
			}
		}
		cur = append(cur, c)
	}
	for {
		next, ok := threadPoolStep(cur, target)
		if !ok {
			return fmt.Errorf("%w: %s: the brokers run %v threads, too far apart for one value within half and double of each (Kafka's DynamicThreadPool rule)", spec.ErrTargetSetting, ks.name, cur)
		}
		val := strconv.Itoa(next)
		cs.logf("target: %s=%s on the cluster default (brokers had %v, want %d)", ks.name, val, cur, target)
		if err := set(val); err != nil {
			return err
		}
		if err := cs.waitBrokers(ctx, ids, ks.name, val); err != nil {
			return err
		}
		if next == target {
			return nil
		}
		for i := range cur {
			cur[i] = next
		}
	}
}

// threadPoolStep is the value closest to target that Kafka accepts after cur on every broker:
// within [c/2, 2c] (integer halves, as DynamicThreadPool divides) of each c, and at least 1.
func threadPoolStep(cur []int, target int) (int, bool) {
	lo, hi := 1, int(^uint(0)>>1)
	for _, c := range cur {
		lo, hi = max(lo, c/2), min(hi, 2*c)
	}
	if lo > hi {
		return 0, false
	}
	return min(max(target, lo), hi), true
}

// noteOriginal records, before the first change of a config, what to restore: the cluster
// default's own value (DescribeConfigs of the broker resource "") and what the brokers ran.
// (A cluster that reports a cluster-wide value with source DYNAMIC_BROKER_CONFIG, as kfake
// does, is read the same way.)
func (cs *ConfigSession) noteOriginal(ctx context.Context, ks kafkaSetting, v brokerView) error {
	for _, c := range cs.changes {
		if c.topic == "" && c.name == ks.name {
			return nil // the session restores the first original
		}
	}
	ch := configChange{name: ks.name, ks: ks}
	rcs, err := cs.adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		return fmt.Errorf("DescribeConfigs of the cluster default: %w", err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			dynamic := c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig || c.Source == kmsg.ConfigSourceDynamicBrokerConfig
			if c.Key == ks.name && dynamic && c.Value != nil {
				val := *c.Value
				ch.orig = &val
			}
		}
	}
	// What the brokers ran (the lowest id's value when they differ), for a thread pool's
	// steps back and the final check.
	ids := make([]int32, 0, len(v.value))
	for id := range v.value {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) > 0 {
		ch.origEffective = v.value[ids[0]]
	}
	cs.changes = append(cs.changes, ch)
	return nil
}

// alter sets (value non-nil) or deletes one config of the cluster default (topic "") or of
// a topic, and checks the answer.
func (cs *ConfigSession) alter(ctx context.Context, topic, name string, value *string) error {
	op := kadm.SetConfig
	if value == nil {
		op = kadm.DeleteConfig
	}
	ac := []kadm.AlterConfig{{Op: op, Name: name, Value: value}}
	var rs kadm.AlterConfigsResponses
	var err error
	what := "the cluster default"
	if topic == "" {
		rs, err = cs.adm.AlterBrokerConfigs(ctx, ac)
	} else {
		what = "topic " + topic
		rs, err = cs.adm.AlterTopicConfigs(ctx, ac, topic)
	}
	desc := name + " deleted"
	if value != nil {
		desc = name + "=" + *value
	}
	if err != nil {
		return fmt.Errorf("IncrementalAlterConfigs %s on %s: %w", desc, what, err)
	}
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("IncrementalAlterConfigs %s on %s: %w %s", desc, what, r.Err, r.ErrMessage)
		}
	}
	return nil
}

// waitBrokers polls DescribeConfigs until every broker reports name=want (cs.wait at most).
func (cs *ConfigSession) waitBrokers(ctx context.Context, ids []int32, name, want string) error {
	var last brokerView
	why := poll.Until(ctx, cs.wait, 100*time.Millisecond, func() string {
		views, err := cs.describeBrokers(ctx, ids, []string{name})
		if err != nil {
			return err.Error()
		}
		last = views[name]
		if last.all(ids, want) {
			return ""
		}
		return last.String()
	})
	if why != "" {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		hint := ""
		for id, src := range last.source {
			if src == kmsg.ConfigSourceDynamicBrokerConfig && last.value[id] != want {
				hint = fmt.Sprintf("; broker %d has a value of its own (DYNAMIC_BROKER_CONFIG), which the cluster default does not change: remove it with kafka-configs.sh --entity-type brokers --entity-name %d --alter --delete-config %s", id, id, name)
				break
			}
		}
		return fmt.Errorf("%s=%s: not in effect on every broker after %s: %s%s", name, want, cs.wait, why, hint)
	}
	return nil
}

// Restore undoes every change, the last first: a config the resource had is set back, one it
// did not have is deleted; a thread pool steps back to what the brokers ran before. ctx may be
// done already (Ctrl-C): Restore then uses its own deadline. It returns every failure, each
// naming the config and how to restore it by hand.
func (cs *ConfigSession) Restore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*cs.wait)
	defer cancel()
	var errs []error
	for i := len(cs.changes) - 1; i >= 0; i-- {
		ch := cs.changes[i]
		if err := cs.restore(ctx, ch); err != nil {
			fix := "kafka-configs.sh --bootstrap-server HOST:PORT --entity-type brokers --entity-default --alter "
			if ch.topic != "" {
				fix = "kafka-configs.sh --bootstrap-server HOST:PORT --entity-type topics --entity-name " + ch.topic + " --alter "
			}
			if ch.orig != nil {
				fix += "--add-config " + ch.name + "=" + *ch.orig
			} else {
				fix += "--delete-config " + ch.name
			}
			errs = append(errs, fmt.Errorf("restoring %s: %w (restore it with: %s)", ch.name, err, fix))
		}
	}
	cs.changes = nil
	return errors.Join(errs...)
}

func (cs *ConfigSession) restore(ctx context.Context, ch configChange) error {
	if ch.topic != "" {
		cs.logf("target: restoring topic %s %s", ch.topic, ch.name)
		return cs.alter(ctx, ch.topic, ch.name, ch.orig)
	}
	ids, err := cs.brokerIDs(ctx)
	if err != nil {
		return err
	}
	if ch.ks.threadPool && ch.origEffective != "" {
		views, err := cs.describeBrokers(ctx, ids, []string{ch.name})
		if err != nil {
			return err
		}
		// Step back to what the brokers ran, then put the default's own value back.
		if err := cs.stepBroker(ctx, ids, ch.ks, views[ch.name], ch.origEffective, func(val string) error {
			return cs.alter(ctx, "", ch.name, &val)
		}); err != nil {
			return err
		}
	}
	cs.logf("target: restoring %s on the cluster default (%s)", ch.name, describeOrig(ch.orig))
	if err := cs.alter(ctx, "", ch.name, ch.orig); err != nil {
		return err
	}
	if ch.origEffective != "" {
		return cs.waitBrokers(ctx, ids, ch.name, ch.origEffective)
	}
	return nil
}

func describeOrig(o *string) string {
	if o == nil {
		return "deleted: it had no value of its own"
	}
	return "back to " + *o
}
