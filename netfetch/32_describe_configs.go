package netfetch

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register(api{key: 32, min: 0, max: 4, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDescribeConfigs(req.(*kmsg.DescribeConfigsRequest))
	}})
}

// handleDescribeConfigs answers as Kafka's ConfigHelper: a TOPIC resource gets every topic
// config (controller.TopicConfigDefs) with its value and source (TOPIC_CONFIG for an
// override, else its broker synonym's source); BROKER "<this broker's id>" every broker
// config (the registry, core/config) with its source and read_only (not dynamic in Kafka); BROKER ""
// the cluster-wide dynamic defaults only (DYNAMIC_DEFAULT_BROKER_CONFIG). Synonyms (v1+,
// include_synonyms) list every source that is set, in precedence order; config types are
// sent from v3; documentation is not (null). v0 has is_default instead of a source.
// ConfigNames filters (null or empty: all).
func (c *conn) handleDescribeConfigs(req *kmsg.DescribeConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	perBroker, defaults := c.dynamicBrokerConfigs()
	for i := range req.Resources {
		r := &req.Resources[i]
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		want := func(name string) bool { return len(r.ConfigNames) == 0 || slices.Contains(r.ConfigNames, name) }
		add := func(name, typ string, readOnly bool, syns []synonym) {
			rc := kmsg.NewDescribeConfigsResponseResourceConfig()
			rc.Name, rc.ReadOnly, rc.ConfigType = name, readOnly, configType(typ)
			rc.Source = kmsg.ConfigSourceDefaultConfig
			if len(syns) > 0 {
				v := syns[0].value
				rc.Value, rc.Source = &v, syns[0].source
			}
			rc.IsDefault = rc.Source == kmsg.ConfigSourceDefaultConfig
			if req.IncludeSynonyms {
				for _, s := range syns {
					syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					v := s.value
					syn.Name, syn.Value, syn.Source = s.name, &v, s.source
					rc.ConfigSynonyms = append(rc.ConfigSynonyms, syn)
				}
			}
			rr.Configs = append(rr.Configs, rc)
		}
		var err error
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			err = controller.ValidateTopicName(r.ResourceName)
			if err != nil {
				break
			}
			overrides := c.s.cfg.Controller.TopicConfig(r.ResourceName)
			if overrides == nil {
				err = fmt.Errorf("topic %q: %w", r.ResourceName, kerr.UnknownTopicOrPartition)
				break
			}
			for _, d := range controller.TopicConfigDefs() {
				if !want(d.Name) {
					continue
				}
				var syns []synonym
				if v, ok := overrides[d.Name]; ok {
					syns = append(syns, synonym{d.Name, v, kmsg.ConfigSourceDynamicTopicConfig})
				}
				syns = append(syns, c.brokerSynonyms(d.BrokerSynonym, perBroker, defaults)...)
				if len(syns) == 0 {
					syns = []synonym{{d.Name, d.Default, kmsg.ConfigSourceDefaultConfig}}
				}
				add(d.Name, d.Type, false, syns)
			}
		case kmsg.ConfigResourceTypeBroker:
			if err = c.brokerResourceID(r.ResourceName, true); err != nil {
				break
			}
			for _, e := range config.Entries() {
				name, typ := e.Name, string(e.Type)
				dynamic := controller.BrokerConfigType(name) != ""
				if !want(name) {
					continue
				}
				if r.ResourceName == "" {
					if v, ok := defaults[name]; ok {
						add(name, typ, false, []synonym{{name, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig}})
					}
					continue
				}
				syns := c.brokerSynonyms(name, perBroker, defaults)
				if len(syns) == 0 {
					syns = []synonym{{name, "", kmsg.ConfigSourceDefaultConfig}}
				}
				if syns[0].value == "" && syns[0].source == kmsg.ConfigSourceDefaultConfig {
					syns = nil // no value (Kafka's null)
				}
				add(name, typ, !dynamic, syns)
			}
		default:
			err = fmt.Errorf("resource type %v is not supported (TOPIC and BROKER are): %w", r.ResourceType, kerr.InvalidRequest)
		}
		if err != nil {
			rr.ErrorCode, rr.ErrorMessage = errCode(err), errMessage(err)
			rr.Configs = nil
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}
