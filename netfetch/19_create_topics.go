package netfetch

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register(api{key: 19, min: 2, max: 7, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleCreateTopics(req.(*kmsg.CreateTopicsRequest))
	}})
}

// handleCreateTopics creates topics through the controller. NumPartitions
// -1 / ReplicationFactor -1 mean num.partitions / default.replication.factor.
// A manual replica assignment places the replicas by hand (createAssigned; both then -1).
//
// The answer waits, up to timeout_ms, until the leader of every new partition
// has applied its leadership (awaitLeaders), so that a client producing as soon
// as CreateTopics returns finds leaders that take its records (as Kafka's
// ZooKeeper-era brokers answered once the new leaders were in the brokers'
// metadata). A wait cut short by the timeout still answers success: the topic
// exists, and Metadata lists each partition's leader only once that leader can
// take produce requests (see handleMetadata), which is also what protects a
// client that sends timeout_ms 0 or asks another broker meanwhile.
func (c *conn) handleCreateTopics(req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	ctrl := c.s.cfg.Controller
	resp := kmsg.NewPtrCreateTopicsResponse()
	var created []controller.PartitionState
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
			var parts []controller.PartitionState
			rt.NumPartitions, rt.ReplicationFactor, parts, err = c.createAssigned(t, configs, req.ValidateOnly)
			created = append(created, parts...)
		case req.ValidateOnly:
			err = ctrl.ValidateCreateTopic(t.Topic, np, rf, configs)
		default:
			var parts []controller.PartitionState
			parts, err = ctrl.CreateTopic(t.Topic, np, rf, configs)
			created = append(created, parts...)
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
	c.awaitLeaders(req.TimeoutMillis, created)
	return resp, nil
}

// awaitLeaders waits, up to timeoutMs (nothing for <= 0) or until the connection closes,
// until the leader broker of each of parts has applied every change the controller
// published to it so far (controller.Sync), so that it takes produce requests for them.
func (c *conn) awaitLeaders(timeoutMs int32, parts []controller.PartitionState) {
	if timeoutMs <= 0 || len(parts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, time.Duration(timeoutMs)*time.Millisecond)
	defer cancel()
	var synced []int32
	for _, p := range parts {
		if p.Leader < 0 || slices.Contains(synced, p.Leader) {
			continue
		}
		synced = append(synced, p.Leader)
		if err := c.s.cfg.Controller.Sync(ctx, p.Leader); err != nil {
			return
		}
	}
}
