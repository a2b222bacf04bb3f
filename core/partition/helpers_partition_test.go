package partition

// pendingProposal rebuilds the proposal of the pending ISR change (tests only).
func (r *Replica) pendingProposal() *ISRProposal {
	s := r.state.Load()
	return &ISRProposal{Base: s.st.Clone(), ISR: s.pending}
}
