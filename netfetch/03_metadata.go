package netfetch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/group"
)

func init() {
	register(api{key: 3, min: 0, max: 12, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleMetadata(req.(*kmsg.MetadataRequest))
	}})
}

// ClusterID is the cluster id reported in Metadata.
const ClusterID = "isrbench"

// handleMetadata answers Metadata from the controller: the alive brokers,
// and per partition the leader (-1 with LEADER_NOT_AVAILABLE when none),
// leader epoch, replicas, ISR and offline replicas (replicas on fenced
// brokers). Unknown topics are created when auto.create.topics.enable is
// on and the client allows it. Topic IDs are all zero. __consumer_offsets is
// listed like any topic with is_internal set (Kafka's clients hide internal
// topics themselves); asked for by name it is created as the group
// coordinator creates it. Metadata v0 is served (kafka-python's version probe
// sends it): its empty topic list means every topic.
func (c *conn) handleMetadata(req *kmsg.MetadataRequest) (kmsg.Response, error) {
	ctrl := c.s.cfg.Controller
	resp := kmsg.NewPtrMetadataResponse()
	cid := ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = -1
	alive := map[int32]bool{}
	for _, b := range ctrl.Brokers() {
		if !b.Alive {
			continue
		}
		alive[b.ID] = true
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.ID, b.Host, b.Port
		mb.Host, mb.Port = c.advertised(b.ID, b.Host, b.Port) // the client's listener (security.go)
		resp.Brokers = append(resp.Brokers, mb)
		if resp.ControllerID == -1 || b.ID < resp.ControllerID {
			resp.ControllerID = b.ID // no controller broker exists: report the lowest alive id
		}
	}

	var names []string
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) { // v0: an empty list means all topics
		names = ctrl.Topics()
		slices.Sort(names)
	} else {
		for _, t := range req.Topics {
			if t.Topic == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = t.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			names = append(names, *t.Topic)
		}
	}
	allowAuto := req.Version < 4 || req.AllowAutoTopicCreation
	for _, name := range names {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		parts, ok := ctrl.Partitions(name)
		if !ok && name == group.OffsetsTopic && req.Topics != nil {
			// Internal: created with its own settings, as by the group coordinator.
			if _, err := group.EnsureOffsetsTopic(ctrl, c.s.cfg.Group); err != nil {
				mt.ErrorCode = errCode(err)
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			parts, ok = ctrl.Partitions(name)
		}
		mt.IsInternal = name == group.OffsetsTopic
		if !ok && c.s.cfg.AutoCreateTopics && allowAuto && req.Topics != nil {
			var err error
			parts, err = c.autoCreate(name)
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				mt.ErrorCode = errCode(err)
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			parts, ok = ctrl.Partitions(name)
		}
		if !ok {
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		for _, p := range parts {
			mt.Partitions = append(mt.Partitions, metadataPartition(p, alive))
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

func metadataPartition(p controller.PartitionState, alive map[int32]bool) kmsg.MetadataResponseTopicPartition {
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition = p.Partition
	mp.Leader = p.Leader
	mp.LeaderEpoch = p.LeaderEpoch
	mp.Replicas = slices.Clone(p.Replicas)
	mp.ISR = slices.Clone(p.ISR)
	mp.OfflineReplicas = []int32{}
	for _, r := range p.Replicas {
		if !alive[r] {
			mp.OfflineReplicas = append(mp.OfflineReplicas, r)
		}
	}
	if p.Leader < 0 {
		mp.ErrorCode = kerr.LeaderNotAvailable.Code
	}
	return mp
}

// autoCreate creates a topic with num.partitions and
// default.replication.factor (capped at the number of alive brokers).
func (c *conn) autoCreate(name string) ([]controller.PartitionState, error) {
	rf := c.s.cfg.DefaultReplicationFactor
	nAlive := 0
	for _, b := range c.s.cfg.Controller.Brokers() {
		if b.Alive {
			nAlive++
		}
	}
	if rf <= 0 {
		rf = int16(min(3, nAlive))
	}
	if int(rf) > nAlive {
		rf = int16(nAlive)
	}
	if rf <= 0 {
		return nil, fmt.Errorf("auto-creating topic %q: no alive broker: %w", name, kerr.LeaderNotAvailable)
	}
	parts, err := c.s.cfg.Controller.CreateTopic(name, c.s.cfg.NumPartitions, rf, nil)
	if err != nil {
		return nil, err
	}
	// Answer once the brokers have applied the new leaders, so that the client's first
	// Produce finds them (kafka-python does not retry UNKNOWN_TOPIC_OR_PARTITION).
	ctx, cancel := context.WithTimeout(c.ctx, autoCreateSyncTimeout)
	defer cancel()
	for _, b := range c.s.cfg.Controller.Brokers() {
		if b.Alive {
			if err := c.s.cfg.Controller.Sync(ctx, b.ID); err != nil {
				return nil, fmt.Errorf("auto-created topic %q: brokers have not applied its leaders yet: %w", name, kerr.LeaderNotAvailable)
			}
		}
	}
	return parts, nil
}

// autoCreateSyncTimeout bounds how long Metadata waits for the brokers to apply an
// auto-created topic (LEADER_NOT_AVAILABLE after it, which clients retry).
const autoCreateSyncTimeout = 5 * time.Second
