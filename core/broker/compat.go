package broker

// Thin adapters over core/partition.Replica calls whose exact shape is not
// fixed by CONTRACT.md, kept in one place.

import (
	"errors"
	"os"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/partition"
)

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// restoreHW sets a freshly opened replica's HW from the checkpoint
// (hw already capped at the LEO).
func restoreHW(r *partition.Replica, hw int64) error {
	return r.RestoreHW(hw)
}

// killReplica abandons a replica without writing anything (Kill): it is
// demoted (pending acks=all waits end with NOT_LEADER_OR_FOLLOWER) and its
// log is abandoned (log.Abandon: files closed with no fsync, index or
// recovery-point write, unlike log.Close), so no descriptor outlives the
// kill and a late append cannot write into files a new Broker on the same
// directory has recovered.
func killReplica(h *hosted) {
	st := h.r.State()
	st.Leader = controller.NoLeader
	_ = h.r.MakeFollower(st) // fails only on a closed replica: nothing to demote
	h.l.Abandon()
}

// appendAsFollower appends fetched records (possibly none) and applies the
// leader's HW.
func appendAsFollower(r *partition.Replica, records []byte, leaderHW int64) error {
	_, err := r.AppendAsFollower(records, leaderHW)
	return err
}

func truncateTo(r *partition.Replica, offset int64) error { return r.TruncateTo(offset) }

func truncateFullyAndStartAt(r *partition.Replica, offset int64) error {
	return r.TruncateFullyAndStartAt(offset)
}
