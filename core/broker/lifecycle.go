package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/pprof"
	"strconv"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/vfs"
)

// Start recovers the replicas the controller assigns to this broker (opening and checking
// their logs), registers this incarnation with the controller (reporting the replicas that
// lost acknowledged data), subscribes to the controller's changes and, unless
// Config.Manual, starts the fetcher, ISR, heartbeat, checkpoint and retention goroutines.
// A broker leads nothing and is in no ISR when it starts: the controller fenced its
// previous incarnation (see controller.RegisterBroker). Start may be called once; after it
// failed (a registration the controller refused, controller.ErrMetadataLog) the caller
// Kills the broker, which releases what Start opened.
func (b *Broker) Start() error {
	if !b.state.CompareAndSwap(stateNew, stateRunning) {
		return fmt.Errorf("broker %d: Start called twice or after stop", b.cfg.ID)
	}
	reg := controller.Registration{ID: b.cfg.ID}
	if b.cfg.Addr != "" {
		h, p, err := net.SplitHostPort(b.cfg.Addr)
		if err != nil {
			return fmt.Errorf("broker %d: Addr %q: %w", b.cfg.ID, b.cfg.Addr, err)
		}
		pn, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return fmt.Errorf("broker %d: Addr %q: bad port: %w", b.cfg.ID, b.cfg.Addr, err)
		}
		reg.Host, reg.Port = h, int32(pn)
	}
	b.apply.Lock()
	assigned := b.ctrl.PartitionsOf(b.cfg.ID)
	b.setAsideStrayLocked(assignedKeys(assigned))
	for _, st := range assigned {
		key := tp{st.Topic, st.Partition}
		_, damage, err := b.openReplica(key)
		if err != nil {
			// A storage error took the log directory offline (reported after the
			// registration below); anything else leaves this replica closed (for want of
			// a file descriptor: until RetryResourceFailures opens it).
			b.applyFailedLocked(key, err)
			b.logf("broker %d: %s: %v", b.cfg.ID, key, err)
			continue
		}
		if damage != "" {
			b.logf("broker %d: %s: replica damaged: %s; it will not lead until it has rejoined the ISR", b.cfg.ID, key, damage)
			reg.Damaged = append(reg.Damaged, controller.TopicPartition{Topic: key.topic, Partition: key.partition})
		}
	}
	b.apply.Unlock()
	epoch, err := b.ctrl.RegisterBroker(reg)
	if err != nil {
		return fmt.Errorf("broker %d: registering with the controller: %w", b.cfg.ID, err)
	}
	b.epoch.Store(epoch)
	b.reportOffline() // a log directory that failed during recovery
	if err := b.WriteHWCheckpoint(); err != nil {
		b.logf("broker %d: %v", b.cfg.ID, err)
	}
	b.unsub = b.ctrl.SubscribeBatch(b.cfg.ID, b.onUpdates)
	if !b.cfg.Manual {
		b.goLabeled("isr-expiration", b.isrLoop)
		b.goLabeled("housekeeping", b.housekeepingLoop)
		b.goLabeled("damage", b.damageLoop)
		if b.cfg.ScrubEnable {
			b.goLabeled("scrub", b.scrubLoop)
		}
	}
	return nil
}

// goLabeled starts fn on a goroutine labelled broker=<id>, role=<role> and
// the extra label pairs; Close/Kill wait for it.
func (b *Broker) goLabeled(role string, fn func(ctx context.Context), extra ...string) {
	b.goLabeledIn(b.ctx, role, fn, extra...)
}

// goLabeledIn is goLabeled with fn's context derived from ctx (a child of b.ctx).
func (b *Broker) goLabeledIn(ctx context.Context, role string, fn func(ctx context.Context), extra ...string) {
	labels := append([]string{"broker", strconv.Itoa(int(b.cfg.ID)), "role", role}, extra...)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		pprof.Do(ctx, pprof.Labels(labels...), fn)
	}()
}

// Pause stops fetching, heartbeating and ISR expiration (as a SIGSTOPped or
// GC-paused broker would) until Resume. Serving requests is not paused (the
// wire server pauses its side).
func (b *Broker) Pause() {
	b.pause.Lock()
	defer b.pause.Unlock()
	if b.pause.paused {
		return
	}
	b.pause.paused = true
	b.pause.resumeCh = make(chan struct{})
}

// Resume undoes Pause.
func (b *Broker) Resume() {
	b.pause.Lock()
	defer b.pause.Unlock()
	if !b.pause.paused {
		return
	}
	b.pause.paused = false
	close(b.pause.resumeCh)
}

// Paused reports whether the broker is paused.
func (b *Broker) Paused() bool {
	b.pause.Lock()
	defer b.pause.Unlock()
	return b.pause.paused
}

// waitResumed blocks while paused; false when ctx is done first.
func (b *Broker) waitResumed(ctx context.Context) bool {
	b.pause.Lock()
	ch := b.pause.resumeCh
	b.pause.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// stop cancels every goroutine and waits for them. Returns false if the
// broker was already stopped.
func (b *Broker) stop() bool {
	first := false
	b.stopOnce.Do(func() {
		first = true
		b.state.Store(stateStopped)
		if b.unsub != nil {
			b.unsub()
		}
		b.cancel()
		// Let an in-flight state application finish; later ones see
		// !running, so no goroutine is added after this point.
		b.apply.Lock()
		b.apply.Unlock() //nolint:staticcheck // barrier
		b.wg.Wait()      // fetchers close their own connections on exit
		b.notifyChanged()
	})
	return first
}

// shutdown stops the broker for Close, Kill and Crash. It reports whether
// the caller must end the replicas: false when the broker never started (it
// only becomes stopped) or was already stopped.
func (b *Broker) shutdown() bool {
	if b.state.CompareAndSwap(stateNew, stateStopped) {
		b.cancel()
		return false
	}
	return b.stop()
}

// Close stops the broker cleanly: fetchers and loops stop, the HW checkpoint
// is written, every replica (and its log) is closed, and (Config.CloseSyncFS) all of it is
// made durable by two syncfs calls instead of fsyncs per replica. Idempotent.
func (b *Broker) Close() error {
	if !b.shutdown() {
		return nil
	}
	var errs []error
	// The fsyncs of the checkpoint and of every replica's close are held back and made
	// durable together (vfs.HoldFS: one syncfs, the checkpoints' renames, a second one),
	// not one to three per replica; nothing waits on them any more.
	held := b.cfg.CloseSyncFS && b.hold.Hold()
	if b.offline.Load() == nil {
		if err := b.writeHWCheckpoint(true); err != nil {
			errs = append(errs, err)
		}
	}
	for _, h := range b.allReplicas() {
		if err := h.r.Close(); err != nil && b.offline.Load() == nil {
			errs = append(errs, fmt.Errorf("close %s: %w", h.key, err))
		}
	}
	if held {
		if b.offline.Load() != nil {
			b.hold.Drop() // nothing of an offline log directory is made durable
		} else if err := b.hold.Release(); err != nil {
			errs = append(errs, fmt.Errorf("close: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Kill stops the broker abruptly, as SIGKILL would: goroutines stop, no HW
// checkpoint, recovery point or epoch checkpoint is written and nothing is
// fsynced; the files are left as the page cache has them, so a new Broker
// on the same DataDir recovers from them. Each replica is demoted (pending acks=all waits
// end with NOT_LEADER_OR_FOLLOWER) and its log abandoned (log.Abandon: files closed with no
// fsync, index or recovery-point write), so no descriptor outlives the kill and a late
// append cannot write into files a new Broker has recovered. Idempotent.
func (b *Broker) Kill() {
	if !b.shutdown() {
		return
	}
	for _, h := range b.allReplicas() {
		st := h.r.State()
		st.Leader = controller.NoLeader
		_ = h.r.MakeFollower(st) // fails only on a closed replica: nothing to demote
		h.r.Abandon()
		h.l.Abandon()
	}
}

// Crash is Kill followed by a power loss of the broker's file system: everything not
// fsynced is gone (Config.FS must be a vfs.Crasher: vfs.PowerLossFS or vfs.MemFS).
func (b *Broker) Crash() error {
	b.Kill()
	if _, ok := b.hold.FS.(vfs.Crasher); !ok {
		return fmt.Errorf("broker %d: the file system of %s cannot simulate a power loss (use a vfs.PowerLossFS)", b.cfg.ID, b.cfg.DataDir)
	}
	if err := b.hold.Crash(); err != nil { // drops the hold, then the power loss
		return fmt.Errorf("broker %d: power loss: %w", b.cfg.ID, err)
	}
	return nil
}
