package broker

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// proposeExpand queues an ISR expansion proposed by UpdateFollower for the
// ISR goroutine (the fetch path never calls the controller). A newer
// proposal for the same partition is merged with a pending one (the ISR
// goroutine re-bases it on the current ISR); never blocks.
func (b *Broker) proposeExpand(key tp, isr []int32) {
	b.expMu.Lock()
	if old, ok := b.expPending[key]; ok {
		for _, id := range isr {
			if !slices.Contains(old, id) {
				old = append(old, id)
			}
		}
		b.expPending[key] = old
	} else {
		b.expPending[key] = slices.Clone(isr)
	}
	b.expMu.Unlock()
	select {
	case b.expSignal <- struct{}{}:
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
		case <-b.expSignal:
			if !b.waitResumed(ctx) {
				return
			}
			b.applyExpansions()
		}
	}
}

// MaybeShrinkISRs runs one ISR expiration pass over the partitions this
// broker leads (the ISR goroutine calls it every replica.lag.time.max.ms/2;
// exported for tests with an injected clock). Followers not caught up within
// the lag time are removed through the controller.
func (b *Broker) MaybeShrinkISRs() {
	for _, h := range b.allReplicas() {
		if !h.r.IsLeader() {
			continue
		}
		isr := h.r.MaybeShrinkISR()
		if isr == nil {
			continue
		}
		b.alterISR(h, isr, false)
	}
}

func (b *Broker) applyExpansions() {
	b.expMu.Lock()
	pending := b.expPending
	b.expPending = make(map[tp][]int32, len(pending))
	b.expMu.Unlock()
	for key, proposed := range pending {
		h := b.lookup(key.topic, key.partition)
		if h == nil || !h.r.IsLeader() {
			continue
		}
		// Re-base on the current ISR: only add the proposed newcomers (a
		// shrink may have happened since the proposal).
		cur := h.r.ISR()
		isr := slices.Clone(cur)
		for _, id := range proposed {
			if !slices.Contains(isr, id) {
				isr = append(isr, id)
			}
		}
		if len(isr) == len(cur) {
			continue
		}
		b.alterISR(h, isr, true)
	}
}

// alterISR asks the controller to change the ISR of a led partition and
// applies the accepted state. Not called under applyMu (the controller may
// wait for subscription delivery); the accepted state is applied under it.
func (b *Broker) alterISR(h *hosted, isr []int32, expand bool) {
	st := h.r.State()
	if st.Leader != b.cfg.ID {
		return
	}
	newSt, err := b.ctrl.AlterPartition(st.Topic, st.Partition, b.cfg.ID, st.LeaderEpoch, st.PartitionEpoch, isr)
	if err != nil {
		if !errors.Is(err, kerr.InvalidUpdateVersion) && !errors.Is(err, kerr.FencedLeaderEpoch) && !errors.Is(err, kerr.NotLeaderForPartition) {
			// e.g. a fenced follower proposed for the ISR: log each distinct
			// error once, not on every fetch that re-proposes it.
			msg := err.Error()
			h.alterMu.Lock()
			repeat := h.lastAlterErr == msg
			h.lastAlterErr = msg
			h.alterMu.Unlock()
			if !repeat {
				b.logf("broker %d: %s: AlterPartition isr=%v: %v", b.cfg.ID, h.key, isr, err)
			}
		}
		// Stale: the subscription delivers the current state.
		return
	}
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	if b.running() {
		if err := b.applyLocked(newSt); err != nil {
			b.logf("broker %d: %s: applying %v: %v", b.cfg.ID, h.key, newSt, err)
		}
	}
	// Counted after the apply: whoever sees the counter sees the new ISR.
	if expand {
		b.isrExpands.Add(1)
	} else {
		b.isrShrinks.Add(1)
	}
	b.notifyChanged()
}
