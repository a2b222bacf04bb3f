package broker

import (
	"context"
	"time"

	"github.com/isrbench/isrbench/core/partition"
)

// FollowerWakes lists the replicas whose appends (ProduceWakeLater) have not yet woken the
// fetches parked on their LEO, the followers'. Wake owes them that wake-up. It belongs to one
// goroutine (a connection's) and is reused: no allocation once grown.
type FollowerWakes struct {
	rs []*partition.Replica
}

// Pending is how many wake-ups are owed.
func (w *FollowerWakes) Pending() int { return len(w.rs) }

// Wake wakes the parked fetches of every replica listed and empties the list.
func (w *FollowerWakes) Wake() {
	for i, r := range w.rs {
		r.WakeFollowers()
		w.rs[i] = nil // keep no replica alive
	}
	w.rs = w.rs[:0]
}

// ProduceWakeLater is Produce in Kafka's order for acks 0 and 1: the appends do not wake the
// followers' parked fetches; the replicas that owe the wake-up are added to later, and the
// caller must call later.Wake once its response is written (or once it knows there will be
// none), on every path. Kafka's ReplicaManager.appendRecords hands such a response to the
// network layer before its action queue completes the delayed fetches, so that on a busy
// host the followers' work does not come between the append and the answer. What a fetch
// reads does not change: a follower that fetches meanwhile sees the new LEO; a parked one
// waits the few microseconds until Wake. acks -1 waits for the followers, so it is Produce.
func (b *Broker) ProduceWakeLater(ctx context.Context, acks int16, timeout time.Duration, parts []ProducePartition, later *FollowerWakes) (waited time.Duration) {
	if acks == -1 {
		return b.Produce(ctx, acks, timeout, parts)
	}
	waited = b.produceDelay(ctx, parts)
	b.produceAppend(acks, parts, nil, later)
	return waited
}
