package netfetch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register(api{key: 44, min: 0, max: 1, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleIncrementalAlterConfigs(req.(*kmsg.IncrementalAlterConfigsRequest))
	}})
}

// handleIncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT operations to
// topic configs and to the dynamic broker configs (resource "" the cluster-wide default,
// or this broker's id), each resource atomically, with Kafka's checks: a resource named
// twice, a config named twice in one resource, a null value for a SET (INVALID_REQUEST);
// APPEND / SUBTRACT on a config that is not a LIST (INVALID_CONFIG); a broker config that is
// not dynamic (INVALID_REQUEST). validate_only changes nothing.
func (c *conn) handleIncrementalAlterConfigs(req *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	rs := make([]alterTarget, len(req.Resources))
	for i := range req.Resources {
		r := &req.Resources[i]
		rs[i] = alterTarget{typ: r.ResourceType, name: r.ResourceName, names: make([]string, len(r.Configs)),
			null: func(j int) bool {
				return r.Configs[j].Op != kmsg.IncrementalAlterConfigOpDelete && r.Configs[j].Value == nil
			},
			change: func(ch *controller.ConfigChange) error { return c.incrementalChange(r, ch) }}
		for j := range r.Configs {
			rs[i].names[j] = r.Configs[j].Name
		}
	}
	for i, err := range c.alterConfigs(rs, false, req.ValidateOnly) {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = rs[i].typ, rs[i].name
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// incrementalChange turns one resource's operations into its change: SET and DELETE as
// given, APPEND and SUBTRACT applied to the LIST config's current value (listOp).
func (c *conn) incrementalChange(r *kmsg.IncrementalAlterConfigsRequestResource, ch *controller.ConfigChange) error {
	for j := range r.Configs {
		cfg := &r.Configs[j]
		switch cfg.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			ch.Set[cfg.Name] = *cfg.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			ch.Delete = append(ch.Delete, cfg.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			v, err := c.listOp(r.ResourceType, r.ResourceName, cfg.Name, cfg.Op, *cfg.Value)
			if err != nil {
				return err
			}
			ch.Set[cfg.Name] = v
		default:
			return fmt.Errorf("unknown operations type %d (SET 0, DELETE 1, APPEND 2, SUBTRACT 3): %w", cfg.Op, kerr.InvalidRequest)
		}
	}
	return nil
}

// listOp computes the value of LIST config name after APPEND or SUBTRACT of the
// comma-separated values v, from its current value (the override, else the value in
// effect). A config that is not a LIST is INVALID_CONFIG, as in Kafka.
func (c *conn) listOp(rtype kmsg.ConfigResourceType, resource, name string, op kmsg.IncrementalAlterConfigOp, v string) (string, error) {
	var typ, cur string
	switch rtype {
	case kmsg.ConfigResourceTypeTopic:
		i := slices.IndexFunc(controller.TopicConfigDefs(), func(d controller.TopicConfigDef) bool { return d.Name == name })
		if i < 0 {
			return "", fmt.Errorf("unknown topic config name %q (supported: %s): %w", name, strings.Join(controller.SupportedTopicConfigs(), ", "), kerr.InvalidConfig)
		}
		d := controller.TopicConfigDefs()[i]
		typ = d.Type
		var ok bool
		if cur, ok = c.s.cfg.Controller.TopicConfig(resource)[name]; !ok {
			cur = c.effectiveBrokerConfig(d.BrokerSynonym)
		}
	case kmsg.ConfigResourceTypeBroker:
		typ = controller.BrokerConfigType(name)
		var ok bool
		if cur, ok = c.s.cfg.Controller.BrokerConfigs(resource)[name]; !ok {
			cur = c.effectiveBrokerConfig(name)
		}
	default:
		return "", fmt.Errorf("unknown resource type %d (TOPIC 2 and BROKER 4 are supported): %w", rtype, kerr.InvalidRequest)
	}
	if typ != controller.TypeList {
		return "", fmt.Errorf("can't %s to key %s because its type is not LIST: %w", op, name, kerr.InvalidConfig)
	}
	var parts []string
	for _, p := range strings.Split(cur, ",") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	for _, p := range strings.Split(v, ",") {
		if op == kmsg.IncrementalAlterConfigOpAppend && !slices.Contains(parts, p) {
			parts = append(parts, p)
		} else if op == kmsg.IncrementalAlterConfigOpSubtract {
			parts = slices.DeleteFunc(parts, func(x string) bool { return x == p })
		}
	}
	return strings.Join(parts, ","), nil
}
