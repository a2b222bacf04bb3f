package netfetch

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/controller"
)

// The config side of the admin APIs (DescribeConfigs, AlterConfigs,
// IncrementalAlterConfigs), as Kafka's ConfigHelper and ConfigAdminManager: a broker
// config's value comes from the first of its synonyms that is set, in Kafka's order
//
//	DYNAMIC_BROKER_CONFIG          this broker's dynamic config (controller, resource "<id>")
//	DYNAMIC_DEFAULT_BROKER_CONFIG  the cluster-wide dynamic default (controller, resource "")
//	STATIC_BROKER_CONFIG           what the broker was started with (ServerConfig.BrokerConfigs)
//	DEFAULT_CONFIG                 Kafka's default
//
// and a topic config's from its override (TOPIC_CONFIG), else from its broker synonym's
// chain (controller.TopicConfigDef.BrokerSynonym).

// synonym is one source of a config's value.
type synonym struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// brokerSynonyms returns the sources of broker config name on this broker that are set,
// in precedence order (the first one is the value in effect).
func (c *conn) brokerSynonyms(name string, perBroker, defaults map[string]string) []synonym {
	var out []synonym
	if v, ok := perBroker[name]; ok {
		out = append(out, synonym{name, v, kmsg.ConfigSourceDynamicBrokerConfig})
	}
	if v, ok := defaults[name]; ok {
		out = append(out, synonym{name, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig})
	}
	if v, ok := c.s.cfg.BrokerConfigs[name]; ok {
		out = append(out, synonym{name, v, kmsg.ConfigSourceStaticBrokerConfig})
	}
	if e, ok := config.Lookup(name); ok && e.Default != "" {
		out = append(out, synonym{name, e.Default, kmsg.ConfigSourceDefaultConfig})
	}
	return out
}

// dynamicBrokerConfigs returns this broker's dynamic configs and the cluster-wide defaults.
func (c *conn) dynamicBrokerConfigs() (perBroker, defaults map[string]string) {
	ctrl := c.s.cfg.Controller
	return ctrl.BrokerConfigs(strconv.Itoa(int(c.s.cfg.BrokerID))), ctrl.BrokerConfigs("")
}

// effectiveBrokerConfig is the value of broker config name in effect on this broker.
func (c *conn) effectiveBrokerConfig(name string) string {
	perBroker, defaults := c.dynamicBrokerConfigs()
	if s := c.brokerSynonyms(name, perBroker, defaults); len(s) > 0 {
		return s[0].value
	}
	return ""
}

func configType(t string) kmsg.ConfigType {
	switch t {
	case controller.TypeBoolean:
		return kmsg.ConfigTypeBoolean
	case controller.TypeString, string(config.Duration): // a Go duration ("30ms") is a string to Kafka
		return kmsg.ConfigTypeString
	case controller.TypeInt:
		return kmsg.ConfigTypeInt
	case controller.TypeShort:
		return kmsg.ConfigTypeShort
	case controller.TypeLong:
		return kmsg.ConfigTypeLong
	case controller.TypeList:
		return kmsg.ConfigTypeList
	}
	return kmsg.ConfigTypeUnknown
}

// brokerResourceID checks a BROKER resource name against this broker: "" (the cluster-wide
// default) or this broker's id. Errors are Kafka's INVALID_REQUEST.
func (c *conn) brokerResourceID(name string, allowDefault bool) error {
	if name == "" && allowDefault {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return fmt.Errorf("broker id must be an integer, but it is: %q: %w", name, kerr.InvalidRequest)
	}
	if int32(id) != c.s.cfg.BrokerID {
		return fmt.Errorf("unexpected broker id, expected %d or empty string, but received %s: %w", c.s.cfg.BrokerID, name, kerr.InvalidRequest)
	}
	return nil
}

// checkBrokerConfigChange refuses, before anything is stored, what Kafka's
// ConfigAdminManager refuses on the broker: configs that are not dynamic ("Cannot update
// these configs dynamically", INVALID_REQUEST), unknown ones, and a num.replica.fetchers
// change to less than half or more than double the value in effect
// (DynamicThreadPool.validateReconfiguration). Value ranges are the controller's
// (ChangeBrokerConfig).
func (c *conn) checkBrokerConfigChange(resource string, names []string, set map[string]string) error {
	var static, unknown []string
	for _, n := range names {
		switch {
		case controller.BrokerConfigType(n) != "":
		case func() bool { _, ok := config.Lookup(n); return ok }():
			static = append(static, n)
		default:
			unknown = append(unknown, n)
		}
	}
	if len(static) > 0 {
		slices.Sort(static)
		return fmt.Errorf("cannot update these configs dynamically: [%s] (read-only in Kafka: they are set at start, e.g. isrbench serve --set key=value; the dynamic ones are %s): %w",
			strings.Join(static, ", "), strings.Join(controller.DynamicBrokerConfigNames(), ", "), kerr.InvalidRequest)
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("unknown broker config name(s) [%s] (the dynamic broker configs are %s): %w",
			strings.Join(unknown, ", "), strings.Join(controller.DynamicBrokerConfigNames(), ", "), kerr.InvalidRequest)
	}
	for _, name := range names { // the thread pools (registry ThreadPool)
		v, ok := set[name]
		if e, known := config.Lookup(name); !ok || !known || !e.ThreadPool {
			continue
		}
		perBroker, _ := c.dynamicBrokerConfigs()
		if _, own := perBroker[name]; resource == "" && own {
			continue // this broker's own value stays in effect
		}
		cur, err1 := strconv.Atoi(c.effectiveBrokerConfig(name))
		n, err2 := strconv.Atoi(strings.TrimSpace(v))
		if err1 == nil && err2 == nil && n != cur {
			switch {
			case n < 1:
				return fmt.Errorf("dynamic thread count update validation failed for %s=%d, value should be at least 1: %w", name, n, kerr.InvalidRequest)
			case n < cur/2:
				return fmt.Errorf("dynamic thread count update validation failed for %s=%d, value should be at least half the current value %d: %w", name, n, cur, kerr.InvalidRequest)
			case n > cur*2:
				return fmt.Errorf("dynamic thread count update validation failed for %s=%d, value should not be greater than double the current value %d: %w", name, n, cur, kerr.InvalidRequest)
			}
		}
	}
	return nil
}

// awaitBrokers waits (at most timeoutMs, bounded to 10 s; nothing for <= 0) until every
// alive broker has applied the metadata changes made so far, so that a client that acts on
// an admin response finds the brokers already changed. Not reaching that in time is not an
// error: the change is committed in the controller.
func (c *conn) awaitBrokers(timeoutMs int32) {
	if timeoutMs <= 0 {
		return
	}
	d := min(time.Duration(timeoutMs)*time.Millisecond, 10*time.Second)
	ctx, cancel := context.WithTimeout(c.ctx, d)
	defer cancel()
	ctrl := c.s.cfg.Controller
	for _, b := range ctrl.Brokers() {
		if b.Alive {
			if err := ctrl.Sync(ctx, b.ID); err != nil {
				return
			}
		}
	}
}

// duplicateResources reports the (type, name) pairs named more than once.
func duplicateResources[T any](rs []T, key func(*T) (int8, string)) map[[2]string]bool {
	seen := map[[2]string]int{}
	for i := range rs {
		t, n := key(&rs[i])
		seen[[2]string{strconv.Itoa(int(t)), n}]++
	}
	dup := map[[2]string]bool{}
	for k, n := range seen {
		if n > 1 {
			dup[k] = true
		}
	}
	return dup
}

func resourceKey(t int8, n string) [2]string { return [2]string{strconv.Itoa(int(t)), n} }

// alterResource applies one resource's config change after the request-level checks:
// topic configs through the controller (validated there: INVALID_CONFIG), broker configs
// after the broker-side checks of checkBrokerConfigChange (INVALID_REQUEST). names are the
// config names the request named.
func (c *conn) alterResource(rtype kmsg.ConfigResourceType, name string, ch controller.ConfigChange, names []string) error {
	ctrl := c.s.cfg.Controller
	switch rtype {
	case kmsg.ConfigResourceTypeTopic:
		if err := controller.ValidateTopicName(name); err != nil {
			return err
		}
		return ctrl.ChangeTopicConfig(name, ch)
	case kmsg.ConfigResourceTypeBroker:
		if err := c.brokerResourceID(name, true); err != nil {
			return err
		}
		if err := c.checkBrokerConfigChange(name, names, ch.Set); err != nil {
			return err
		}
		return ctrl.ChangeBrokerConfig(name, ch)
	}
	return fmt.Errorf("unknown resource type %d (TOPIC 2 and BROKER 4 are supported): %w", rtype, kerr.InvalidRequest)
}

// configKeyChecks returns Kafka's request-level errors of one resource's config entries:
// a name given twice, or a null value where one is needed.
func configKeyChecks(names []string, nullValue func(i int) bool) error {
	seen := map[string]bool{}
	var nulls []string
	for i, n := range names {
		if seen[n] {
			return fmt.Errorf("error due to duplicate config keys (%s): %w", n, kerr.InvalidRequest)
		}
		seen[n] = true
		if nullValue(i) {
			nulls = append(nulls, n)
		}
	}
	if len(nulls) > 0 {
		return fmt.Errorf("null value not supported for : %s: %w", strings.Join(nulls, ", "), kerr.InvalidRequest)
	}
	return nil
}
