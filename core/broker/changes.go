package broker

import (
	"slices"
	"sync"

	"github.com/isrbench/isrbench/core/partition"
)

// Change sets (isrbench.housekeeping.changed.only, default true): the periodic passes over the
// hosted replicas, the HW checkpoint and the ISR expiry, visit only the replicas that changed
// since their previous pass. Each pass owns a changeSet: a partition.Waiter that never wakes,
// registered on every hosted replica's signals under the replica's slot, so a signal marks only
// its replica, and a pass takes the marked ones. A broker with 10,000 idle partitions visits
// none of them; with the switch off each pass visits every hosted replica (the ablation).
//
//   - HW checkpoint (checkpoint.go): marked by the HW signal (Replica.WatchHWChanges: every
//     HW change, ISR and role change). The entries of the file are kept between passes and
//     rebuilt from every replica only when a replica or a startup entry went away.
//   - ISR expiry (isr.go): marked by the LEO and HW signals (Replica.WatchISRChanges: appends,
//     ISR and role changes, a follower's fetch offset moving back). A leader whose ISR
//     followers are all at its LEO stays in sync whatever the time (Kafka's isCaughtUp), so it
//     is visited again only once it changes; one with a follower behind is visited at every
//     pass until the follower catches up or leaves the ISR
//     (partition.Replica.PrepareShrinkLagging).

// changeSet is the set of hosted replicas one pass must visit (see above). Safe for
// concurrent use: registerLocked and unregisterLocked add and remove replicas (b.apply held),
// the pass takes and marks them. Its mutex is a leaf but for the replica's and the waiter's
// locks, taken inside it.
type changeSet struct {
	watch func(r *partition.Replica, w *partition.Waiter, i int32)
	w     *partition.Waiter

	mu    sync.Mutex
	slots []*hosted // by waiter index; nil: free
	index map[*hosted]int32
	free  []int32
	dirty []int32 // scratch of take
}

func newChangeSet(watch func(r *partition.Replica, w *partition.Waiter, i int32)) *changeSet {
	return &changeSet{watch: watch, w: partition.NewWaiter(), index: map[*hosted]int32{}}
}

// add registers h, marked: the next pass visits it.
func (c *changeSet) add(h *hosted) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.index[h]; ok {
		return
	}
	var i int32
	if n := len(c.free); n > 0 {
		i, c.free = c.free[n-1], c.free[:n-1]
	} else {
		i = int32(len(c.slots))
		c.slots = append(c.slots, nil)
		c.w.Grow(len(c.slots))
	}
	c.slots[i], c.index[h] = h, i
	c.watch(h.r, c.w, i)
	c.w.Mark(i)
}

// remove unregisters h (a stale mark on its slot costs its next owner one visit).
func (c *changeSet) remove(h *hosted) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[h]
	if !ok {
		return
	}
	h.r.UnwatchChanges(c.w)
	delete(c.index, h)
	c.slots[i] = nil
	c.free = append(c.free, i)
}

// mark makes the next pass visit h again.
func (c *changeSet) mark(h *hosted) {
	c.mu.Lock()
	if i, ok := c.index[h]; ok {
		c.w.Mark(i)
	}
	c.mu.Unlock()
}

// take appends to dst the replicas marked since the last take, each once, sorted by topic and
// partition (a deterministic order for the simulator), and clears their marks.
func (c *changeSet) take(dst []*hosted) []*hosted {
	c.mu.Lock()
	c.dirty = c.w.Dirty(c.dirty[:0])
	n := len(dst)
	for _, i := range c.dirty {
		if h := c.slots[i]; h != nil {
			dst = append(dst, h)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(dst[n:], func(x, y *hosted) int { return tpLess(x.key, y.key) })
	return dst
}

// registerChanges adds h to the change sets (registerLocked); with the switch off there is
// no registration (the passes visit every replica).
func (b *Broker) registerChanges(h *hosted) {
	if !b.cfg.HousekeepingChangedOnly {
		return
	}
	b.ckptSet.add(h)
	b.isrSet.add(h)
}

// unregisterLocked removes h from the hosted replicas and the change sets (b.apply held); the
// HW checkpoint's entries are rebuilt at its next write.
func (b *Broker) unregisterLocked(h *hosted) {
	b.mu.Lock()
	delete(b.mu.replicas, h.key)
	b.mu.Unlock()
	b.ckptSet.remove(h)
	b.isrSet.remove(h)
	b.ckpt.Lock()
	b.ckpt.rebuild = true
	b.ckpt.Unlock()
}
