package broker

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/partition"
)

// proposeExpand queues follower for joining the ISR of key, for the ISR goroutine (the
// fetch path never calls the controller); never blocks.
func (b *Broker) proposeExpand(key tp, follower int32) {
	b.exp.Lock()
	if ids := b.exp.pending[key]; !slices.Contains(ids, follower) {
		b.exp.pending[key] = append(ids, follower)
	}
	b.exp.Unlock()
	select {
	case b.exp.signal <- struct{}{}:
	default:
	}
}

// isrLoop runs ISR expiration every replica.lag.time.max.ms/2 and applies
// queued expansions. It does nothing while the broker is paused.
func (b *Broker) isrLoop(ctx context.Context) {
	t := time.NewTicker(time.Duration(b.cfg.ReplicaLagTimeMaxMs) * time.Millisecond / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !b.waitResumed(ctx) {
				return
			}
			b.MaybeShrinkISRs()
		case <-b.exp.signal:
			if !b.waitResumed(ctx) {
				return
			}
			b.ApplyExpansions()
		}
	}
}

// MaybeShrinkISRs runs one ISR expiration pass over the partitions this broker leads (the
// ISR goroutine calls it every replica.lag.time.max.ms/2; exported for tests with an
// injected clock and the simulator): followers that are not caught up are removed through
// the controller. With Config.HousekeepingChangedOnly it visits only the partitions whose
// LEO or ISR changed since the previous pass and those where a follower of the ISR was
// behind the leader's LEO then (changes.go); the others have every ISR follower at the
// leader's LEO, caught up whatever the time.
func (b *Broker) MaybeShrinkISRs() {
	if b.usable() != nil {
		return
	}
	if !b.cfg.HousekeepingChangedOnly {
		for _, h := range b.allReplicas() {
			if p := h.r.PrepareShrink(); p != nil {
				b.alterISR(h, p, false)
			}
		}
		return
	}
	for _, h := range b.isrSet.take(nil) {
		p, lagging := h.r.PrepareShrinkLagging()
		if lagging {
			b.isrSet.mark(h) // checked again at the next pass
		}
		if p != nil {
			b.alterISR(h, p, false)
		}
	}
}

// ApplyExpansions proposes the queued ISR expansions to the controller (the ISR goroutine
// calls it when the fetch path queued one; exported for the simulator). Each is checked
// again first (PrepareExpand).
func (b *Broker) ApplyExpansions() {
	b.exp.Lock()
	pending := b.exp.pending
	b.exp.pending = make(map[tp][]int32, len(pending))
	b.exp.Unlock()
	if b.usable() != nil {
		return
	}
	keys := make([]tp, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, tpLess)
	for _, key := range keys {
		h := b.lookup(key.topic, key.partition)
		if h == nil {
			continue
		}
		for _, id := range pending[key] {
			if p := h.r.PrepareExpand(id); p != nil {
				b.alterISR(h, p, true)
			}
		}
	}
}

// alterISR sends a pending ISR change to the controller (AlterPartition) and applies the
// accepted state, or withdraws the change when it is refused. Not called with b.apply held;
// the accepted state is applied with it held.
func (b *Broker) alterISR(h *hosted, p *partition.ISRProposal, expand bool) {
	st := p.Base
	if p.FlushFirst {
		// A shrink below min.insync.replicas: this leader is about to be the only replica a
		// clean election may choose, so what it acknowledged must survive its power loss
		// before the controller can commit the change (the HW waits meanwhile).
		if err := h.r.FlushLog(); err != nil {
			b.logf("broker %d: %s: ISR shrink to %v: %v", b.cfg.ID, h.key, p.ISR, b.storageFailed(err))
			h.r.AbortISRChange(p)
			return
		}
	}
	b.sendAlterPartition(h, p, expand, controller.AlterPartitionRequest{
		Topic: st.Topic, Partition: st.Partition, Leader: b.cfg.ID, LeaderBrokerEpoch: b.epoch.Load(),
		LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch, ISR: p.ISR, BrokerEpochs: p.BrokerEpochs,
	}, false)
}

// sendAlterPartition sends req, the request of the pending change p (resent: again, after an
// attempt whose answer was lost), through Config.AlterPartition, or straight to the
// controller when that is nil (the answer then comes before it returns).
func (b *Broker) sendAlterPartition(h *hosted, p *partition.ISRProposal, expand bool, req controller.AlterPartitionRequest, resent bool) {
	answer := func(newSt controller.PartitionState, err error) {
		b.onAlterPartition(h, p, expand, req, resent, newSt, err)
	}
	if b.cfg.AlterPartition == nil {
		answer(b.ctrl.AlterPartition(req))
		return
	}
	b.cfg.AlterPartition(req, answer)
}

// onAlterPartition handles the answer to the AlterPartition request req of the pending change
// p. An answer lost on the way (RequestTimedOut) leaves the outcome unknown: the change stays
// pending (the HW keeps counting the maximal ISR) and the same request is sent again while p
// is still the pending change, as Kafka's AlterPartitionManager does. A refusal withdraws p,
// except that a resent request refused because the controller's state moved on
// (INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER) leaves p pending: an
// earlier attempt may be what moved it (its answer was lost), and withdrawing an expansion the
// controller accepted would let the HW pass the new member's LEO. The state the controller
// publishes settles p then, as Kafka keeps its pending state on these errors. An accepted
// state is applied under b.apply (a state older than the one applied meanwhile, by a metadata
// update that overtook the answer, is ignored by applyLocked).
func (b *Broker) onAlterPartition(h *hosted, p *partition.ISRProposal, expand bool, req controller.AlterPartitionRequest, resent bool, newSt controller.PartitionState, err error) {
	st := p.Base
	if err != nil && errors.Is(err, kerr.RequestTimedOut) {
		if b.running() && h.r.ISRChangePending(p) {
			b.sendAlterPartition(h, p, expand, req, true)
		}
		return
	}
	stale := err != nil && (errors.Is(err, kerr.InvalidUpdateVersion) || errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.NotLeaderForPartition))
	if stale && resent {
		return // settled by the controller's state, which is on its way
	}
	if err != nil {
		h.r.AbortISRChange(p)
		if !stale {
			// e.g. a fenced follower proposed for the ISR: log each distinct
			// error once, not on every fetch that re-proposes it.
			msg := err.Error()
			h.alter.Lock()
			repeat := h.alter.lastErr == msg
			h.alter.lastErr = msg
			h.alter.Unlock()
			if !repeat {
				b.logf("broker %d: %s: AlterPartition isr=%v: %v", b.cfg.ID, h.key, p.ISR, err)
			}
		}
		// Stale: the subscription delivers the current state.
		return
	}
	if newSt.PartitionEpoch == st.PartitionEpoch {
		h.r.AbortISRChange(p) // nothing changed
		return
	}
	b.apply.Lock()
	if b.running() {
		if err := b.applyLocked(newSt); err != nil {
			b.logf("broker %d: %s: applying %v: %v", b.cfg.ID, h.key, newSt, err)
		}
	}
	b.apply.Unlock()
	// Counted after the apply: whoever sees the counter sees the new ISR.
	if expand {
		b.isrExpands.Add(1)
	} else {
		b.isrShrinks.Add(1)
	}
	b.notifyChanged()
}
