package partition

import (
	"sync"
	"sync/atomic"
)

// notifier is a broadcast "something changed" signal without a lock: the
// current channel is closed and replaced on the next notify, but only when
// someone armed it since the last replacement, so notify costs one atomic
// load and allocates nothing while nobody waits.
//
// Waiter protocol (no lost wake-up): c := n.wait() (load the channel, then
// arm), then check the condition, then block on c. A notifier changes the
// state first, then calls notify. If the waiter's check missed the change,
// the notifier's arm test comes after the waiter armed, so either it
// replaces the channel itself or another notifier replaced it after the
// waiter loaded it; both close the waiter's channel.
//
// It also carries the purgatory's registrations (purgatory.go): seq counts notifications, and
// every Waiter registered on it is marked on each one.
type notifier struct {
	armed atomic.Bool
	ch    atomic.Pointer[chan struct{}]

	seq atomic.Uint64 // notifications so far
	nw  atomic.Int32  // len(ws), read without wmu
	wmu sync.Mutex
	ws  []watcher // registered waiters
}

func (n *notifier) init() {
	c := make(chan struct{})
	n.ch.Store(&c)
}

// wait returns the channel the next notify closes.
func (n *notifier) wait() <-chan struct{} {
	c := n.ch.Load()
	n.armed.Store(true)
	return *c
}

// notify wakes the current waiters, if any armed.
func (n *notifier) notify() {
	n.seq.Add(1)
	n.wakeWatchers()
	if !n.armed.Load() || !n.armed.Swap(false) {
		return
	}
	n.replace()
}

// notifyAll wakes the current waiters unconditionally (rare state changes:
// ISR, leadership, close).
func (n *notifier) notifyAll() {
	n.seq.Add(1)
	n.wakeWatchers()
	n.armed.Store(false)
	n.replace()
}

func (n *notifier) replace() {
	c := make(chan struct{})
	old := n.ch.Swap(&c)
	close(*old)
}
