package broker

import (
	"context"
	"time"
)

// housekeepingLoop heartbeats the controller, writes the HW checkpoint (and retries the
// states not applied for want of a file descriptor) and applies log retention.
func (b *Broker) housekeepingLoop(ctx context.Context) {
	hb := time.NewTicker(time.Duration(b.cfg.HeartbeatIntervalMs) * time.Millisecond)
	defer hb.Stop()
	ck := time.NewTicker(time.Duration(b.cfg.ReplicaHighWatermarkCheckpointIntervalMs) * time.Millisecond)
	defer ck.Stop()
	ret := time.NewTicker(time.Duration(b.cfg.LogRetentionCheckIntervalMs) * time.Millisecond)
	defer ret.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ret.C:
			if !b.Paused() {
				b.ApplyRetention()
			}
		case <-hb.C:
			b.Heartbeat()
		case <-ck.C:
			if b.Paused() || b.LogDirOffline() != nil {
				continue
			}
			if err := b.WriteHWCheckpoint(); err != nil {
				b.logf("broker %d: %v", b.cfg.ID, err)
			}
			b.retryResourceFailuresIfIdle()
		}
	}
}

// Heartbeat sends this incarnation's heartbeat to the controller, unless the broker is
// paused (the housekeeping goroutine calls it every HeartbeatIntervalMs). Under the pause
// lock: once Pause returns no heartbeat is in flight.
func (b *Broker) Heartbeat() {
	b.pause.Lock()
	defer b.pause.Unlock()
	if !b.pause.paused && b.running() {
		b.ctrl.Heartbeat(b.cfg.ID, b.epoch.Load())
		b.reportOffline()
	}
}

// ApplyRetention applies retention.bytes / retention.ms to every hosted
// log, never deleting past the replica's HW (exclusive) nor the active
// segment, and drops the leader epoch cache entries below the new log start
// (partition.Replica.ApplyRetention); the housekeeping goroutine calls it
// every log.retention.check.interval.ms. Returns the number of segments
// deleted.
func (b *Broker) ApplyRetention() int {
	if b.LogDirOffline() != nil {
		return 0
	}
	nowMs := b.now() / int64(time.Millisecond)
	n := 0
	for _, h := range b.allReplicas() {
		d, err := h.r.ApplyRetention(nowMs)
		n += d
		if d > 0 {
			b.fetchPlanGen.Add(1) // a follower's log start moved: its next fetch says so
		}
		if err != nil {
			b.logf("broker %d: %s: retention: %v", b.cfg.ID, h.key, b.storageFailed(err))
		}
	}
	return n
}
