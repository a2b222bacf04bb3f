package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

// Damaged replicas: a batch whose bytes fail their check in a segment this broker did not
// write (log.DamageError), found by a read it was about to serve or by the scrub, is never
// served. The replica is reported (a log line naming the file and offset, DamageStats,
// Config.OnDamage) and then healed:
//
//  1. the controller is told (controller.ReportDamagedReplica): the replica leaves the
//     leadership (another undamaged ISR member is elected) and the ISR;
//  2. as a follower it truncates to the damaged batch's offset (everything from it on is
//     dropped) and re-replicates from the leader;
//  3. it rejoins the ISR by the usual rule, which clears the controller's mark.
//
// A replica that is the last ISR member keeps leading and serves all but the damaged batch
// (a fetch reaching it is answered KAFKA_STORAGE_ERROR) until another replica catches up.

// DamageReport is one damaged batch found in a replica: what Config.OnDamage receives.
type DamageReport struct {
	Broker    int32
	Topic     string
	Partition int32
	log.DamageError
}

func (d DamageReport) String() string {
	return fmt.Sprintf("broker %d: %s-%d: %v", d.Broker, d.Topic, d.Partition, &d.DamageError)
}

// DamageStats counts what the broker found and did about damaged replicas since it started.
type DamageStats struct {
	// Found counts damaged batches found in this broker's replicas (by reads and scrubs;
	// each batch once until its replica is healed).
	Found int64
	// Truncated counts replicas truncated below their damage to re-replicate.
	Truncated int64
	// FetchedCorrupt counts fetched batches a follower refused to append because they
	// fail their check (the leader's or the network's damage).
	FetchedCorrupt int64
	// ScrubbedBytes counts the bytes the background scrub checked.
	ScrubbedBytes int64
}

// damageState is a hosted replica's damage not healed yet (a leaf lock).
type damageState struct {
	sync.Mutex
	found    *log.DamageError // the lowest damaged batch found; nil: none
	reported bool             // the controller accepted the report of found
}

// onDamage is Config.OnDamage of a replica's log: h's log found d (from the reading or
// scrubbing goroutine; no broker lock held by the log).
func (b *Broker) onDamage(h *hosted, d log.DamageError) {
	h.dmg.Lock()
	fresh := h.dmg.found == nil || d.Offset < h.dmg.found.Offset
	if fresh {
		h.dmg.found, h.dmg.reported = &d, false
	}
	h.dmg.Unlock()
	if !fresh {
		return
	}
	b.damage.found.Add(1)
	b.damage.any.Store(true)
	b.logf("broker %d: %s: replica damaged: batch at offset %d, position %d of %s fails its check (%s); it is not served: the replica leaves the leadership and the ISR, truncates to %d and re-replicates",
		b.cfg.ID, h.key, d.Offset, d.Position, d.File, d.Reason, d.Offset)
	if b.cfg.OnDamage != nil {
		b.cfg.OnDamage(DamageReport{Broker: b.cfg.ID, Topic: h.key.topic, Partition: h.key.partition, DamageError: d})
	}
	select {
	case b.damage.signal <- struct{}{}:
	default:
	}
}

// DamageStats returns the damage counters.
func (b *Broker) DamageStats() DamageStats {
	return DamageStats{Found: b.damage.found.Load(), Truncated: b.damage.truncated.Load(),
		FetchedCorrupt: b.damage.fetchedCorrupt.Load(), ScrubbedBytes: b.damage.scrubbed.Load()}
}

// HealDamaged reports every damaged replica not reported yet to the controller and truncates
// the damaged replicas that follow below their damage, so that they re-replicate. The damage
// goroutine calls it when damage is found and at every HW checkpoint interval (a report the
// controller refused is sent again); with Config.Manual the caller does. It returns how many
// replicas still wait (not reported, or leading).
func (b *Broker) HealDamaged() int {
	if !b.running() || !b.damage.any.Load() {
		return 0
	}
	waiting := 0
	for _, h := range b.allReplicas() {
		h.dmg.Lock()
		d, reported := h.dmg.found, h.dmg.reported
		h.dmg.Unlock()
		if d == nil {
			continue
		}
		// A damaged leader reports again: it kept the leadership for want of another
		// undamaged ISR member, which may have joined since (the report is idempotent).
		if !reported || h.r.IsLeader() {
			if _, err := b.ctrl.ReportDamagedReplica(b.cfg.ID, b.epoch.Load(), h.key.topic, h.key.partition); err != nil {
				b.logf("broker %d: %s: reporting the damaged replica: %v (reported again later)", b.cfg.ID, h.key, err)
				waiting++
				continue
			}
			h.dmg.Lock()
			if h.dmg.found == d {
				h.dmg.reported = true
			}
			h.dmg.Unlock()
		}
		b.apply.Lock()
		if b.running() && !h.r.IsLeader() {
			st := h.applied
			b.removeFromFetchers(h.key)
			b.truncateDamagedLocked(h)
			if st.Leader != controller.NoLeader && st.Leader != b.cfg.ID && st.Topic != "" {
				b.addToFetcher(h, st.Leader, st.LeaderEpoch)
			}
		} else {
			waiting++
		}
		b.apply.Unlock()
	}
	if waiting == 0 {
		b.damage.any.Store(false)
		for _, h := range b.allReplicas() { // damage found meanwhile
			h.dmg.Lock()
			pending := h.dmg.found != nil
			h.dmg.Unlock()
			if pending {
				b.damage.any.Store(true)
				break
			}
		}
	}
	return waiting
}

// truncateDamagedLocked truncates h, a follower not fetching, to its damaged batch's offset,
// if it has one (b.apply held). The fetcher it is added to next re-replicates from there.
func (b *Broker) truncateDamagedLocked(h *hosted) {
	h.dmg.Lock()
	d := h.dmg.found
	h.dmg.Unlock()
	if d == nil || h.r.IsLeader() {
		return
	}
	leo := h.r.LEO()
	if err := h.r.TruncateTo(d.Offset); err != nil {
		b.logf("broker %d: %s: truncating below the damage at offset %d: %v", b.cfg.ID, h.key, d.Offset, b.storageFailed(err))
		return
	}
	h.dmg.Lock()
	if h.dmg.found == d {
		h.dmg.found = nil
	}
	h.dmg.Unlock()
	b.damage.truncated.Add(1)
	b.logf("broker %d: %s: truncated from LEO %d to %d below the damaged batch of %s; re-replicating from the leader", b.cfg.ID, h.key, leo, h.r.LEO(), d.File)
}

// fetchedCorrupt reports a fetched batch that failed its check: it was not appended.
func (b *Broker) fetchedCorrupt(key tp, leader int32, offset int64, err error) bool {
	if !errors.Is(err, kerr.CorruptMessage) {
		return false
	}
	b.damage.fetchedCorrupt.Add(1)
	b.logf("broker %d: %s: a batch fetched from leader %d at offset %d fails its check and is not appended: %v", b.cfg.ID, key, leader, offset, err)
	return true
}

// damageLoop heals damaged replicas when damage is found, when a partition state changes on
// this broker (a damaged leader's ISR grew: it can give way; a damaged replica was demoted)
// and at every HW checkpoint interval (a report the controller refused).
func (b *Broker) damageLoop(ctx context.Context) {
	ck := time.NewTicker(time.Duration(b.cfg.ReplicaHighWatermarkCheckpointIntervalMs) * time.Millisecond)
	defer ck.Stop()
	for {
		changed := b.Changed()
		select {
		case <-ctx.Done():
			return
		case <-b.damage.signal:
		case <-changed:
		case <-ck.C:
		}
		b.HealDamaged()
	}
}

// scrubLoop scrubs every replica once right after the start (the segments recovered from
// disk are the ones not checked yet) and then every ScrubIntervalMs, at up to
// ScrubBytesPerSecond; the damage it finds wakes damageLoop.
func (b *Broker) scrubLoop(ctx context.Context) {
	t := time.NewTicker(time.Duration(b.cfg.ScrubIntervalMs) * time.Millisecond)
	defer t.Stop()
	for {
		if !b.Paused() && b.LogDirOffline() == nil {
			b.Scrub(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Scrub checks the segments of every hosted replica once (log.Log.Scrub), at up to
// Config.ScrubBytesPerSecond (0: unbounded), until ctx is done. Damage found is reported and
// healed as a read's is. It returns the bytes checked.
func (b *Broker) Scrub(ctx context.Context) int64 {
	rate := b.cfg.ScrubBytesPerSecond
	start, done := time.Now(), int64(0)
	pace := func(n int64) error {
		done += n
		if rate <= 0 {
			return ctx.Err()
		}
		ahead := time.Duration(float64(done)/float64(rate)*float64(time.Second)) - time.Since(start)
		if ahead <= 0 {
			return ctx.Err()
		}
		t := time.NewTimer(ahead)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var total int64
	for _, h := range b.allReplicas() {
		n, err := h.l.Scrub(pace)
		total += n
		b.damage.scrubbed.Add(n)
		if ctx.Err() != nil {
			break
		}
		if err != nil && log.AsDamage(err) == nil && !errors.Is(err, log.ErrClosed) {
			b.logf("broker %d: %s: scrub: %v", b.cfg.ID, h.key, b.storageFailed(err))
		}
	}
	return total
}
