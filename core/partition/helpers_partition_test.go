package partition

// pendingProposal rebuilds the proposal of the pending ISR change (tests only).
func (r *Replica) pendingProposal() *ISRProposal {
	s := r.state.Load()
	return &ISRProposal{Base: s.st.Clone(), ISR: s.pending}
}

// OutOfSyncReplicas returns the ISR followers that are not caught up (Kafka's
// getOutOfSyncReplicas: neither at the leader's LEO nor caught up within
// replica.lag.time.max.ms), or nil when there are none, this replica does not lead, or an
// ISR change is pending.
func (r *Replica) OutOfSyncReplicas() []int32 {
	s := r.state.Load()
	if !s.leader || s.closed || s.pending != nil {
		return nil
	}
	_, out := r.shrinkISR(s)
	return out
}

// FollowerLastCaughtUp returns the follower's last caught-up time (ns), -1
// when unknown or not the leader.
func (r *Replica) FollowerLastCaughtUp(id int32) int64 {
	s := r.state.Load()
	if f := s.follower(id); s.leader && f != nil {
		return f.lastCaughtUpNs.Load()
	}
	return -1
}

// MaximalISR returns the ISR the HW is computed over: the committed ISR plus a pending
// expansion (KIP-497). A shared snapshot: do not modify it.
func (r *Replica) MaximalISR() []int32 { return r.state.Load().maximal }

// PendingISR returns the ISR proposed to the controller and not yet answered, or nil.
func (r *Replica) PendingISR() []int32 { return r.state.Load().pending }
