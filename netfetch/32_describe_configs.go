package netfetch

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 32, min: 0, max: 4, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDescribeConfigs(req.(*kmsg.DescribeConfigsRequest))
	}})
}

// handleDescribeConfigs answers topic resources with the topic's overrides
// (source DYNAMIC_TOPIC_CONFIG, what kafka-topics.sh --describe prints as
// Configs:) and broker resources with the broker's replication settings
// (source STATIC_BROKER_CONFIG). ConfigNames filters when non-nil.
func (c *conn) handleDescribeConfigs(req *kmsg.DescribeConfigsRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrDescribeConfigsResponse()
	for i := range req.Resources {
		r := &req.Resources[i]
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var kv map[string]string
		var source kmsg.ConfigSource
		var err error
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if _, ok := c.s.cfg.Controller.Partitions(r.ResourceName); !ok {
				err = fmt.Errorf("topic %q: %w", r.ResourceName, kerr.UnknownTopicOrPartition)
				break
			}
			kv, source = c.s.cfg.Controller.TopicConfig(r.ResourceName), kmsg.ConfigSourceDynamicTopicConfig
		case kmsg.ConfigResourceTypeBroker:
			if r.ResourceName != "" && r.ResourceName != strconv.Itoa(int(c.s.cfg.BrokerID)) {
				err = fmt.Errorf("broker resource %q is not this broker (%d): %w", r.ResourceName, c.s.cfg.BrokerID, kerr.InvalidRequest)
				break
			}
			kv, source = c.s.cfg.BrokerConfigs, kmsg.ConfigSourceStaticBrokerConfig
		default:
			err = fmt.Errorf("resource type %v is not supported: %w", r.ResourceType, kerr.InvalidRequest)
		}
		if err != nil {
			rr.ErrorCode, rr.ErrorMessage = errCode(err), errMessage(err)
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		names := make([]string, 0, len(kv))
		for k := range kv {
			if r.ConfigNames == nil || slices.Contains(r.ConfigNames, k) {
				names = append(names, k)
			}
		}
		slices.Sort(names)
		for _, k := range names {
			v := kv[k]
			rc := kmsg.NewDescribeConfigsResponseResourceConfig()
			rc.Name, rc.Value, rc.Source = k, &v, source
			if req.IncludeSynonyms {
				syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				syn.Name, syn.Value, syn.Source = k, &v, source
				rc.ConfigSynonyms = append(rc.ConfigSynonyms, syn)
			}
			rr.Configs = append(rr.Configs, rc)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}
