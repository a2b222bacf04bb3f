package netfetch

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 19, min: 2, max: 7, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleCreateTopics(req.(*kmsg.CreateTopicsRequest))
	}})
}

// handleCreateTopics creates topics through the controller. NumPartitions
// -1 / ReplicationFactor -1 mean num.partitions / default.replication.factor.
// A manual replica assignment places the replicas by hand (createAssigned; both then -1).
func (c *conn) handleCreateTopics(req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	ctrl := c.s.cfg.Controller
	resp := kmsg.NewPtrCreateTopicsResponse()
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		np, rf := t.NumPartitions, t.ReplicationFactor
		if np == -1 {
			np = c.s.cfg.NumPartitions
		}
		if rf == -1 {
			rf = c.s.cfg.DefaultReplicationFactor
			if rf <= 0 {
				rf = int16(min(3, len(ctrl.Brokers())))
			}
		}
		rt.NumPartitions, rt.ReplicationFactor = np, rf
		configs := map[string]string{}
		for _, kv := range t.Configs {
			if kv.Value != nil {
				configs[kv.Name] = *kv.Value
			}
		}
		var err error
		switch {
		case len(t.ReplicaAssignment) > 0:
			rt.NumPartitions, rt.ReplicationFactor, err = c.createAssigned(t, configs, req.ValidateOnly)
		case req.ValidateOnly:
			err = ctrl.ValidateCreateTopic(t.Topic, np, rf, configs)
		default:
			_, err = ctrl.CreateTopic(t.Topic, np, rf, configs)
		}
		if err != nil {
			rt.ErrorCode = errCode(err)
			rt.ErrorMessage = errMessage(err)
			if !errors.Is(err, kerr.TopicAlreadyExists) {
				rt.NumPartitions, rt.ReplicationFactor = -1, -1
			}
		} else if req.Version >= 5 {
			for k, v := range configs {
				cfg := kmsg.NewCreateTopicsResponseTopicConfig()
				cfg.Name, cfg.Value = k, &v
				cfg.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
				rt.Configs = append(rt.Configs, cfg)
			}
		}
		if err == nil && !req.ValidateOnly {
			rt.TopicID, _ = ctrl.TopicID(t.Topic) // v7+
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
