package broker

import (
	"path/filepath"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// removeReassignedLocked deletes the local replica of a partition that a reassignment
// removed from this broker (st, newer than the state last applied to it, no longer names
// this broker), as Kafka's brokers delete the replicas the metadata no longer assigns to
// them: the replica leaves its fetcher, is closed (pending acks=all produces end with
// NOT_LEADER_OR_FOLLOWER; later requests find no replica: UNKNOWN_TOPIC_OR_PARTITION), its
// directory is removed and its HW checkpoint entry dropped (rewritten at once, so a later
// reassignment back to this broker starts an empty replica that is not taken for a damaged
// one). A state that is not newer is ignored. b.apply held.
func (b *Broker) removeReassignedLocked(h *hosted, st controller.PartitionState) {
	if h.applied.Topic != "" && !newer(st, h.applied) {
		return
	}
	b.removeFromFetchers(h.key)
	b.unregisterLocked(h)
	b.exp.Lock()
	delete(b.exp.pending, h.key)
	b.exp.Unlock()
	delete(b.apply.retry, h.key)
	if err := h.r.Close(); err != nil {
		b.logf("broker %d: %s: closing a replica reassigned away: %v", b.cfg.ID, h.key, err)
	}
	dir := filepath.Join(b.cfg.DataDir, h.key.String())
	if err := b.fs.RemoveAll(dir); err != nil {
		b.logf("broker %d: %s: %v", b.cfg.ID, h.key, b.storageFailed(log.IOError("deleting "+dir, err)))
	} else if err := b.fs.SyncDir(b.cfg.DataDir); err != nil {
		b.logf("broker %d: %s: %v", b.cfg.ID, h.key, b.storageFailed(log.IOError("fsync "+b.cfg.DataDir, err)))
	}
	b.ckpt.Lock()
	delete(b.ckpt.hws, h.key)
	b.ckpt.Unlock()
	if err := b.WriteHWCheckpoint(); err != nil {
		b.logf("broker %d: %v", b.cfg.ID, err)
	}
	b.logf("broker %d: %s: replica deleted: reassigned to %v (leader %d, leader epoch %d)", b.cfg.ID, h.key, st.Replicas, st.Leader, st.LeaderEpoch)
	b.notifyChanged()
}
