package partition

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// AppendAsLeader appends blob (one or more RecordBatch v2 batches) as the
// leader: offsets from the LEO, partitionLeaderEpoch = the leader epoch
// (returned in info.LeaderEpoch). Errors: NotLeaderForPartition when not the
// leader; with requiredAcks -1 and len(ISR) < the effective min.insync.replicas,
// NotEnoughReplicas and nothing is appended (acks 0 and 1 append anyway). Waiting
// for acks=all is the caller's WaitForHW(ctx, info.LastOffset, info.LeaderEpoch).
//
// Idempotent producers (producerstate.go): a batch with a producer id >= 0
// is sequence-checked and appended under the partition's producer-state
// mutex. A duplicate (a retry of one of the producer's last 5 batches) is
// not appended: it returns the original batch's offsets with Batches == 0
// and Records == 0. Sequence errors: OutOfOrderSequenceNumber,
// InvalidProducerEpoch. Batches without a producer id take no lock.
func (r *Replica) AppendAsLeader(blob []byte, requiredAcks int16) (log.AppendInfo, error) {
	info, _, err := r.appendAsLeader(blob, requiredAcks, true)
	return info, err
}

// AppendAsLeaderWakeLater is AppendAsLeader without waking the fetches parked on the LEO (the
// followers'): when it reports owed, the caller must call WakeFollowers, at once after it
// has answered its client (Kafka's order: ReplicaManager.appendRecords hands an acks=0/1
// response to the network layer before its action queue completes the delayed fetches).
// Nothing else changes: a fetch that is not parked reads the new LEO at once, and a parked
// one registered before the append is woken by WakeFollowers (the Waiter protocol loses no
// wake-up, only delays it). owed is false when nothing was appended (an error, a duplicate).
func (r *Replica) AppendAsLeaderWakeLater(blob []byte, requiredAcks int16) (info log.AppendInfo, owed bool, err error) {
	return r.appendAsLeader(blob, requiredAcks, false)
}

// WakeFollowers wakes the fetches parked on the LEO signal, as an append does: the wake-up
// an AppendAsLeaderWakeLater owes. Safe for concurrent use; a spurious call costs a re-read.
func (r *Replica) WakeFollowers() { r.leoSig.notify() }

// appendAsLeader is AppendAsLeader; with wake false the LEO signal is not notified and owed
// says whether it should be (something was appended).
func (r *Replica) appendAsLeader(blob []byte, requiredAcks int16, wake bool) (info log.AppendInfo, owed bool, err error) {
	s, ok := r.enterLeader()
	if !ok {
		return log.AppendInfo{}, false, r.errNotLeader(s)
	}
	defer s.exit()
	if requiredAcks == -1 && len(s.st.ISR) < r.effectiveMinISR(s) {
		return log.AppendInfo{}, false, fmt.Errorf("partition %s-%d: ISR %v has %d members, min.insync.replicas is %d: %w",
			r.topic, r.partition, s.st.ISR, len(s.st.ISR), r.effectiveMinISR(s), kerr.NotEnoughReplicas)
	}
	appendNs := r.quietNow(s)
	if isIdempotentBlob(blob) { // hook: idempotent producers (producerstate.go)
		var dup bool
		info, dup, err = r.appendIdempotent(blob, s.st.LeaderEpoch)
		if dup {
			// A duplicate: nothing appended; the original batch is in this leader's log at
			// the returned offsets, so this term's HW decides its acknowledgement.
			info.LeaderEpoch = s.st.LeaderEpoch
			return info, false, nil
		}
	} else {
		info, err = r.log.Append(blob, true, s.st.LeaderEpoch)
	}
	if err != nil {
		return info, false, err
	}
	info.LeaderEpoch = s.st.LeaderEpoch
	if r.cfg.OnHWLag != nil {
		now := r.cfg.Now()
		r.lag.push(lagEntry{lastOffset: info.LastOffset, appendNs: now, records: info.Records})
		if hw := r.hw.Load(); hw > info.LastOffset {
			r.lag.drain(hw, now, r.cfg.OnHWLag) // a follower was faster than us
		}
	}
	r.settleQuiet(s, appendNs)
	if wake {
		r.leoSig.notify()
	}
	// An ISR of the leader alone (with min.insync.replicas <= 1) commits
	// right away; otherwise this is a no-op until followers fetch.
	r.maybeAdvanceHW(s)
	return info, !wake, nil
}

// CheckHW reports whether a batch appended as leader in leaderEpoch with last offset
// lastOffset (inclusive) is committed, as Kafka's DelayedProduce asks
// Partition.checkEnoughReplicasReachOffset: not done while the HW of that leadership term is
// at or below lastOffset, even while the ISR is below min.insync.replicas (the HW is frozen
// then; the follower may rejoin and catch up before the request times out). Once the HW
// passed it: done with a nil error if the maximal ISR has at least the effective
// min.insync.replicas members now, else done with NotEnoughReplicasAfterAppend (the record
// is written and committed, but the ISR shrank below the minimum since). Done with
// NotLeaderForPartition when the term ended before its HW passed the batch (the batch may be
// truncated away: it must not be acknowledged even if a later term's HW passes that
// offset). Not done otherwise (wait on HWChanged and ask again; a caller whose request
// times out answers RequestTimedOut). Lock-free.
func (r *Replica) CheckHW(lastOffset int64, leaderEpoch int32) (done bool, err error) {
	s := r.state.Load()
	hw := r.hw.Load()
	if r.state.Load() != s {
		return false, nil // changed meanwhile: ask again
	}
	switch {
	case s.fencing:
		return false, nil // a role change is under way; its final snapshot decides
	case s.leader && !s.closed && s.st.LeaderEpoch == leaderEpoch:
		if hw <= lastOffset {
			return false, nil // keep waiting, whatever the ISR (Kafka's DelayedProduce)
		}
		if minISR := r.effectiveMinISR(s); len(s.maximal) < minISR {
			return true, fmt.Errorf("partition %s-%d: offset %d committed but ISR %v is below min.insync.replicas %d now: %w",
				r.topic, r.partition, lastOffset, s.maximal, minISR, kerr.NotEnoughReplicasAfterAppend)
		}
		return true, nil
	case s.prevTerm.epoch == leaderEpoch && s.prevTerm.hw > lastOffset:
		return true, nil // committed before the term ended
	}
	return true, fmt.Errorf("partition %s-%d: leadership of epoch %d ended before the HW passed offset %d: %w",
		r.topic, r.partition, leaderEpoch, lastOffset, r.errNotLeader(s))
}

// WaitForHW blocks until CheckHW(lastOffset, leaderEpoch) is done and returns its error;
// ctx done first -> RequestTimedOut.
func (r *Replica) WaitForHW(ctx context.Context, lastOffset int64, leaderEpoch int32) error {
	if done, err := r.CheckHW(lastOffset, leaderEpoch); done {
		return err // fast path: nothing armed
	}
	for {
		ch := r.hwSig.wait()
		if done, err := r.CheckHW(lastOffset, leaderEpoch); done {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("partition %s-%d: waiting for HW to pass offset %d (HW %d): %v: %w",
				r.topic, r.partition, lastOffset, r.hw.Load(), ctx.Err(), kerr.RequestTimedOut)
		}
	}
}

// maybeAdvanceHW recomputes the leader HW from s and applies it as CAS-to-max, then
// signals waiters. The caller has entered s (enterLeader) or holds roleMu with s current.
func (r *Replica) maybeAdvanceHW(s *snapshot) {
	if r.mutexHW {
		r.isrLock.RLock()
		defer r.isrLock.RUnlock()
	}
	hw, ok := r.computeHW(s)
	if !ok {
		return
	}
	if s.hwCapped {
		hw = min(hw, s.hwCap)
	}
	for {
		cur := r.hw.Load()
		if hw <= cur {
			return
		}
		if r.hw.CompareAndSwap(cur, hw) {
			r.afterAdvance(hw)
			return
		}
	}
}

// computeHW is the HW rule (HighWatermark) applied to snapshot s: the followers in the
// maximal ISR hold the HW back, and so does a follower that is caught up and eligible to
// join; ok is false while the committed ISR is below the effective min.insync.replicas.
func (r *Replica) computeHW(s *snapshot) (hw int64, ok bool) {
	leo := r.log.LEO()
	now := int64(-1) // read once, and only if a follower outside the maximal ISR is behind
	return HighWatermark(leo, len(s.st.ISR), r.effectiveMinISR(s), len(s.followers),
		func(i int) int64 { return s.followers[i].leo.Load() },
		func(i int) bool {
			f := s.followers[i]
			if slices.Contains(s.maximal, f.id) {
				return true
			}
			if now < 0 {
				now = r.cfg.Now()
			}
			return r.caughtUp(f, leo, now) && r.eligible(f)
		})
}

// caughtUp is Kafka's ReplicaState.isCaughtUp: the follower has the leader's LEO, or it was
// caught up within replica.lag.time.max.ms.
func (r *Replica) caughtUp(f *progress, leaderLEO, now int64) bool {
	return CaughtUp(f.leo.Load(), leaderLEO, f.lastCaughtUpNs.Load(), now, r.lagMaxNs)
}

// Broker epochs of a follower's progress: unknown (no fetch yet this term) and "the fetch
// carried none" (Kafka's -1, which bypasses the check).
const (
	brokerEpochUnknown int64 = -2
	brokerEpochNone    int64 = -1
)

// eligible is Kafka's isReplicaIsrEligible: the follower's broker is alive and unfenced and
// its fetches come from its current registration (broker epoch).
func (r *Replica) eligible(f *progress) bool {
	if r.cfg.BrokerEpoch == nil {
		return true
	}
	cur := r.cfg.BrokerEpoch(f.id)
	e := f.brokerEpoch.Load()
	return cur >= 0 && (e == cur || e == brokerEpochNone)
}

// afterAdvance runs after the HW moved to nw: waiters first (the ack path), then the HW-lag
// bookkeeping.
func (r *Replica) afterAdvance(nw int64) {
	r.hwSig.notify()
	if r.cfg.OnHWLag != nil {
		r.lag.drain(nw, r.cfg.Now(), r.cfg.OnHWLag)
	}
}

// UpdateFollower records a replica fetch of follower (broker epoch brokerEpoch, -1 if the
// request carried none) at fetchOffset (the follower's LEO, exclusive) with its log start
// offset (inclusive): the follower's LEO, Kafka's caught-up time, then the HW
// (CAS-to-max) and the acks=all waiters. canJoin reports that the follower is outside the
// ISR and meets the join rule now; the caller then proposes the expansion
// (PrepareExpand, which checks it again). Errors: NotLeaderForPartition when not the
// leader or for a fetch from an older incarnation of the follower's broker (a stale broker
// epoch), ReplicaNotAvailable for a broker that is not a replica, OffsetOutOfRange for a
// fetch offset past the leader's LEO.
//
// Safe for concurrent use; fetches of one follower are expected one at a time (as Kafka's
// fetch sessions are), concurrent ones stay race-free.
func (r *Replica) UpdateFollower(follower int32, brokerEpoch int64, fetchOffset int64, followerLogStart int64) (canJoin bool, err error) {
	s, ok := r.enterLeader()
	if !ok {
		return false, r.errNotLeader(s)
	}
	defer s.exit()
	f, _, err := r.updateFollower(s, follower, brokerEpoch, fetchOffset, followerLogStart)
	if err != nil {
		return false, err
	}
	f.quiet.Store(nil) // a fetch outside any session: no session clock speaks for it
	return s.pending == nil && !s.inISR(follower) && r.canJoin(s, f), nil
}

// updateFollower records a follower's fetch on snapshot s (entered) and advances the HW; it
// returns the follower's progress and the leader LEO the fetch was checked against.
func (r *Replica) updateFollower(s *snapshot, follower int32, brokerEpoch, fetchOffset, followerLogStart int64) (*progress, int64, error) {
	f := s.follower(follower)
	if f == nil {
		return nil, 0, fmt.Errorf("partition %s-%d: broker %d is not a follower replica (replicas %v): %w",
			r.topic, r.partition, follower, s.st.Replicas, kerr.ReplicaNotAvailable)
	}
	if brokerEpoch >= 0 && r.cfg.BrokerEpoch != nil {
		if cur := r.cfg.BrokerEpoch(follower); cur > brokerEpoch {
			return nil, 0, fmt.Errorf("partition %s-%d: fetch from broker %d with broker epoch %d, its current registration is %d (a stale incarnation): %w",
				r.topic, r.partition, follower, brokerEpoch, cur, kerr.NotLeaderForPartition)
		}
	}
	leo := r.log.LEO()
	if fetchOffset > leo || fetchOffset < 0 {
		return nil, 0, fmt.Errorf("partition %s-%d: follower %d fetch offset %d outside [0, LEO %d]: %w",
			r.topic, r.partition, follower, fetchOffset, leo, kerr.OffsetOutOfRange)
	}
	r.recordFetch(f, brokerEpoch, fetchOffset, followerLogStart, leo, r.cfg.Now())
	r.maybeAdvanceHW(s)
	return f, leo, nil
}

// canJoin is Kafka's needsExpandIsr: the follower is eligible and its LEO has reached the
// HW and the start of the leader's epoch (CanJoinISR).
func (r *Replica) canJoin(s *snapshot, f *progress) bool {
	return CanJoinISR(f.leo.Load(), r.hw.Load(), s.epochStart) && r.eligible(f)
}

func (r *Replica) recordFetch(f *progress, brokerEpoch, fetchOffset, logStart, leaderLEO, now int64) {
	if brokerEpoch < 0 {
		brokerEpoch = brokerEpochNone
	}
	f.brokerEpoch.Store(brokerEpoch)
	if prev := f.leo.Swap(fetchOffset); fetchOffset < prev {
		// Rare (a follower that truncated): one at the LEO may be behind it now, which the
		// ISR expiry must see (WatchISRChanges).
		r.hwSig.notify()
	}
	if f.logStart.Swap(logStart) != logStart {
		r.lwSig.notify() // a DeleteRecords may wait for it (deleterecords.go)
	}
	caught := CaughtUpUpdate(fetchOffset, leaderLEO, f.lastFetchLeaderLEO.Load(), f.lastFetchTimeNs.Load(), f.lastCaughtUpNs.Load(), now)
	for {
		cur := f.lastCaughtUpNs.Load()
		if caught <= cur || f.lastCaughtUpNs.CompareAndSwap(cur, caught) {
			break
		}
	}
	f.lastFetchLeaderLEO.Store(max(leaderLEO, f.lastFetchLeaderLEO.Load()))
	f.lastFetchTimeNs.Store(now)
}

// shrinkISR is ShrinkISR applied to snapshot s: a member without progress (not a
// follower replica any more) is not caught up.
func (r *Replica) shrinkISR(s *snapshot) (keep, out []int32) {
	return r.shrinkISRAt(s, r.log.LEO())
}

// shrinkISRAt is shrinkISR with the leader's LEO read by the caller.
func (r *Replica) shrinkISRAt(s *snapshot, leo int64) (keep, out []int32) {
	now := r.cfg.Now()
	return ShrinkISR(s.st.ISR, r.id, func(id int32) bool {
		f := s.follower(id)
		return f != nil && r.caughtUp(f, leo, now)
	})
}

// ISRProposal is an ISR change the leader sends to the controller (AlterPartition): the
// committed state it is based on, the proposed ISR, and the broker epoch of each proposed
// member's fetches (-1 for the leader itself and when unknown; the controller checks the
// new members' epochs against their registrations, KIP-903).
type ISRProposal struct {
	Base         controller.PartitionState
	ISR          []int32
	BrokerEpochs []int64 // parallel to ISR
	// FlushFirst: a shrink below min.insync.replicas, after which this leader alone holds
	// what was acknowledged. The caller makes the log durable (FlushLog) before it sends the
	// proposal; until the change is applied or withdrawn the HW stays at or below the LEO the
	// proposal was made at, so nothing is acknowledged past what that flush covers.
	FlushFirst bool
}

// PrepareShrink marks a shrink of the ISR to its caught-up members as pending and returns
// it, or nil when every member is caught up, this replica does not lead, or a change is
// pending. While it is pending the HW still counts the removed members (the maximal ISR is
// the committed one). The caller sends it to the controller, then calls ApplyISR with the
// accepted state or AbortISRChange.
func (r *Replica) PrepareShrink() *ISRProposal {
	p, _ := r.PrepareShrinkLagging()
	return p
}

// PrepareShrinkLagging is PrepareShrink that also reports whether the ISR expiry must visit
// this replica again at its next pass (lagging): it leads and a member of its ISR is not at
// its LEO (such a member is caught up only until replica.lag.time.max.ms after it last was,
// which a later pass must check), or an ISR change is pending or proposed now. A leader whose
// ISR followers are all at its LEO stays in sync whatever the time (CaughtUp) until its LEO,
// its ISR or a follower's fetch offset changes, which Replica.WatchISRChanges reports.
func (r *Replica) PrepareShrinkLagging() (p *ISRProposal, lagging bool) {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if !s.leader || s.closed {
		return nil, false
	}
	if s.pending != nil {
		return nil, true
	}
	leo := r.log.LEO()
	isr, out := r.shrinkISRAt(s, leo)
	if len(out) == 0 {
		return nil, r.lagging(s, leo)
	}
	if len(isr) < r.effectiveMinISR(s) {
		// Below min.insync.replicas the removed members may no longer be elected cleanly:
		// what was acknowledged with them must survive this leader's crash (a power loss)
		// on its own (ISRProposal.FlushFirst).
		return r.propose(s, isr, s.maximal, leo), true
	}
	return r.propose(s, isr, s.maximal, -1), true
}

// lagging reports whether a member of s's ISR other than the leader is not at leo (or has no
// progress: it is not a follower replica).
func (r *Replica) lagging(s *snapshot, leo int64) bool {
	for _, id := range s.st.ISR {
		if id == r.id {
			continue
		}
		if f := s.follower(id); f == nil || f.leo.Load() != leo {
			return true
		}
	}
	return false
}

// PrepareExpand marks adding follower to the ISR as pending and returns the proposal, or
// nil when the follower may not join. The follower enters the maximal ISR first (the HW
// counts it from then on), the operations that computed an HW without it drain, and only
// then is the join rule checked again against the HW: so once the controller accepts, the
// new member holds [log start, HW) and the HW cannot pass its LEO while the change is
// pending or after (the linearizability of HW advances and ISR changes; see the package
// doc). A failed re-check withdraws the change.
func (r *Replica) PrepareExpand(follower int32) *ISRProposal {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if !s.leader || s.closed || s.pending != nil || s.inISR(follower) {
		return nil
	}
	f := s.follower(follower)
	if f == nil {
		return nil
	}
	isr := append(slices.Clone(s.st.ISR), follower)
	p := r.propose(s, isr, isr, -1)
	if !r.canJoin(r.state.Load(), f) {
		r.withdraw()
		return nil
	}
	return p
}

// FlushLog fsyncs the replica's log through its LEO (ISRProposal.FlushFirst). A log
// without Flush (the in-memory test log) has nothing to flush.
func (r *Replica) FlushLog() error {
	if f, ok := r.log.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			return fmt.Errorf("partition %s-%d: flushing the log: %w", r.topic, r.partition, err)
		}
	}
	return nil
}

// propose installs the pending change (roleMu held), with the HW held at or below hwCap
// while it is pending (-1: no cap; a cap makes the proposal FlushFirst).
func (r *Replica) propose(s *snapshot, isr, maximal []int32, hwCap int64) *ISRProposal {
	ns := &snapshot{st: s.st, leader: true, epochStart: s.epochStart, followers: s.followers,
		maximal: maximal, pending: isr, prevTerm: s.prevTerm, hwCapped: hwCap >= 0, hwCap: hwCap}
	r.install(ns)
	epochs := make([]int64, len(isr))
	for i, id := range isr {
		epochs[i] = -1
		if f := s.follower(id); f != nil {
			if e := f.brokerEpoch.Load(); e >= 0 {
				epochs[i] = e
			}
		}
	}
	return &ISRProposal{Base: s.st.Clone(), ISR: slices.Clone(isr), BrokerEpochs: epochs, FlushFirst: ns.hwCapped}
}

// withdraw drops the pending change (roleMu held): the maximal ISR is the committed one
// again. A withdrawn expansion may let the HW advance past the would-be member, which is
// fine: it is not in the ISR.
func (r *Replica) withdraw() {
	s := r.state.Load()
	if s.pending == nil {
		return
	}
	ns := &snapshot{st: s.st, leader: s.leader, closed: s.closed, epochStart: s.epochStart,
		followers: s.followers, maximal: s.st.ISR, prevTerm: s.prevTerm}
	r.install(ns)
	if ns.leader {
		r.maybeAdvanceHW(ns)
	}
	r.hwSig.notifyAll()
}

// AbortISRChange withdraws p if it is still the pending change (the controller refused it;
// its notification brings the current state).
func (r *Replica) AbortISRChange(p *ISRProposal) {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	if !pendingIs(r.state.Load(), p) {
		return
	}
	r.withdraw()
}

// ISRChangePending reports whether p is still the pending change: proposed on the current
// partition state and neither settled by a new state nor withdrawn since. A leader whose
// AlterPartition went unanswered sends p again only then. Lock-free.
func (r *Replica) ISRChangePending(p *ISRProposal) bool { return pendingIs(r.state.Load(), p) }

// pendingIs reports whether p is the pending change of s: a later proposal on the same
// partition state (after p was withdrawn) is not p.
func pendingIs(s *snapshot, p *ISRProposal) bool {
	return s.pending != nil && s.st.PartitionEpoch == p.Base.PartitionEpoch && s.st.LeaderEpoch == p.Base.LeaderEpoch &&
		slices.Equal(s.pending, p.ISR)
}

// FollowerLEO returns the leader's record of follower id's LEO (exclusive),
// -1 when unknown or when this replica is not the leader.
func (r *Replica) FollowerLEO(id int32) int64 {
	s := r.state.Load()
	if !s.leader {
		return -1
	}
	return s.followerLEO(id)
}

// MaxLag returns, on the leader, the largest LEO - follower LEO over the
// followers (records; a follower with an unknown LEO counts from its log
// start 0). 0 on a follower.
func (r *Replica) MaxLag() int64 {
	s := r.state.Load()
	if !s.leader {
		return 0
	}
	leo := r.log.LEO()
	var lag int64
	for _, f := range s.followers {
		lag = max(lag, leo-max(0, f.leo.Load()))
	}
	return lag
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch for epoch from this
// replica's epoch cache and LEO: the largest epoch <= epoch and its end
// offset (exclusive), or (-1, -1). The leadership check is the caller's.
func (r *Replica) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return r.epochs.EndOffsetFor(epoch, r.log.LEO())
}

func (r *Replica) errNotLeader(s *snapshot) error {
	if s.closed {
		return fmt.Errorf("partition %s-%d on broker %d is closed: %w", r.topic, r.partition, r.id, kerr.NotLeaderForPartition)
	}
	return fmt.Errorf("partition %s-%d: broker %d is not the leader (leader %d, epoch %d): %w",
		r.topic, r.partition, r.id, s.st.Leader, s.st.LeaderEpoch, kerr.NotLeaderForPartition)
}

// enterLeader registers a leader operation on the current snapshot if this replica leads:
// the snapshot is returned with its active count raised (call exit when done), so a role or
// ISR change waits for the operation before it returns. false (nothing registered) when not
// the leader.
//
// The handshake (sequentially consistent atomics): the operation raises the count, then
// checks the snapshot is still current; a change stores its successor, then waits for the
// count to drain. Either the operation sees the successor (and retries on it) or the change
// sees the raised count.
func (r *Replica) enterLeader() (*snapshot, bool) {
	for {
		s := r.state.Load()
		if !s.leader || s.closed {
			return s, false
		}
		s.active.Add(1)
		if r.state.Load() == s {
			return s, true
		}
		s.active.Add(-1)
	}
}

func (s *snapshot) exit() { s.active.Add(-1) }
