package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// image is the part of the controller's state that the metadata log records: replaying the
// log's records in order (apply) rebuilds it, and records gives it back as a snapshot. The
// controller keeps two: the live one it changes under its mutex, and the durable one, which
// holds exactly what the metadata log holds (each batch is applied to it once fsynced). A
// change that cannot be persisted is rolled back from the durable one.
type image struct {
	brokers map[int32]*brokerState
	topics  map[string]*topicState
	// created counts created topics; topic k's placement starts at
	// broker index k % n so that topics do not all start at one broker. It also
	// numbers the topics' ids (topicState.seq).
	created int
	// brokerConfigs holds the dynamic broker configs by resource: "" the cluster-wide
	// default, "<id>" one broker's (Kafka's DYNAMIC_DEFAULT_BROKER_CONFIG and
	// DYNAMIC_BROKER_CONFIG); values validated, entries never empty.
	brokerConfigs map[string]map[string]string
	// lastBrokerEpoch is the epoch of the newest registration (broker epochs
	// increase over the cluster's life, across controller restarts).
	lastBrokerEpoch int64
	// users are the SCRAM users (users.go).
	users scramUsers
}

func newImage() image {
	return image{
		brokers:       make(map[int32]*brokerState),
		topics:        make(map[string]*topicState),
		brokerConfigs: make(map[string]map[string]string),
	}
}

func (m *image) sortedTopics() []string {
	return slices.Sorted(maps.Keys(m.topics))
}

// cloneTopics returns a deep copy of m's topics.
func (m *image) cloneTopics() map[string]*topicState {
	out := make(map[string]*topicState, len(m.topics))
	for name, t := range m.topics {
		cl := &topicState{name: t.name, seq: t.seq, id: t.id, configs: maps.Clone(t.configs), parts: make([]PartitionState, len(t.parts))}
		for i := range t.parts {
			cl.parts[i] = t.parts[i].Clone()
		}
		if t.damaged != nil {
			cl.damaged = make(map[int32][]int32, len(t.damaged))
			for p, b := range t.damaged {
				cl.damaged[p] = slices.Clone(b)
			}
		}
		out[name] = cl
	}
	return out
}

func cloneBrokerConfigs(in map[string]map[string]string) map[string]map[string]string {
	out := make(map[string]map[string]string, len(in))
	for res, cfg := range in {
		out[res] = maps.Clone(cfg)
	}
	return out
}

// records is the whole image as records, in an order that apply replays.
func (m *image) records() []record {
	var out []record
	for _, id := range slices.Sorted(maps.Keys(m.brokers)) {
		b := m.brokers[id]
		out = append(out, record{Type: "broker", Broker: &brokerRecord{ID: id, Epoch: b.epoch, Host: b.info.Host, Port: b.info.Port}})
	}
	for _, res := range slices.Sorted(maps.Keys(m.brokerConfigs)) {
		out = append(out, record{Type: "broker-config", BrokerConfig: &brokerConfigRecord{Resource: res, Configs: maps.Clone(m.brokerConfigs[res])}})
	}
	out = append(out, m.userRecords()...)
	if len(m.topics) == 0 && m.created > 0 {
		// Every topic was deleted: keep the creation count, so topic ids are never reused.
		out = append(out, record{Type: "delete-topic", Topic: &topicRecord{Name: "", Created: m.created}})
	}
	for _, name := range m.sortedTopics() {
		t := m.topics[name]
		out = append(out, record{Type: "topic", Topic: &topicRecord{Name: name, ID: t.seq, TopicID: t.id.String(), Partitions: int32(len(t.parts)), Configs: maps.Clone(t.configs), Created: m.created}})
		for i := range t.parts {
			cl := t.parts[i].Clone()
			out = append(out, record{Type: "partition", Partition: &cl})
		}
		for p := int32(0); p < int32(len(t.parts)); p++ {
			if len(t.damaged[p]) > 0 {
				out = append(out, record{Type: "damaged", Damaged: &damagedRecord{Topic: name, Partition: p, Brokers: slices.Clone(t.damaged[p])}})
			}
		}
	}
	return out
}

// apply replays one record. It copies what it keeps: r may be applied to another image too.
func (m *image) apply(r record) (err error) {
	switch r.Type {
	case "broker":
		b := r.Broker
		if b == nil {
			return errors.New("no broker")
		}
		if cur, ok := m.brokers[b.ID]; ok {
			// A new registration of a known broker: its liveness is the live state's.
			cur.epoch, cur.info.Host, cur.info.Port = b.Epoch, b.Host, b.Port
		} else {
			m.brokers[b.ID] = &brokerState{info: BrokerInfo{ID: b.ID, Host: b.Host, Port: b.Port}, epoch: b.Epoch}
		}
		m.lastBrokerEpoch = max(m.lastBrokerEpoch, b.Epoch)
	case "topic":
		t := r.Topic
		if t == nil || t.Partitions < 1 || t.Partitions > MaxPartitions {
			return errors.New("bad topic")
		}
		ts := m.topics[t.Name]
		if ts == nil {
			ts = &topicState{name: t.Name}
			m.topics[t.Name] = ts
		}
		ts.seq = t.ID
		if ts.id, err = recordedTopicID(t); err != nil {
			return err
		}
		ts.configs = maps.Clone(t.Configs)
		if ts.configs == nil {
			ts.configs = map[string]string{}
		}
		for int32(len(ts.parts)) < t.Partitions {
			ts.parts = append(ts.parts, PartitionState{})
		}
		ts.parts = ts.parts[:t.Partitions]
		m.created = max(m.created, t.Created)
	case "partition":
		p := r.Partition
		if p == nil {
			return errors.New("no partition")
		}
		t, ok := m.topics[p.Topic]
		if !ok || p.Partition < 0 || int(p.Partition) >= len(t.parts) {
			return fmt.Errorf("partition %s-%d of an unknown topic", p.Topic, p.Partition)
		}
		t.parts[p.Partition] = p.Clone()
	case "damaged":
		d := r.Damaged
		if d == nil {
			return errors.New("no damaged replicas")
		}
		t, ok := m.topics[d.Topic]
		if !ok {
			return errors.New("damaged replicas of an unknown topic")
		}
		if t.damaged == nil {
			t.damaged = map[int32][]int32{}
		}
		if len(d.Brokers) == 0 {
			delete(t.damaged, d.Partition)
		} else {
			t.damaged[d.Partition] = slices.Clone(d.Brokers)
		}
	case "delete-topic":
		if r.Topic == nil {
			return errors.New("no topic")
		}
		delete(m.topics, r.Topic.Name)
		m.created = max(m.created, r.Topic.Created)
	case "broker-config":
		bc := r.BrokerConfig
		if bc == nil {
			return errors.New("no broker config")
		}
		if err := validBrokerConfigResource(bc.Resource); err != nil {
			return err
		}
		if len(bc.Configs) == 0 {
			delete(m.brokerConfigs, bc.Resource)
		} else {
			m.brokerConfigs[bc.Resource] = maps.Clone(bc.Configs)
		}
	case "scram-user":
		return m.applyUser(r)
	default:
		return fmt.Errorf("unknown record type %q", r.Type)
	}
	return nil
}

// Records of changes (mu held): appended to the operation's batch.

func (c *Controller) recordBrokerLocked(b *brokerState) {
	c.mu.batch = append(c.mu.batch, record{Type: "broker", Broker: &brokerRecord{ID: b.info.ID, Epoch: b.epoch, Host: b.info.Host, Port: b.info.Port}})
}

func (c *Controller) recordTopicLocked(t *topicState) {
	c.mu.topicsChanged = true
	c.mu.batch = append(c.mu.batch, record{Type: "topic", Topic: &topicRecord{Name: t.name, ID: t.seq, TopicID: t.id.String(), Partitions: int32(len(t.parts)), Configs: maps.Clone(t.configs), Created: c.mu.created}})
}

func (c *Controller) recordDeleteTopicLocked(name string) {
	c.mu.topicsChanged = true
	c.mu.batch = append(c.mu.batch, record{Type: "delete-topic", Topic: &topicRecord{Name: name, Created: c.mu.created}})
}

func (c *Controller) recordBrokerConfigLocked(resource string) {
	c.mu.batch = append(c.mu.batch, record{Type: "broker-config", BrokerConfig: &brokerConfigRecord{Resource: resource, Configs: maps.Clone(c.mu.brokerConfigs[resource])}})
}

func (c *Controller) recordPartitionLocked(st *PartitionState) {
	cl := st.Clone()
	c.mu.batch = append(c.mu.batch, record{Type: "partition", Partition: &cl})
}

func (c *Controller) recordDamagedLocked(t *topicState, p int32) {
	c.mu.batch = append(c.mu.batch, record{Type: "damaged", Damaged: &damagedRecord{Topic: t.name, Partition: p, Brokers: slices.Clone(t.damaged[p])}})
}

// loadLocked replays recs into an empty controller (live and durable images), then takes
// every partition offline and every broker as fenced (a restarted controller has heard from
// no broker yet), keeping the ISRs so the first ISR member to register leads again.
func (c *Controller) loadLocked(recs []record, rec *Recovery) error {
	for i, r := range recs {
		if err := c.mu.image.apply(r); err != nil {
			return fmt.Errorf("controller: metadata record %d (%s): %w", i+1, r.Type, err)
		}
		if err := c.mu.durable.apply(r); err != nil {
			return fmt.Errorf("BUG: controller: metadata record %d (%s) applies to one image only: %w", i+1, r.Type, err)
		}
	}
	for _, name := range c.sortedTopicsLocked() {
		t := c.mu.topics[name]
		for i := range t.parts {
			st := &t.parts[i]
			if st.Topic == "" {
				return fmt.Errorf("controller: metadata: topic %s partition %d has no state (no partition record follows its topic record)", name, i)
			}
			rec.Partitions++
			if st.Leader == NoLeader {
				continue
			}
			next := st.Clone()
			next.Leader = NoLeader
			next.LeaderEpoch++
			next.PartitionEpoch++
			c.storeLocked(st, next)
		}
	}
	rec.Topics = len(c.mu.topics)
	rec.Brokers = len(c.mu.brokers)
	return c.flushLocked()
}
