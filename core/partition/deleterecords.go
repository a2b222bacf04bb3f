package partition

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DeleteRecords (Kafka's AdminClient.deleteRecords, KIP-107) on the leader: the log start
// offset moves up to the requested offset, and the request completes once every replica on an
// alive broker has moved its own log start there too (followers take the leader's log start
// from their fetch responses, FollowLeaderLogStart, and report theirs in their next fetch),
// which the low watermark measures.

// DeleteRecordsHighWatermark is the offset of a DeleteRecords that deletes everything below
// the high watermark (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
const DeleteRecordsHighWatermark = -1

// DeleteRecordsOnLeader advances the leader's log start offset to offset (Kafka's
// Partition.deleteRecordsOnLeader): DeleteRecordsHighWatermark (-1) means the HW; any other
// negative offset, or one above the HW (exclusive), is refused with OFFSET_OUT_OF_RANGE and
// changes nothing. An offset at or below the log start changes nothing and succeeds. Whole
// segments below the new log start are deleted, one inside a segment is checkpointed
// (log.IncrementLogStart), and the epoch cache entries below it are dropped. It returns the
// offset the log start was asked to reach (the converted offset), which the low watermark
// must reach for the deletion to be complete. Errors: NOT_LEADER_OR_FOLLOWER when this
// replica does not lead; storage errors.
func (r *Replica) DeleteRecordsOnLeader(offset int64) (requested int64, err error) {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if !s.leader || s.closed || s.fencing {
		return -1, r.errNotLeader(s)
	}
	hw := r.hw.Load()
	requested = offset
	if offset == DeleteRecordsHighWatermark {
		requested = hw
	}
	switch {
	case requested < 0:
		return -1, fmt.Errorf("partition %s-%d: the offset %d is not valid: %w", r.topic, r.partition, offset, kerr.OffsetOutOfRange)
	case requested > hw:
		return -1, fmt.Errorf("partition %s-%d: cannot delete records below offset %d, above the high watermark %d: %w",
			r.topic, r.partition, requested, hw, kerr.OffsetOutOfRange)
	case requested <= r.log.LogStart():
		return requested, nil
	}
	if _, err := r.log.IncrementLogStart(requested); err != nil {
		return -1, err
	}
	r.lwSig.notifyAll()
	return requested, r.epochs.TruncateFromStart(r.log.LogStart())
}

// LowWatermark is Kafka's Partition.lowWatermarkIfLeader: the smallest log start offset
// (inclusive) over the leader and the followers on alive brokers (a follower that has not
// reported its log start yet counts as -1). Errors: NOT_LEADER_OR_FOLLOWER when this replica
// does not lead.
func (r *Replica) LowWatermark() (int64, error) {
	s := r.state.Load()
	if !s.leader || s.closed {
		return -1, r.errNotLeader(s)
	}
	lw := r.log.LogStart()
	for _, f := range s.followers {
		if r.cfg.BrokerEpoch != nil && r.cfg.BrokerEpoch(f.id) < 0 {
			continue // fenced: not waited for, as Kafka skips brokers that are not alive
		}
		lw = min(lw, f.logStart.Load())
	}
	return lw, nil
}

// LowWatermarkChanged returns a channel closed on the next change of a follower's reported
// log start or of the leader's own (waiter protocol of HWChanged). Role changes do not close
// it: wait on HWChanged too.
func (r *Replica) LowWatermarkChanged() <-chan struct{} { return r.lwSig.wait() }
