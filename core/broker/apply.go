package broker

import (
	"fmt"
	"maps"
	"slices"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// onUpdates applies a batch of controller changes in order (the subscription callback).
// States older than the last applied one are ignored. A run of changes that each create a
// replica this broker does not have yet (no directory) is applied together: see
// createReplicasLocked.
func (b *Broker) onUpdates(us []controller.Update) {
	for i := 0; i < len(us); {
		i += b.applySomeLocked(us[i:])
	}
	b.startMetadataWriter() // the new replicas' partition.metadata, once the batch is applied
}

// createChunk is the most changes a creation batch applies with b.apply held: one syncfs
// per createChunk new replicas, and what waits for b.apply (an ISR change, a retry) waits
// for one chunk, not for a whole 10,000-partition topic.
const createChunk = 1000

// applySomeLocked applies the first change of us, or the run of creations it starts (at most
// createChunk), under b.apply, and returns how many it consumed (all when the broker stops).
func (b *Broker) applySomeLocked(us []controller.Update) int {
	if !b.running() {
		return len(us)
	}
	b.apply.Lock()
	defer b.apply.Unlock()
	if !b.running() {
		return len(us)
	}
	if n := b.newReplicasAt(us[:min(len(us), createChunk)]); n > 0 {
		b.createReplicasLocked(us[:n])
		return n
	}
	b.applyUpdateLocked(us[0])
	return 1
}

// onUpdate applies one controller change.
func (b *Broker) onUpdate(u controller.Update) { b.onUpdates([]controller.Update{u}) }

// applyUpdateLocked applies one controller change (b.apply held).
func (b *Broker) applyUpdateLocked(u controller.Update) {
	switch {
	case u.Partition != nil:
		if err := b.applyLocked(*u.Partition); err != nil {
			b.applyFailedLocked(tp{u.Partition.Topic, u.Partition.Partition}, err)
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

// applyFailedLocked remembers a partition whose state could not be applied for want of a file
// descriptor, for RetryResourceFailures (b.apply held).
func (b *Broker) applyFailedLocked(key tp, err error) {
	if log.IsResourceError(err) {
		b.apply.retry[key] = true
	}
}

// RetryResourceFailures applies again the current controller state of the partitions whose
// last state could not be applied for want of a file descriptor (their replica could not be
// opened, or its new leader epoch not recorded), so that they are hosted once descriptors
// are free again; the housekeeping goroutine calls it at every HW checkpoint interval. It
// returns how many still wait.
func (b *Broker) RetryResourceFailures() int {
	b.apply.Lock()
	defer b.apply.Unlock()
	return b.retryResourceFailuresLocked()
}

// retryResourceFailuresIfIdle is RetryResourceFailures unless controller changes are being
// applied (a batch creating thousands of replicas holds b.apply for seconds): the
// housekeeping goroutine, which also sends the heartbeats, must not wait for them.
func (b *Broker) retryResourceFailuresIfIdle() {
	if !b.apply.TryLock() {
		return // the next HW checkpoint interval tries again
	}
	defer b.apply.Unlock()
	b.retryResourceFailuresLocked()
}

func (b *Broker) retryResourceFailuresLocked() int {
	if !b.running() {
		return len(b.apply.retry)
	}
	for _, key := range slices.SortedFunc(maps.Keys(b.apply.retry), tpLess) {
		st, ok := b.ctrl.Partition(key.topic, key.partition)
		if !ok || !slices.Contains(st.Replicas, b.cfg.ID) {
			delete(b.apply.retry, key) // deleted or moved meanwhile
			continue
		}
		err := b.applyLocked(st)
		if err != nil && log.IsResourceError(err) {
			continue
		}
		delete(b.apply.retry, key)
		if err != nil {
			b.logf("broker %d: %s: applying %v again: %v", b.cfg.ID, key, st, err)
		}
	}
	return len(b.apply.retry)
}

func newer(st, old controller.PartitionState) bool {
	if st.LeaderEpoch != old.LeaderEpoch {
		return st.LeaderEpoch > old.LeaderEpoch
	}
	return st.PartitionEpoch > old.PartitionEpoch
}

func (b *Broker) applyLocked(st controller.PartitionState) error {
	return b.applyStateLocked(st, b.lookup(st.Topic, st.Partition), nil)
}

// applyStateLocked applies st to h (nil: the replica is opened, created if new). With a
// creation batch, h is a replica of the batch, not hosted yet: a follower's fetching and the
// change notification are left to the batch (see createReplicasLocked).
func (b *Broker) applyStateLocked(st controller.PartitionState, h *hosted, batch *createBatch) error {
	key := tp{st.Topic, st.Partition}
	if !slices.Contains(st.Replicas, b.cfg.ID) {
		if h != nil {
			b.removeReassignedLocked(h, st)
		}
		return nil
	}
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
		if batch != nil {
			break // fetching starts once the batch is durable
		}
		b.truncateDamagedLocked(h) // a damaged leader demoted: below its damage first
		if st.Leader != controller.NoLeader {
			b.addToFetcher(h, st.Leader, st.LeaderEpoch)
		}
	default:
		h.r.ApplyISR(st) // follower: ISR bookkeeping only
	}
	h.applied = st
	if batch == nil {
		b.notifyChanged()
	}
	return nil
}
