package partition

import "sync"

// Waiter is a parked fetch's registration in the purgatory keyed by partition (Kafka's
// DelayedOperationPurgatory): it watches many replicas' LEO or HW signals under one index
// each, and a signal marks only its own index dirty and wakes the waiter, so a wake-up costs
// the same whatever the number of partitions watched.
//
// Protocol (no lost wake-up): read the signal's sequence (LEOSeq / HWSeq), check the state,
// then Watch with that sequence: Watch registers first and marks the index dirty at once
// when the sequence moved meanwhile. Then block on C and take the dirty indexes with Dirty.
// A Waiter is owned by one goroutine (Watch, Dirty, Reset, Unwatch), the signalling
// goroutines only mark and wake it; reuse it after Unwatch (allocation-free once grown).
type Waiter struct {
	// C receives a value when some index turned dirty since the last Dirty (capacity 1:
	// wake-ups coalesce).
	C chan struct{}

	mu struct {
		sync.Mutex
		marked []bool  // by index: already in dirty
		dirty  []int32 // indexes signalled since the last Dirty, each once
	}
	regs []*notifier // where this waiter is registered (owner only)
	// fn, if set (NewWaiterFunc), is called on every wake-up instead of a send on C.
	fn func()
}

// NewWaiter returns an empty Waiter.
func NewWaiter() *Waiter { return &Waiter{C: make(chan struct{}, 1)} }

// NewWaiterFunc returns an empty Waiter whose wake-ups call f instead of sending on C (nil):
// on the signalling goroutine, while that signal's registrations are locked, or on the owner's
// inside Watch when the sequence moved. So f must not block, nor Watch or Unwatch any Waiter;
// it may be called concurrently by several signals. The broker completes acks=all produces
// with it on the goroutine that advances the HW.
func NewWaiterFunc(f func()) *Waiter { return &Waiter{fn: f} }

// Reset prepares the waiter for indexes [0, n): nothing dirty, no pending wake-up. Call it
// only when unregistered (new or after Unwatch).
func (w *Waiter) Reset(n int) {
	w.mu.Lock()
	if cap(w.mu.marked) < n {
		w.mu.marked = make([]bool, n)
	}
	w.mu.marked = w.mu.marked[:n]
	clear(w.mu.marked)
	w.mu.dirty = w.mu.dirty[:0]
	w.mu.Unlock()
	select {
	case <-w.C:
	default:
	}
}

// Dirty appends to dst the indexes signalled since the last call (each once) and clears them.
func (w *Waiter) Dirty(dst []int32) []int32 {
	w.mu.Lock()
	for _, i := range w.mu.dirty {
		w.mu.marked[i] = false
	}
	dst = append(dst, w.mu.dirty...)
	w.mu.dirty = w.mu.dirty[:0]
	w.mu.Unlock()
	return dst
}

// Grow makes room for indexes [0, n) without clearing anything: a fetch session's waiter
// grows as partitions join it. Owner only.
func (w *Waiter) Grow(n int) {
	w.mu.Lock()
	if n > len(w.mu.marked) {
		w.mu.marked = append(w.mu.marked, make([]bool, n-len(w.mu.marked))...)
	}
	w.mu.Unlock()
}

// mark records index i as dirty and, when wake, wakes the waiter.
func (w *Waiter) mark(i int32, wake bool) {
	w.mu.Lock()
	if int(i) < len(w.mu.marked) && !w.mu.marked[i] {
		w.mu.marked[i] = true
		w.mu.dirty = append(w.mu.dirty, i)
	}
	w.mu.Unlock()
	if !wake {
		return
	}
	if w.fn != nil {
		w.fn()
		return
	}
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// Unwatch removes the waiter from every signal it watches. Owner only.
func (w *Waiter) Unwatch() {
	for i, n := range w.regs {
		n.unwatch(w)
		w.regs[i] = nil
	}
	w.regs = w.regs[:0]
}

// watch registers w under index i on n; seen is n's sequence read before the caller's check.
func (w *Waiter) watch(n *notifier, i int32, seen uint64) {
	n.watch(w, i, true)
	w.regs = append(w.regs, n)
	if n.seq.Load() != seen {
		w.mark(i, true)
	}
}

// watcher is one registration on a notifier: a notification marks index i of w dirty and,
// when wake, wakes w.
type watcher struct {
	w    *Waiter
	i    int32
	wake bool
}

func (n *notifier) watch(w *Waiter, i int32, wake bool) {
	n.wmu.Lock()
	n.ws = append(n.ws, watcher{w, i, wake})
	n.nw.Add(1)
	n.wmu.Unlock()
}

func (n *notifier) unwatch(w *Waiter) {
	n.wmu.Lock()
	for k := range n.ws {
		if n.ws[k].w == w {
			last := len(n.ws) - 1
			n.ws[k] = n.ws[last]
			n.ws[last] = watcher{}
			n.ws = n.ws[:last]
			n.nw.Add(-1)
			break
		}
	}
	n.wmu.Unlock()
}

// wakeWatchers marks every registered waiter (after seq moved).
func (n *notifier) wakeWatchers() {
	if n.nw.Load() == 0 {
		return
	}
	n.wmu.Lock()
	for _, x := range n.ws {
		x.w.mark(x.i, x.wake)
	}
	n.wmu.Unlock()
}

// LEOSeq is the sequence of the LEO signal (appends, truncations, role changes): read it
// before checking the state, then pass it to WatchLEO.
func (r *Replica) LEOSeq() uint64 { return r.leoSig.seq.Load() }

// HWSeq is the sequence of the HW signal (HW advances, ISR and role changes), as LEOSeq.
func (r *Replica) HWSeq() uint64 { return r.hwSig.seq.Load() }

// WatchLEO registers w under index i for this replica's LEO signal (see Waiter).
func (r *Replica) WatchLEO(w *Waiter, i int32, seen uint64) { w.watch(&r.leoSig, i, seen) }

// WatchHW registers w under index i for this replica's HW signal (see Waiter).
func (r *Replica) WatchHW(w *Waiter, i int32, seen uint64) { w.watch(&r.hwSig, i, seen) }

// Mark marks index i dirty without waking the waiter: the owner visits it again at its next
// Dirty (a partition a housekeeping pass must see again). Safe for concurrent use.
func (w *Waiter) Mark(i int32) { w.mark(i, false) }

// WatchHWChanges registers w under index i, never waking it, for this replica's HW signal:
// every change of its HW (a leader's advance, a follower's update from a fetch response, a
// truncation) and every ISR or role change fires it. The broker's HW checkpoint visits only
// the replicas so marked. The registration stays until UnwatchChanges.
func (r *Replica) WatchHWChanges(w *Waiter, i int32) { r.hwSig.watch(w, i, false) }

// WatchISRChanges registers w under index i, never waking it, for whatever may leave a member
// of the ISR behind the leader's LEO: an append (the LEO signal), an ISR or role change (the HW
// signal), a follower's fetch offset moving back (recordFetch fires the HW signal). While no
// such change happens every follower of the ISR that was at the leader's LEO stays there, and
// Kafka's isCaughtUp holds for it whatever the time: the ISR expiry visits only the replicas
// so marked, and PrepareShrinkLagging says which to visit again. The registration stays until
// UnwatchChanges.
func (r *Replica) WatchISRChanges(w *Waiter, i int32) {
	r.leoSig.watch(w, i, false)
	r.hwSig.watch(w, i, false)
}

// UnwatchChanges removes w's registrations on this replica (WatchHWChanges' or
// WatchISRChanges').
func (r *Replica) UnwatchChanges(w *Waiter) {
	r.leoSig.unwatch(w)
	r.hwSig.unwatch(w)
}
