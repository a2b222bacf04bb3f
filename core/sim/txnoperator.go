package sim

import (
	"maps"
	"slices"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/txn"
)

// The excuse for transactions (excuse.go's rules applied to __transaction_state, as
// groups.go's noteFailures to __consumer_offsets): after a crash, until __transaction_state
// is in sync again, a further failure may lose what the crash lost, and a crash while it is
// not in sync may lose its last writes at once. A coordinator that loads the partition then
// may not know a transaction whose producer already wrote to its partitions: that
// transaction hangs (its partitions' LSO stays at its first offset), as in Kafka, where the
// operator aborts it with kafka-transactions.sh (find-hanging, then abort: an ABORT marker
// written through the partition's leader with the producer's epoch and coordinator epoch
// from DescribeProducers). The simulator does that in the convergence phase, and only after
// such a failure; a transaction that hangs without one fails the run (liveness).

// txnLoss is the state of that rule.
type txnLoss struct {
	seen     failureCounts
	seenStep int
	synced   bool
	pending  bool // a crashed broker has not caught up on __transaction_state yet
	lost     bool // __transaction_state may have lost acknowledged writes
}

// noteTxnFailures applies the rule once a step (before the step's fault) and at every
// failure.
func (s *Sim) noteTxnFailures() {
	ts := s.txns
	if ts == nil {
		return
	}
	l := &ts.loss
	st := &s.stats
	now := failureCounts{st.Kills, st.Crashes, st.Pauses, st.CtrlCuts, st.DiskFul, st.ClusterRestarts}
	if was := l.seen; now != was {
		l.seen = now
		crashed := now.crashes > was.crashes
		other := now.kills > was.kills || now.pauses > was.pauses || now.ctrlCuts > was.ctrlCuts ||
			now.diskFull > was.diskFull || now.clusterRestarts > was.clusterRestarts || now.crashes > was.crashes+1
		if !s.fsyncAll && !l.lost && (crashed && (!l.synced || other || l.pending) || l.pending && other) {
			l.lost = true
			s.tracef("txn: a failure while a crashed broker catches up on %s: its acknowledged writes may be lost, and transactions may hang", txn.StateTopic)
		}
		if crashed {
			l.pending = true
		}
	}
	if l.seenStep != st.Steps {
		l.seenStep = st.Steps
		l.synced = s.internalInSync(txn.StateTopic, txnStatePartitions, ts.created, false)
		if l.pending && l.synced {
			l.pending = false
		}
	}
}

// abortHanging is the operator's kafka-transactions.sh find-hanging / abort after
// __transaction_state may have lost writes: an open transaction on a partition's leader that
// no coordinator holds open on that partition gets an ABORT marker through the leader.
func (s *Sim) abortHanging() {
	ts := s.txns
	if ts == nil || !ts.loss.lost {
		return
	}
	var open []txn.Meta
	for _, ref := range ts.coords {
		for _, m := range ref.c.List() {
			if m.State != txn.Empty && m.State != txn.CompleteCommit && m.State != txn.CompleteAbort {
				open = append(open, m)
			}
		}
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		st, _ := s.ctrl.Partition(topic, p)
		if st.Leader == controller.NoLeader || !s.nodes[st.Leader].up() {
			continue
		}
		n := s.nodes[st.Leader]
		r, ok := n.b.Replica(topic, p)
		if !ok || !r.IsLeader() {
			continue
		}
		for _, pid := range slices.Sorted(maps.Keys(r.OpenTxns())) {
			if slices.ContainsFunc(open, func(m txn.Meta) bool {
				return m.ProducerID == pid && slices.Contains(m.Partitions, txn.TP{Topic: topic, Partition: p})
			}) {
				continue
			}
			info, _ := r.Producer(pid)
			mk := broker.TxnMarker{ProducerID: pid, ProducerEpoch: max(info.ProducerEpoch, 0), CoordinatorEpoch: max(info.CoordinatorEpoch, 0),
				Partitions: []broker.ProducePartition{{Topic: topic, Partition: p}}}
			s.tracef("operator: aborting the hanging transaction of producer %d on p%d (epoch %d, coordinator epoch %d)", pid, p, mk.ProducerEpoch, mk.CoordinatorEpoch)
			s.stats.Txns.HangingAborted++
			waits := n.b.AppendTxnMarkers([]broker.TxnMarker{mk})
			mw := &markerWait{n: n, inc: n.inc, mk: mk, dead: s.now + timeoutNs, reply: func([]broker.ProducePartition, error) {}, nums: []int{0}}
			if mk.Partitions[0].Err == nil {
				s.nextValue++
				mw.nums[0] = s.nextValue
			}
			if len(waits) == 0 {
				s.markersAnswered(mw)
				continue
			}
			mw.w = waits[0]
			ts.markerWaits = append(ts.markerWaits, mw)
		}
	}
}
