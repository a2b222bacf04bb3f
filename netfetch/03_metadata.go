package netfetch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
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
// on and the client allows it. Each topic carries its topic id (v10+, KIP-516); a topic
// asked for by id (v12: null name) is resolved, UNKNOWN_TOPIC_ID when no topic has that id.
// The internal topics
// (broker.IsInternalTopic) are listed like any topic with is_internal set (Kafka's clients
// hide internal topics themselves); __consumer_offsets asked for by name is created as the
// group coordinator creates it. Metadata v0 is served (kafka-python's version probe
// sends it): its empty topic list means every topic.
//
// A topic is usable once it is visible. The controller commits a change
// before the brokers apply it, so its own state would send a client to a
// leader that answers UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER
// right after a topic is created or a leader elected, and franz-go fails a
// partition's records after a few UNKNOWN_TOPIC_OR_PARTITION. Kafka's brokers
// answer from their own metadata cache, which holds a topic only once the
// broker has applied it; here the view is the leaders' (ServerConfig.Pending):
//   - while a new partition's leader has not taken it up, its topic is
//     answered with LEADER_NOT_AVAILABLE and no partitions (as Kafka answers
//     a topic it is auto-creating; clients retry it, and keep what they knew
//     of a topic CreatePartitions extends). A partial list would be worse:
//     clients would hash keys over too few partitions, and franz-go counts a
//     partition that goes missing like UNKNOWN_TOPIC_OR_PARTITION;
//   - any other partition whose leader has not applied its leader epoch yet
//     (an election under way) is listed without a leader (LEADER_NOT_AVAILABLE).
//
// CreateTopics also waits for the new leaders (handleCreateTopics); this view
// is what protects a client when it asked with timeout_ms 0, when that wait
// timed out, or when another client learns of the topic meanwhile.
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
				if name, ok := ctrl.TopicName(t.TopicID); ok {
					names = append(names, name)
					continue
				}
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
	var ids map[string]controller.TopicID
	if len(names) > 1 {
		ids = ctrl.TopicIDs()
	}
	for _, name := range names {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		parts, ok := ctrl.Partitions(name)
		if !ok && name == group.OffsetsTopic && req.Topics != nil {
			// Internal: created with its own settings, as by the group coordinator.
			if _, err := group.EnsureOffsetsTopic(ctrl, c.s.groupConfig()); err != nil {
				mt.ErrorCode = errCode(err)
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			parts, ok = ctrl.Partitions(name)
		}
		mt.IsInternal = broker.IsInternalTopic(name)
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
		if id, ok := ids[name]; ok {
			mt.TopicID = id
		} else {
			mt.TopicID, _ = ctrl.TopicID(name) // one topic, or created by this request
		}
		pending := c.pendingLeaders(name, parts)
		if pending.taking {
			mt.ErrorCode = kerr.LeaderNotAvailable.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		for i, p := range parts {
			mt.Partitions = append(mt.Partitions, metadataPartition(p, pending.leader(i), alive))
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

// pending is which leaders of one topic's partitions are pending (ServerConfig.Pending):
// they run but have not applied their leadership yet.
type pending struct {
	leaders []bool // by index into the topic's partitions; nil when none is pending
	// taking: a new partition (leader epoch 0 and partition epoch 0: unchanged since it
	// was created) has a pending leader, so the topic is being created or extended.
	taking bool
}

func (p pending) leader(i int) bool { return p.leaders != nil && p.leaders[i] }

// pendingLeaders checks the leader of each of parts (topic's, in partition order).
func (c *conn) pendingLeaders(topic string, parts []controller.PartitionState) pending {
	var out pending
	f := c.s.cfg.Pending
	if f == nil {
		return out
	}
	id, _ := c.s.cfg.Controller.TopicID(topic)
	for i, p := range parts {
		if p.Leader < 0 || !f(p.Leader, p.Topic, id, p.Partition, p.LeaderEpoch) {
			continue
		}
		if out.leaders == nil {
			out.leaders = make([]bool, len(parts))
		}
		out.leaders[i] = true
		out.taking = out.taking || (p.LeaderEpoch == 0 && p.PartitionEpoch == 0)
	}
	return out
}

// metadataPartition is p as Metadata lists it: without a leader (LEADER_NOT_AVAILABLE)
// when it has none or its leader is pending.
func metadataPartition(p controller.PartitionState, pending bool, alive map[int32]bool) kmsg.MetadataResponseTopicPartition {
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition = p.Partition
	mp.Leader = p.Leader
	if pending {
		mp.Leader = -1
	}
	mp.LeaderEpoch = p.LeaderEpoch
	mp.Replicas = slices.Clone(p.Replicas)
	mp.ISR = slices.Clone(p.ISR)
	mp.OfflineReplicas = []int32{}
	for _, r := range p.Replicas {
		if !alive[r] {
			mp.OfflineReplicas = append(mp.OfflineReplicas, r)
		}
	}
	if mp.Leader < 0 {
		mp.ErrorCode = kerr.LeaderNotAvailable.Code
	}
	return mp
}

// autoCreate creates a topic with num.partitions and default.replication.factor (unset:
// min(3, registered brokers), as CreateTopics takes it). With fewer brokers alive than that
// it creates nothing and fails with INVALID_REPLICATION_FACTOR, as Kafka's
// AutoTopicCreationManager does: a topic created narrower would stay so for good, and would
// never count as under-replicated.
func (c *conn) autoCreate(name string) ([]controller.PartitionState, error) {
	rf := c.s.cfg.DefaultReplicationFactor
	brokers := c.s.cfg.Controller.Brokers()
	nAlive := 0
	for _, b := range brokers {
		if b.Alive {
			nAlive++
		}
	}
	if rf <= 0 {
		rf = int16(min(3, len(brokers)))
	}
	if int(rf) > nAlive {
		return nil, fmt.Errorf("auto-creating topic %q: default.replication.factor %d is larger than the %d alive brokers: %w",
			name, rf, nAlive, kerr.InvalidReplicationFactor)
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
