package partition

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/controller"
)

// ApplyISR installs a partition state the controller accepted
// (AlterPartition) or announced for the current leadership: the ISR,
// replicas and partition epoch; a pending ISR change is settled by it. A
// state for another leader or leader epoch is not an ISR change and is
// ignored (MakeLeader/MakeFollower handle it), as is a stale one (older
// partition epoch). A shrink may advance the HW; every acks=all waiter is
// woken to look again (CheckHW: a drop below min.insync.replicas does not end
// a wait whose batch the HW has not passed yet).
func (r *Replica) ApplyISR(st controller.PartitionState) {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	r.applyISRLocked(st)
}

func (r *Replica) applyISRLocked(st controller.PartitionState) {
	s := r.state.Load()
	if s.closed || st.Leader != s.st.Leader || st.LeaderEpoch != s.st.LeaderEpoch || st.PartitionEpoch < s.st.PartitionEpoch {
		return
	}
	if st.PartitionEpoch == s.st.PartitionEpoch && slices.Equal(st.ISR, s.st.ISR) && slices.Equal(st.Replicas, s.st.Replicas) {
		return // nothing new (a pending change stays pending)
	}
	ns := &snapshot{st: st.Clone(), leader: s.leader, epochStart: s.epochStart, prevTerm: s.prevTerm}
	ns.maximal = ns.st.ISR
	if s.leader {
		ns.followers = r.carryFollowers(s, ns.st)
	}
	r.install(ns)
	if ns.leader {
		r.maybeAdvanceHW(ns)
	}
	r.hwSig.notifyAll()
}

// carryFollowers keeps the progress of followers that stay replicas and
// adds fresh progress for new ones.
func (r *Replica) carryFollowers(old *snapshot, st controller.PartitionState) []*progress {
	out := make([]*progress, 0, len(st.Replicas))
	now := r.cfg.Now()
	leo := r.log.LEO()
	for _, id := range st.Replicas {
		if id == r.id {
			continue
		}
		if f := old.follower(id); f != nil {
			out = append(out, f)
			continue
		}
		out = append(out, newProgress(id, leo, now, slices.Contains(st.ISR, id)))
	}
	return out
}

func newProgress(id int32, leaderLEO, now int64, inISR bool) *progress {
	f := &progress{id: id}
	f.leo.Store(-1)
	f.logStart.Store(-1)
	f.brokerEpoch.Store(brokerEpochUnknown)
	f.lastFetchLeaderLEO.Store(leaderLEO)
	f.lastFetchTimeNs.Store(now)
	if inISR {
		f.lastCaughtUpNs.Store(now)
	} else {
		f.lastCaughtUpNs.Store(neverCaughtUp)
	}
	return f
}

// neverCaughtUp is the last caught-up time of a follower outside the ISR when a leadership
// starts (Kafka's 0 ms since the epoch): long enough ago on any clock.
const neverCaughtUp = math.MinInt64 / 4

// MakeLeader makes this replica the leader of st (st.Leader must be this
// broker) at st.LeaderEpoch: it records (epoch, LEO) in the leader epoch
// cache before serving, resets every follower's progress (LEO unknown; ISR
// members count as caught up now, as Kafka does) and keeps the HW (a new
// leader's HW may lag; it advances once the ISR followers fetch, and never
// decreases). A stale epoch gets FencedLeaderEpoch; the same epoch again is
// an ISR update.
func (r *Replica) MakeLeader(st controller.PartitionState) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.closed {
		return r.errNotLeader(s)
	}
	if st.Leader != r.id {
		return fmt.Errorf("partition %s-%d: MakeLeader on broker %d with leader %d: %w", r.topic, r.partition, r.id, st.Leader, kerr.InvalidRequest)
	}
	if !slices.Contains(st.ISR, r.id) && len(st.ISR) > 0 {
		// Unclean election: the controller put us in the ISR already; a
		// state without us is a caller bug.
		return fmt.Errorf("partition %s-%d: MakeLeader: ISR %v lacks leader %d: %w", r.topic, r.partition, st.ISR, r.id, kerr.InvalidRequest)
	}
	if st.LeaderEpoch < s.st.LeaderEpoch {
		return fmt.Errorf("partition %s-%d: MakeLeader epoch %d older than current %d: %w", r.topic, r.partition, st.LeaderEpoch, s.st.LeaderEpoch, kerr.FencedLeaderEpoch)
	}
	if st.LeaderEpoch == s.st.LeaderEpoch && s.leader {
		r.applyISRLocked(st)
		return nil
	}
	// Re-elected with a new epoch: fence the old term's appends before the new epoch's
	// start offset is read, so no old-epoch batch lands above it.
	pt := r.fence(s)
	leo := r.log.LEO()
	if _, err := r.epochs.Assign(st.LeaderEpoch, leo); err != nil {
		// The epoch could not be recorded (a storage error): stay a follower of the
		// old state rather than lead without it.
		ns := &snapshot{st: s.st, epochStart: -1, prevTerm: pt}
		ns.maximal = ns.st.ISR
		r.install(ns)
		r.hwSig.notifyAll()
		return err
	}
	start := r.epochs.StartOffsetOf(st.LeaderEpoch)
	if start < 0 {
		start = leo
	}
	ns := &snapshot{st: st.Clone(), leader: true, epochStart: start, prevTerm: pt}
	ns.maximal = ns.st.ISR
	ns.followers = r.carryFollowers(&snapshot{}, ns.st) // nothing carried: every follower starts fresh
	if hw := r.hw.Load(); hw > leo {
		r.hw.Store(leo) // BUG guard: a HW above the LEO cannot be served
	}
	r.lag.clear()
	r.install(ns)
	r.maybeAdvanceHW(ns)
	r.hwSig.notifyAll()
	r.leoSig.notifyAll()
	return nil
}

// MakeFollower makes this replica a follower of st.Leader at
// st.LeaderEpoch. It does not truncate: the fetcher truncates (TruncateTo after
// OffsetForLeaderEpoch, see FetchState) before fetching. Leader operations of the old term
// have finished when it returns (no append or HW advance of the old term lands after it);
// pending acks=all waits end with NotLeaderForPartition unless the old term's HW had
// passed them. A stale epoch gets FencedLeaderEpoch.
func (r *Replica) MakeFollower(st controller.PartitionState) error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.closed {
		return r.errNotLeader(s)
	}
	if st.Leader == r.id {
		return fmt.Errorf("partition %s-%d: MakeFollower on broker %d which st names as leader: %w", r.topic, r.partition, r.id, kerr.InvalidRequest)
	}
	if st.LeaderEpoch < s.st.LeaderEpoch {
		return fmt.Errorf("partition %s-%d: MakeFollower epoch %d older than current %d: %w", r.topic, r.partition, st.LeaderEpoch, s.st.LeaderEpoch, kerr.FencedLeaderEpoch)
	}
	pt := r.fence(s)
	r.lag.clear()
	ns := &snapshot{st: st.Clone(), epochStart: -1, prevTerm: pt}
	ns.maximal = ns.st.ISR
	r.install(ns)
	r.hwSig.notifyAll()
	r.leoSig.notifyAll()
	return nil
}

// install stores ns as the current snapshot and waits until no operation registered on
// the previous one is still running (roleMu held). Operations are short (an append, a
// follower update), so it yields rather than parks. With the mutex ablation the store also
// takes the write lock, so it waits for HW advances holding the read lock.
func (r *Replica) install(ns *snapshot) {
	var old *snapshot
	if r.mutexHW {
		r.isrLock.Lock()
		old = r.state.Swap(ns)
		r.isrLock.Unlock() // not held while draining: a draining operation may want the read lock
	} else {
		old = r.state.Swap(ns)
	}
	for old.active.Load() != 0 {
		runtime.Gosched()
	}
}

// Close ends the replica: pending waits return NotLeaderForPartition, later
// calls fail, and the log is closed.
func (r *Replica) Close() error {
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	s := r.state.Load()
	if s.closed {
		return nil
	}
	pt := r.fence(s)
	r.install(&snapshot{st: s.st, closed: true, epochStart: -1, prevTerm: pt})
	r.hwSig.notifyAll()
	r.leoSig.notifyAll()
	r.writeSnapshot() // producer state at the LEO, for the next open (snapshot.go)
	// A queued leader-epoch checkpoint write is made now, before the directory may go.
	ckErr := r.epochs.Close()
	return errors.Join(ckErr, r.log.Close())
}

// Abandon ends the file writes of a replica whose broker is killed (Broker.Kill): a
// leader-epoch checkpoint write still queued (Config.EpochCheckpointLater) is dropped, as
// the process's death would drop it, instead of landing in the files of the replica's next
// incarnation. The caller abandons the log itself (log.Log.Abandon).
func (r *Replica) Abandon() { r.epochs.abandon() }

// fence ends the leadership term of s, the current snapshot (roleMu held), and returns the
// prevTerm for the snapshot that follows: when s leads, it installs a fencing copy (no new
// leader operation starts, running ones drain) and reads the term's final HW; otherwise it
// returns s's own prevTerm.
func (r *Replica) fence(s *snapshot) termEnd {
	if !s.leader {
		return s.prevTerm
	}
	r.install(&snapshot{st: s.st, fencing: true, epochStart: -1, prevTerm: s.prevTerm})
	return termEnd{epoch: s.st.LeaderEpoch, hw: r.hw.Load()}
}
