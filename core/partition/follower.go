package partition

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

// AppendAsFollower appends blob (batches fetched from the leader, starting
// at this replica's LEO) keeping their offsets, records each batch's
// partitionLeaderEpoch in the epoch cache, then sets the follower HW to
// min(leaderHW, LEO), raised to the log start if the leader's HW is below it (Kafka's
// updateHighWatermark). Truncation, if any, must have happened before (a
// separate TruncateTo call by the fetcher), so the HW is applied after it.
// An empty blob only updates the HW.
// Errors: NotLeaderForPartition on the leader; malformed batches (wrapping
// CorruptMessage / InvalidRecord); non-contiguous offsets (OffsetOutOfRange,
// from the log).
func (r *Replica) AppendAsFollower(blob []byte, leaderHW int64) (log.AppendInfo, error) {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.leader || s.closed || s.fencing {
		return log.AppendInfo{}, fmt.Errorf("partition %s-%d: AppendAsFollower on broker %d (leader=%v closed=%v): %w",
			r.topic, r.partition, r.id, s.leader, s.closed, kerr.NotLeaderForPartition)
	}
	var info log.AppendInfo
	if len(blob) > 0 {
		assigned := false
		undo := func(err error) error {
			// Drop the epochs this failed append introduced.
			if assigned {
				if terr := r.epochs.TruncateFromEnd(r.log.LEO()); terr != nil {
					return errors.Join(err, terr)
				}
			}
			return err
		}
		// Record new epochs first (as Kafka does): an entry past the LEO
		// after a crash is dropped by NewReplica.
		latest := r.epochs.Latest()
		for b := blob; len(b) > 0; {
			h, err := records.ParseHeader(b)
			if err != nil {
				return info, undo(fmt.Errorf("partition %s-%d: follower append: %w", r.topic, r.partition, err))
			}
			if h.Size() > len(b) {
				return info, undo(fmt.Errorf("partition %s-%d: follower append: batch at offset %d needs %d bytes, %d left: %w",
					r.topic, r.partition, h.BaseOffset, h.Size(), len(b), kerr.CorruptMessage))
			}
			if h.PartitionLeaderEpoch > latest {
				assigned = true
				if _, err := r.epochs.Assign(h.PartitionLeaderEpoch, h.BaseOffset); err != nil {
					return info, undo(err)
				}
				latest = h.PartitionLeaderEpoch
			}
			b = b[h.Size():]
		}
		var err error
		info, err = r.log.Append(blob, false, 0)
		if err != nil {
			return info, undo(err)
		}
		perr := r.applyFollowerProducers(blob) // hook: idempotent producer state (producerstate.go)
		r.leoSig.notify()
		if perr != nil {
			return info, perr
		}
	}
	if leaderHW >= 0 {
		// Kafka's UnifiedLog.updateHighWatermark: the leader's HW, at most the LEO and
		// at least the log start (a new leader's HW may lag behind the log start this
		// follower took from the previous one).
		r.hw.Store(FollowerHW(leaderHW, r.log.LEO(), r.log.LogStart()))
		r.hwSig.notify()
	}
	return info, nil
}

// FollowLeaderLogStart advances the follower's log start offset to the leader's, from a fetch
// response (Kafka's ReplicaFetcherThread.processPartitionData calls
// log.maybeIncrementLogStartOffset(leaderLogStartOffset, LeaderOffsetIncremented) after the
// append and the HW): to min(leaderLogStart, HW), since a log start past the HW is refused
// (UnifiedLog throws then; the leader's log start is at most its HW, so the bound only
// matters for a response raced by a later retention pass). Whole segments below the new
// log start are deleted, a log start inside a segment is checkpointed (core/log
// IncrementLogStart), and the epoch cache entries below it are dropped (truncateFromStart).
// A leaderLogStart < 0 (unknown) or <= the log start changes nothing. It returns the
// number of deleted segments. Errors: NotLeaderForPartition on the leader; storage errors.
func (r *Replica) FollowLeaderLogStart(leaderLogStart int64) (int, error) {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.leader || s.closed || s.fencing {
		return 0, fmt.Errorf("partition %s-%d: FollowLeaderLogStart on broker %d (leader=%v closed=%v): %w",
			r.topic, r.partition, r.id, s.leader, s.closed, kerr.NotLeaderForPartition)
	}
	start := min(leaderLogStart, r.hw.Load())
	if start <= r.log.LogStart() {
		return 0, nil
	}
	n, err := r.log.IncrementLogStart(start)
	r.lwSig.notifyAll() // fetch sessions (the debugging consumer's) report the log start
	if err != nil {
		return n, err
	}
	return n, r.epochs.TruncateFromStart(r.log.LogStart())
}

// TruncateTo truncates the follower's log to offset (exclusive end; rounded
// down to a batch boundary by the log), then the epoch cache from the new
// LEO and the HW to at most the new LEO. Not allowed on the leader.
func (r *Replica) TruncateTo(offset int64) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.leader || s.closed || s.fencing {
		return fmt.Errorf("partition %s-%d: TruncateTo(%d) on broker %d (leader=%v closed=%v): %w",
			r.topic, r.partition, offset, r.id, s.leader, s.closed, kerr.NotLeaderForPartition)
	}
	truncated := offset < r.log.LEO()
	if truncated {
		if err := r.log.TruncateTo(offset); err != nil {
			return err
		}
	}
	leo := r.log.LEO()
	if err := r.epochs.TruncateFromEnd(leo); err != nil {
		return err
	}
	// hook: forget producer batches above the truncation point (producerstate.go).
	if truncated {
		if err := r.rebuildProducers(); err != nil {
			return err
		}
	}
	if r.hw.Load() > leo {
		r.hw.Store(leo)
		r.hwSig.notifyAll() // the HW moved (WatchHWChanges)
	}
	r.leoSig.notifyAll()
	return nil
}

// TruncateFullyAndStartAt empties the follower's log and restarts it at
// offset (the leader's log start offset, when the follower's fetch offset
// fell below it); the epoch cache is cleared and the HW set to offset.
func (r *Replica) TruncateFullyAndStartAt(offset int64) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.leader || s.closed || s.fencing {
		return fmt.Errorf("partition %s-%d: TruncateFullyAndStartAt on broker %d: %w", r.topic, r.partition, r.id, kerr.NotLeaderForPartition)
	}
	if err := r.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	if err := r.epochs.Clear(); err != nil {
		return err
	}
	r.clearProducers() // hook: the log is empty (producerstate.go)
	r.hw.Store(offset)
	r.hwSig.notifyAll() // the HW moved (WatchHWChanges)
	r.leoSig.notifyAll()
	return nil
}

// TruncationFor is the follower's decision after an OffsetForLeaderEpoch
// answer (leaderEpoch, leaderEndOffset) to its latest epoch: see
// TruncationOffset. It does not truncate.
func (r *Replica) TruncationFor(leaderEpoch int32, leaderEndOffset int64) Truncation {
	leo := r.log.LEO()
	return TruncationOffset(leaderEpoch, leaderEndOffset, leo, r.hw.Load(), func(e int32) (int32, int64) {
		return r.epochs.EndOffsetFor(e, leo)
	})
}

// RestoreHW sets the HW from a checkpoint (replication-offset-checkpoint)
// when the replica is opened, clamped to [log start, LEO]. Only before the first
// MakeLeader/MakeFollower or on a follower.
func (r *Replica) RestoreHW(hw int64) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	if s := r.state.Load(); s.leader {
		return fmt.Errorf("partition %s-%d: RestoreHW on the leader: %w", r.topic, r.partition, kerr.InvalidRequest)
	}
	r.hw.Store(FollowerHW(hw, r.log.LEO(), r.log.LogStart()))
	return nil
}
