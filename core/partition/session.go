package partition

import "sync/atomic"

// A fetch session (KIP-227) on the leader visits only the partitions that changed: an idle
// partition costs nothing per fetch. Two things make that exact.
//
// Subscriptions: Subscribe registers a session's Waiter on every signal of a change a fetch
// response reports (the LEO signal: appends, truncations, role changes; the HW signal: HW
// advances, ISR and role changes; the log start signal: DeleteRecords, retention), so the
// session learns of each change without looking.
//
// Quiet followers: Kafka's leader records every partition of a follower's session on each of
// its fetches (updateFollowerFetchState), which keeps the follower's lastCaughtUpTimeMs fresh.
// A session that leaves out a partition whose follower is caught up and in the ISR (quiet)
// keeps that rule with a FetchClock: UpdateFollowerQuiet attaches the session's clock to the
// follower's progress, the session ticks it with each fetch's time, and the leader's next
// append folds the clock's time into the follower's last caught-up and last fetch times (what
// the fetches left out would have recorded: until then the follower's LEO equals the
// leader's, so it is caught up whatever the time) and detaches it. The partition's LEO signal
// then makes the session visit it again.

// FetchClock is the time (ns, the replica's clock) of a fetch session's latest fetch whose
// partitions were all recorded. Safe for concurrent use.
type FetchClock struct{ ns atomic.Int64 }

// Tick records a fetch at ns (never moves backwards).
func (c *FetchClock) Tick(ns int64) {
	for {
		cur := c.ns.Load()
		if ns <= cur || c.ns.CompareAndSwap(cur, ns) {
			return
		}
	}
}

// UpdateFollowerQuiet is UpdateFollower for a fetch session with clock: it also reports
// whether the follower is quiet for this partition (its fetch offset equals the leader's LEO,
// it is in the ISR and no ISR change is pending), in which case the session may leave the
// partition out of its next fetches until one of the partition's signals fires (see above).
func (r *Replica) UpdateFollowerQuiet(follower int32, brokerEpoch, fetchOffset, followerLogStart int64, clock *FetchClock) (canJoin, quiet bool, err error) {
	s, ok := r.enterLeader()
	if !ok {
		return false, false, r.errNotLeader(s)
	}
	defer s.exit()
	f, leo, err := r.updateFollower(s, follower, brokerEpoch, fetchOffset, followerLogStart)
	if err != nil {
		return false, false, err
	}
	quiet = clock != nil && fetchOffset == leo && s.pending == nil && s.inISR(follower)
	if !quiet {
		f.quiet.Store(nil)
		return s.pending == nil && !s.inISR(follower) && r.canJoin(s, f), false, nil
	}
	f.quiet.Store(clock)
	if r.log.LEO() != leo {
		// An append published its LEO meanwhile; it may have settled before the store above.
		f.quiet.Store(nil)
		return false, false, nil
	}
	return false, true, nil
}

// Unquiet detaches clock from follower's progress if it is attached there: the session left
// the partition out no more (it forgot it, or closed).
func (r *Replica) Unquiet(follower int32, clock *FetchClock) {
	s := r.state.Load()
	if f := s.follower(follower); f != nil {
		f.quiet.CompareAndSwap(clock, nil)
	}
}

// settleQuiet runs after a leader append published its LEO (before the LEO signal): every
// quiet follower's progress takes its session's last fetch time, at most appendNs (the time
// read before the append: a fetch that began later saw the new LEO), as its last caught-up
// and last fetch times, and stops being quiet.
func (r *Replica) settleQuiet(s *snapshot, appendNs int64) {
	for _, f := range s.followers {
		if f.quiet.Load() == nil {
			continue
		}
		c := f.quiet.Swap(nil)
		if c == nil {
			continue
		}
		t := min(c.ns.Load(), appendNs)
		casMax(&f.lastCaughtUpNs, t)
		casMax(&f.lastFetchTimeNs, t)
	}
}

// quietNow is the time to pass settleQuiet: the clock, read only when a follower is quiet
// (0 otherwise: a follower that turns quiet meanwhile is detached without credit).
func (r *Replica) quietNow(s *snapshot) int64 {
	for _, f := range s.followers {
		if f.quiet.Load() != nil {
			return r.cfg.Now()
		}
	}
	return 0
}

func casMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Subscribe registers w under index i for every change of this replica a fetch response
// reports: LEO, HW and log start (and role changes, which fire them). A change marks i dirty;
// it also wakes w (sends on C) for the LEO signal when wakeOnLEO (a replica fetch waits for
// new data) and for the HW signal otherwise (a consumer fetch). The registration stays until
// Unsubscribe. The caller reads the replica's state after Subscribe returns: no change is
// missed.
func (r *Replica) Subscribe(w *Waiter, i int32, wakeOnLEO bool) {
	r.leoSig.watch(w, i, wakeOnLEO)
	r.hwSig.watch(w, i, !wakeOnLEO)
	r.lwSig.watch(w, i, false)
}

// Unsubscribe removes every registration of w on this replica (Subscribe's).
func (r *Replica) Unsubscribe(w *Waiter) {
	r.leoSig.unwatch(w)
	r.hwSig.unwatch(w)
	r.lwSig.unwatch(w)
}
