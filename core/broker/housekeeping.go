package broker

import (
	"context"
	"time"
)

// housekeepingLoop heartbeats the controller, writes the HW checkpoint (and retries the
// states not applied for want of a file descriptor), applies log retention and expires idle
// producer ids.
func (b *Broker) housekeepingLoop(ctx context.Context) {
	hb := time.NewTicker(time.Duration(b.cfg.HeartbeatIntervalMs) * time.Millisecond)
	defer hb.Stop()
	ckEvery := time.Duration(b.cfg.ReplicaHighWatermarkCheckpointIntervalMs) * time.Millisecond
	ck := newPhasedTicker(ckEvery, b.housekeepingPhase(ckEvery))
	defer ck.Stop()
	retEvery := time.Duration(b.cfg.LogRetentionCheckIntervalMs) * time.Millisecond
	ret := newPhasedTicker(retEvery, b.housekeepingPhase(retEvery))
	defer ret.Stop()
	pidEvery := time.Duration(b.cfg.Settings.Int("producer.id.expiration.check.interval.ms")) * time.Millisecond
	pid := newPhasedTicker(pidEvery, b.housekeepingPhase(pidEvery))
	defer pid.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pid.C():
			pid.fired()
			if !b.Paused() {
				b.ExpireProducers()
			}
		case <-ret.C():
			ret.fired()
			if !b.Paused() {
				b.ApplyRetention()
			}
		case <-hb.C:
			b.Heartbeat()
		case <-ck.C():
			ck.fired()
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

// ExpireProducers forgets, on every hosted replica, the producer ids idle past
// producer.id.expiration.ms (partition.Replica.ExpireProducers); the housekeeping goroutine
// calls it every producer.id.expiration.check.interval.ms. Returns how many it forgot.
func (b *Broker) ExpireProducers() int {
	nowMs := b.now() / int64(time.Millisecond)
	exp := b.cfg.Settings.Int("producer.id.expiration.ms")
	n := 0
	for _, h := range b.allReplicas() {
		n += h.r.ExpireProducers(nowMs, exp)
	}
	return n
}

// housekeepingPhase is the offset, within one interval, of this broker's periodic HW
// checkpoint and retention passes. With Config.HousekeepingStagger (default false) it is the
// fractional part of ID × the golden ratio, times the interval: brokers 0, 1, 2 tick 0, 0.62
// and 0.24 of an interval apart, any number of IDs spread evenly. The checkpoint ends in an
// fsync that holds the goroutine's thread and, until the runtime takes it back, its P; the
// brokers of one process started together otherwise fsync at the same instant, and on a
// 2-core host with GOMAXPROCS 2 two of those fsyncs leave no P to run anything else (seen in
// execution traces when the disk is slow; with fsyncs of a few ms they rarely overlap, and no
// change of the ack-latency tail could be told from the host's noise, hence off by default).
// Off, every broker ticks in phase (the first tick one interval after the start).
func (b *Broker) housekeepingPhase(interval time.Duration) time.Duration {
	if !b.cfg.HousekeepingStagger {
		return 0
	}
	return staggerPhase(b.cfg.ID, interval)
}

// staggerPhase is frac(id × 0.6180339887) × interval, in [0, interval).
func staggerPhase(id int32, interval time.Duration) time.Duration {
	const golden = 0.6180339887498949
	f := float64(id) * golden
	f -= float64(int64(f))
	if f < 0 {
		f++
	}
	return time.Duration(f * float64(interval))
}

// phasedTicker ticks every interval, the first tick phase after its creation (one interval
// when phase is 0). Used by one goroutine: C, then fired after each receive.
type phasedTicker struct {
	interval time.Duration
	first    *time.Timer
	tick     *time.Ticker
}

func newPhasedTicker(interval, phase time.Duration) *phasedTicker {
	if phase <= 0 || phase >= interval {
		phase = interval
	}
	return &phasedTicker{interval: interval, first: time.NewTimer(phase)}
}

// C is the channel of the next tick.
func (p *phasedTicker) C() <-chan time.Time {
	if p.tick != nil {
		return p.tick.C
	}
	return p.first.C
}

// fired is called after a tick was received: after the first, the periodic ticker starts.
func (p *phasedTicker) fired() {
	if p.tick == nil {
		p.tick = time.NewTicker(p.interval)
	}
}

// Stop stops the ticker.
func (p *phasedTicker) Stop() {
	p.first.Stop()
	if p.tick != nil {
		p.tick.Stop()
	}
}
