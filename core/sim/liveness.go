package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/partition"
)

// Liveness: once the last fault healed (heal), the cluster must, within livenessBoundNs of
// virtual time, reach a state where at once
//
//   - every broker runs, is not paused, reaches the controller, has its log directory online
//     and has applied every metadata change;
//   - every partition has a leader that acts as leader in the current leader epoch, and its
//     ISR (the controller's and the leader's) is the whole replica set;
//   - every replica's LEO is the leader's, and its HW too (HW = LEO everywhere);
//   - every acks=all produce was answered (no wait left on a broker, no answer on its way) and
//     every idempotent producer's batch acknowledged;
//   - no fetcher is stuck: each follower replica is in exactly one fetcher, fetching from the
//     current leader in its leader epoch, and no round has been in flight for longer than
//     fetchStuckNs.
//
// A run that does not get there fails with what is missing.
//
// The bound. Convergence is scheduled fairly (timers: every broker applies its metadata and
// proposes its ISR expansions at every step, expires ISR members every
// replica.lag.time.max.ms/2, and runs every idle fetcher at every step, as the broker's
// goroutines do; the controller checks sessions every sessionMs/3), so the slowest chain
// after the heal is bounded by the timeouts: a broker fenced by its session is unfenced by
// its next heartbeat (heartbeatNs) and elections follow at once; an AlterPartition lost just
// before the heal is answered REQUEST_TIMED_OUT rpcTimeNs after it was sent and sent again;
// a follower that erred waits replica.fetch.backoff.ms (100 ms) per error; an acks=all wait
// ends by its request timeout (timeoutNs) at the latest; an idempotent batch whose attempt
// went unanswered is sent again timeoutNs + 1 s after it (plus 100 ms backoff) and that
// attempt waits up to timeoutNs; a partition left offline after a correlated failure gets
// the operator's election within operatorEveryNs. The longest chain, an idempotent batch
// that needs two more attempts while an AlterPartition was lost and a session had expired,
// is 2 x (timeoutNs + 1 s + 100 ms + timeoutNs) + rpcTimeNs + sessionMs + operatorEveryNs
// = 14.2 + 2 + 1.5 + 2 = 19.7 s; livenessBoundNs allows 30 s, and the runs converge well
// within it (Stats.ConvergedMaxNs).
const (
	livenessBoundNs = int64(30 * time.Second)
	operatorEveryNs = int64(2 * time.Second)
	fetchStuckNs    = rpcTimeNs + int64(time.Second)
	sessionCheckNs  = int64(sessionMs) * int64(time.Millisecond) / 3
	isrPassNs       = int64(lagMs) * int64(time.Millisecond) / 2
)

// converge runs the healed cluster (no new produce) until the liveness conditions hold, and
// fails the run with what is missing if they do not within livenessBoundNs.
func (s *Sim) converge() {
	healedAt := s.now
	nextOperator := s.now + operatorEveryNs
	for i := 0; s.err == nil; i++ {
		s.step(false)
		if s.err != nil || i%5 != 0 {
			continue
		}
		missing := s.notLive()
		if len(missing) == 0 {
			s.stats.ConvergedMaxNs = s.now - healedAt
			s.tracef("converged %v after the faults healed", time.Duration(s.now-healedAt))
			return
		}
		if s.now-healedAt > livenessBoundNs {
			if len(missing) > 8 {
				missing = append(missing[:8], fmt.Sprintf("(%d more)", len(missing)-8))
			}
			s.fail("not live %v after the faults healed (bound %v): %s; %s", time.Duration(s.now-healedAt),
				time.Duration(livenessBoundNs), strings.Join(missing, "; "), s.describe())
			return
		}
		if s.now >= nextOperator {
			s.operatorElections()
			s.abortHanging()
			nextOperator = s.now + operatorEveryNs
		}
	}
}

// timers runs, in the convergence phase, what the brokers' and the controller's goroutines
// run by themselves: metadata applied as it comes, ISR expansions proposed at once, ISR
// expiration every replica.lag.time.max.ms/2, every idle fetcher's next round, and the
// controller's session checks every sessionMs/3.
func (s *Sim) timers() {
	if s.now-s.lastSessionCheck >= sessionCheckNs {
		s.ctrl.CheckSessions()
		s.lastSessionCheck = s.now
	}
	for _, n := range s.nodes {
		if !n.up() || n.paused {
			continue
		}
		if !n.ctrlCut {
			if k := s.ctrl.DeliverPending(n.id, 0); k > 0 {
				s.tracef("broker %d: applied %d metadata changes", n.id, k)
			}
		}
		if s.now-n.lastISRPass >= isrPassNs {
			n.b.MaybeShrinkISRs()
			n.lastISRPass = s.now
		}
		n.b.ApplyExpansions()
		for _, f := range n.b.Fetchers() {
			if n.up() && !n.paused {
				s.fetchRoundOf(n, f)
			}
		}
	}
}

// notLive lists the liveness conditions that do not hold now (none: converged).
func (s *Sim) notLive() []string {
	var out []string
	for _, n := range s.nodes {
		switch {
		case !n.up():
			out = append(out, fmt.Sprintf("broker %d is down", n.id))
			continue
		case n.paused || n.ctrlCut || n.diskFull:
			out = append(out, fmt.Sprintf("broker %d paused %v, cut from the controller %v, disk full %v", n.id, n.paused, n.ctrlCut, n.diskFull))
		case n.b.LogDirOffline() != nil:
			out = append(out, fmt.Sprintf("broker %d: log directory offline", n.id))
		}
		if k := s.ctrl.Pending(n.id); k > 0 {
			out = append(out, fmt.Sprintf("broker %d has %d metadata changes to apply", n.id, k))
		}
		var stuck []string
		for f, at := range n.inflight {
			if at != 0 && s.now-at > fetchStuckNs {
				stuck = append(stuck, fmt.Sprintf("broker %d: the round of its fetcher from %d has been in flight %v", n.id, f.Source(), time.Duration(s.now-at)))
			}
		}
		slices.Sort(stuck)
		out = append(out, stuck...)
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		out = append(out, s.partitionNotLive(p)...)
	}
	if len(s.pending) > 0 {
		pp := s.pending[0]
		out = append(out, fmt.Sprintf("%d acks=all waits unanswered (the first on broker %d p%d at %d)", len(s.pending), pp.n.id, pp.parts[0].Partition, pp.parts[0].BaseOffset))
	}
	if len(s.acking) > 0 {
		out = append(out, fmt.Sprintf("%d acknowledged records' answers on their way", len(s.acking)))
	}
	if b := s.idemInFlight(); b != "" {
		out = append(out, "an idempotent batch is not acknowledged: "+b)
	}
	out = append(out, s.txnsNotLive()...)
	return out
}

// partitionNotLive lists what is missing for partition p: a leader acting in the current
// epoch, the whole replica set in the ISR, every replica at the leader's LEO with its HW
// there too, and every follower fetching from the leader.
func (s *Sim) partitionNotLive(p int32) []string {
	st, ok := s.ctrl.Partition(topic, p)
	if !ok {
		return []string{fmt.Sprintf("p%d is not in the metadata", p)}
	}
	if st.Leader == controller.NoLeader {
		return []string{fmt.Sprintf("p%d has no leader (ISR %v, damaged %v)", p, st.ISR, s.ctrl.Damaged(topic, p))}
	}
	ln := s.nodes[st.Leader]
	if !ln.up() {
		return []string{fmt.Sprintf("p%d: leader %d is down", p, st.Leader)}
	}
	lr, ok := ln.b.Replica(topic, p)
	if !ok || !lr.IsLeader() || lr.LeaderEpoch() != st.LeaderEpoch {
		return []string{fmt.Sprintf("p%d: broker %d does not act as the leader of epoch %d yet", p, st.Leader, st.LeaderEpoch)}
	}
	var out []string
	if len(st.ISR) != len(st.Replicas) || len(lr.ISR()) != len(st.Replicas) {
		out = append(out, fmt.Sprintf("p%d: ISR %v (leader's %v), replicas %v", p, st.ISR, lr.ISR(), st.Replicas))
	}
	leo := lr.LEO()
	for _, id := range st.Replicas {
		n := s.nodes[id]
		if !n.up() {
			continue // (reported with the broker)
		}
		r, ok := n.b.Replica(topic, p)
		if !ok {
			out = append(out, fmt.Sprintf("p%d: broker %d has no replica", p, id))
			continue
		}
		if r.LEO() != leo || r.HW() != leo {
			out = append(out, fmt.Sprintf("p%d: broker %d LEO %d HW %d, the leader's LEO %d", p, id, r.LEO(), r.HW(), leo))
		}
		if id == st.Leader {
			continue
		}
		var in []string
		for _, f := range n.b.Fetchers() {
			for _, fp := range f.Partitions() {
				if fp.Topic == topic && fp.Partition == p {
					in = append(in, fmt.Sprintf("from %d %s epoch %d", f.Source(), fp.State.Phase, fp.State.LeaderEpoch))
					if f.Source() != st.Leader || fp.State.Phase != partition.PhaseFetching || fp.State.LeaderEpoch != st.LeaderEpoch {
						out = append(out, fmt.Sprintf("p%d: broker %d's fetcher from %d is %s in epoch %d (leader %d, epoch %d)",
							p, id, f.Source(), fp.State.Phase, fp.State.LeaderEpoch, st.Leader, st.LeaderEpoch))
					}
				}
			}
		}
		if len(in) != 1 {
			out = append(out, fmt.Sprintf("p%d: follower %d is in %d fetchers %v, want 1", p, id, len(in), in))
		}
	}
	slices.Sort(out)
	return out
}
