package broker

import (
	"fmt"
	"slices"

	"github.com/isrbench/isrbench/core/controller"
)

// onUpdate applies one controller change (the subscription callback). States older than
// the last applied one are ignored.
func (b *Broker) onUpdate(u controller.Update) {
	if !b.running() {
		return
	}
	b.apply.Lock()
	defer b.apply.Unlock()
	if !b.running() {
		return
	}
	switch {
	case u.Partition != nil:
		if err := b.applyLocked(*u.Partition); err != nil {
			b.logf("broker %d: %s-%d: applying %v: %v", b.cfg.ID, u.Partition.Topic, u.Partition.Partition, *u.Partition, err)
		}
	case u.Topic != nil && u.Topic.Deleted:
		b.deleteTopicLocked(u.Topic.Name)
	case u.Topic != nil:
		for _, h := range b.allReplicas() {
			if h.key.topic == u.Topic.Name {
				b.applyTopicConfigsLocked(h, u.Topic.Configs)
			}
		}
	case u.BrokerConfigs != nil:
		b.applyBrokerConfigsLocked(u.BrokerConfigs.Configs)
	}
}

func newer(st, old controller.PartitionState) bool {
	if st.LeaderEpoch != old.LeaderEpoch {
		return st.LeaderEpoch > old.LeaderEpoch
	}
	return st.PartitionEpoch > old.PartitionEpoch
}

func (b *Broker) applyLocked(st controller.PartitionState) error {
	key := tp{st.Topic, st.Partition}
	if !slices.Contains(st.Replicas, b.cfg.ID) {
		return nil // not hosted here (no reassignment support)
	}
	h := b.lookup(st.Topic, st.Partition)
	if h == nil {
		var err error
		var damage string
		if h, damage, err = b.openReplica(key); err != nil {
			return err
		}
		if damage != "" {
			b.logf("broker %d: %s: replica opened after start is damaged: %s", b.cfg.ID, key, damage)
		}
	} else if h.applied.Topic != "" && !newer(st, h.applied) {
		return nil
	}
	roleChange := h.applied.Topic == "" || st.LeaderEpoch != h.applied.LeaderEpoch ||
		(st.Leader == b.cfg.ID) != h.r.IsLeader()
	st = st.Clone()
	switch {
	case st.Leader == b.cfg.ID && roleChange:
		b.removeFromFetchers(key)
		if err := h.r.MakeLeader(st); err != nil {
			return fmt.Errorf("MakeLeader: %w", b.storageFailed(err))
		}
	case st.Leader == b.cfg.ID:
		h.r.ApplyISR(st)
	case roleChange:
		b.removeFromFetchers(key)
		if err := h.r.MakeFollower(st); err != nil {
			return fmt.Errorf("MakeFollower: %w", b.storageFailed(err))
		}
		if st.Leader != controller.NoLeader {
			b.addToFetcher(h, st.Leader, st.LeaderEpoch)
		}
	default:
		h.r.ApplyISR(st) // follower: ISR bookkeeping only
	}
	h.applied = st
	b.notifyChanged()
	return nil
}
