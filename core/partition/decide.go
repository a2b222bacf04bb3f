package partition

// This file holds the pure decision logic of replication: no goroutines, no
// clock reads, no I/O. Every function is a plain computation over its
// arguments, so the scripted tests in testdata/ can drive it step by step.
//
// Offsets: an LEO (log end offset) is exclusive (the next offset to write);
// a high watermark (HW) is exclusive (the first offset consumers cannot see);
// a truncation offset is exclusive (the log keeps [logStart, offset)).

// Undefined answers of OffsetForLeaderEpoch (Kafka's UNDEFINED_EPOCH and
// UNDEFINED_EPOCH_OFFSET).
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// HighWatermark is the leader's HW rule, Kafka's Partition.maybeIncrementLeaderHW, over one
// snapshot of the partition: the minimum of the leader's LEO (leaderLEO) and the LEO of
// every follower that holds the HW back. The leader has n followers; leo(i) is follower i's
// LEO (-1 unknown) and holdsBack(i) reports whether it counts: it is in the maximal ISR (the
// committed ISR plus an expansion in flight, KIP-497), or it is caught up and eligible to
// join (shouldWaitForReplicaToJoinIsr), so a joining follower is not starved by appends.
// holdsBack is asked only about a follower whose LEO is below the minimum so far. ok is
// false when the committed ISR (isrSize members) is below the effective min.insync.replicas
// (minISR): the HW is frozen then, as in Kafka >= 3.7 (KAFKA-15583), so "the HW passed the
// record" implies "the record is on at least min.insync.replicas replicas".
//
// Replica.computeHW is this rule applied to the replica's snapshot; the worked examples
// (testdata/hw_worked_examples.txt, decide_test.go) drive it.
//
// The caller applies the result as compare-and-swap-to-max: the HW never
// decreases, so a result below the current HW (a follower that just rejoined,
// an unknown follower LEO after a leader change) is simply not applied.
func HighWatermark(leaderLEO int64, isrSize, minISR, n int, leo func(i int) int64, holdsBack func(i int) bool) (hw int64, ok bool) {
	if isrSize < minISR {
		return 0, false
	}
	hw = leaderLEO
	for i := 0; i < n; i++ {
		if l := leo(i); l < hw && holdsBack(i) {
			hw = l
		}
	}
	return hw, true
}

// CaughtUpUpdate is Kafka's Replica.updateFetchState rule for
// lastCaughtUpTimeMs, in nanoseconds. A follower fetched at fetchOffset
// (its LEO, exclusive) at time nowNs while the leader's LEO is leaderLEONow;
// its previous fetch happened at lastFetchTimeNs when the leader's LEO was
// lastFetchLeaderLEO.
//
//   - fetchOffset >= leaderLEONow: the follower has everything; it is caught
//     up now.
//   - fetchOffset >= lastFetchLeaderLEO: it has everything the leader had at
//     its previous fetch; it was caught up at least at that time.
//
// The result never moves backwards (max with lastCaughtUpNs). After the call
// the caller records lastFetchLeaderLEO = leaderLEONow, lastFetchTimeNs =
// nowNs.
func CaughtUpUpdate(fetchOffset, leaderLEONow, lastFetchLeaderLEO, lastFetchTimeNs, lastCaughtUpNs, nowNs int64) (newLastCaughtUpNs int64) {
	switch {
	case fetchOffset >= leaderLEONow:
		return max(lastCaughtUpNs, nowNs)
	case lastFetchLeaderLEO >= 0 && fetchOffset >= lastFetchLeaderLEO:
		return max(lastCaughtUpNs, lastFetchTimeNs)
	}
	return lastCaughtUpNs
}

// CaughtUp is Kafka's ReplicaState.isCaughtUp: a follower whose LEO (followerLEO) equals
// the leader's (leaderLEO) is caught up whatever the time (KAFKA-7152), so an idle in-sync
// follower never leaves the ISR; otherwise it is caught up while its last caught-up time
// (lastCaughtUpNs) is at most replica.lag.time.max.ms (lagMaxNs) before nowNs. Exactly
// lagMaxNs is still in sync ("currentTimeMs - lastCaughtUpTimeMs <= replicaMaxLagMs").
func CaughtUp(followerLEO, leaderLEO, lastCaughtUpNs, nowNs, lagMaxNs int64) bool {
	return followerLEO == leaderLEO || nowNs-lastCaughtUpNs <= lagMaxNs
}

// ShrinkISR is the leader's ISR expiration (Kafka's Partition.maybeShrinkIsr over
// getOutOfSyncReplicas): the followers of isr (every member but the leader, self) that are
// not caught up leave it. It returns the remaining ISR and the removed members, both in
// ISR order; out is empty when nothing changes. caughtUp is asked about the followers only.
func ShrinkISR(isr []int32, self int32, caughtUp func(id int32) bool) (keep, out []int32) {
	for _, id := range isr {
		if id == self || caughtUp(id) {
			keep = append(keep, id)
		} else {
			out = append(out, id)
		}
	}
	return keep, out
}

// EffectiveMinISR is min.insync.replicas (minISR) capped by the replication factor rf (the
// number of assigned replicas; 0 unknown), as Kafka >= 3.7 (KAFKA-15583): a topic with
// RF 2 and min.insync.replicas 3 takes acks=all produces with both replicas in sync.
func EffectiveMinISR(minISR, rf int) int {
	if rf > 0 && rf < minISR {
		return rf
	}
	return minISR
}

// FollowerHW is a follower's HW after a fetch response that carried the leader's HW
// (leaderHW), or after a restart from the HW checkpoint: at most its own LEO (exclusive) and
// at least its log start (inclusive; a new leader's HW may lag behind the log start this
// follower took from the previous one). Kafka's UnifiedLog.updateHighWatermark.
func FollowerHW(leaderHW, leo, logStart int64) int64 {
	return max(logStart, min(leaderHW, leo))
}

// FetchEnd is the exclusive end of what a read may return (Kafka's FetchIsolation): a
// replica (a follower's fetch, or ListOffsets from a replica or the debugging id) reads up
// to the LEO; a read_uncommitted consumer up to the HW; a read_committed one up to the LSO
// (the first offset of the earliest open transaction, at most the HW).
func FetchEnd(replica, readCommitted bool, hw, lso, leo int64) int64 {
	switch {
	case replica:
		return leo
	case readCommitted:
		return min(lso, hw)
	}
	return hw
}

// CanJoinISR reports whether a follower outside the ISR may join it: its LEO
// (exclusive) has reached the leader's HW and the start offset (inclusive) of
// the leader's current epoch, so it holds every committed record and every
// record of the current epoch up to the HW (Kafka's isFollowerInSync
// condition in Partition.maybeExpandIsr). A negative
// leaderEpochStartOffset (unknown) never allows joining.
func CanJoinISR(followerLEO, hw, leaderEpochStartOffset int64) bool {
	return leaderEpochStartOffset >= 0 && followerLEO >= hw && followerLEO >= leaderEpochStartOffset
}

// Truncation is the follower's decision after one OffsetForLeaderEpoch
// answer.
type Truncation struct {
	// Offset is where the follower truncates its log: it keeps
	// [logStart, Offset) (exclusive end).
	Offset int64
	// Done is false when the follower does not know the epoch the leader
	// answered with (KIP-279): it truncates to Offset and asks again with
	// its new latest epoch.
	Done bool
	// Fallback is true when the leader's answer was UNDEFINED and the
	// follower fell back to its high watermark (as Kafka does).
	Fallback bool
}

// TruncationOffset decides where a follower truncates after it asked the
// leader for the end offset of its latest epoch and the leader answered
// (leaderEpoch, leaderEndOffset): the largest epoch the leader has that is
// <= the one asked for, and the start offset of the leader's next epoch
// (exclusive end of leaderEpoch on the leader), or its LEO for its latest.
//
// followerEnd is the follower's own EpochCache.EndOffsetFor(leaderEpoch,
// followerLEO). followerLEO and followerHW are exclusive.
//
// This is Kafka's AbstractFetcherThread.getOffsetTruncationState (KIP-101 and
// KIP-279):
//   - UNDEFINED answer: truncate to the follower's HW (the pre-KIP-101 rule,
//     Kafka's fallback).
//   - the follower has leaderEpoch itself: both logs agree up to the end of
//     that epoch on the shorter side: truncate to min(leaderEnd, own end of
//     that epoch, LEO). Done.
//   - the follower only has an older epoch than leaderEpoch: it truncates to
//     the end of its own largest epoch <= leaderEpoch (capped by its LEO)
//     and asks again (KIP-279 loop). Not done.
//   - the follower has no epoch <= leaderEpoch at all: truncate to
//     min(leaderEnd, LEO). Done.
func TruncationOffset(leaderEpoch int32, leaderEndOffset int64, followerLEO, followerHW int64, followerEnd func(epoch int32) (int32, int64)) Truncation {
	if leaderEndOffset == UndefinedEpochOffset || leaderEpoch == UndefinedEpoch {
		return Truncation{Offset: min(followerHW, followerLEO), Done: true, Fallback: true}
	}
	fEpoch, fEnd := followerEnd(leaderEpoch)
	switch {
	case fEpoch == UndefinedEpoch || fEnd == UndefinedEpochOffset:
		return Truncation{Offset: min(leaderEndOffset, followerLEO), Done: true}
	case fEpoch != leaderEpoch:
		return Truncation{Offset: min(fEnd, followerLEO), Done: false}
	default:
		return Truncation{Offset: min(fEnd, leaderEndOffset, followerLEO), Done: true}
	}
}
