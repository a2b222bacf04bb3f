package sim

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/txn"
)

// Transactions in the simulation: every broker incarnation runs a core/txn Coordinator in
// Manual mode (Scan, Tick at its deadlines, Poll for the acks=all waits of its writes) on
// __transaction_state (txnStatePartitions partitions, 3 replicas, min.insync.replicas 2),
// which the simulator's fetchers replicate and its faults hit like any topic: the coordinator
// of a transactional id moves with the leadership of its partition and reloads it. The
// coordinators' WriteTxnMarkers go over the simulated network to the leaders of the
// transactions' partitions (broker.AppendTxnMarkers there, acks=all), delayed, lost on a cut
// link (answered REQUEST_TIMED_OUT after rpcTimeNs) and retried by the coordinator.
//
// Transactional producers (txnproducers.go) initialise their transactional id, begin a
// transaction, add one to three partitions of the topic, send acks=all batches there and end
// it with a commit (mostly) or an abort; now and then a process restarts with the same
// transactional id while the old one goes on for a few requests (a zombie, which must be
// fenced), or abandons its transaction (the coordinator aborts it after
// transaction.timeout.ms).
//
// Invariants:
//   - every step, on every replica of the topic, LSO <= HW, and on a leader the LSO never
//     goes back within its leadership (the same leader epoch of the same incarnation);
//   - a read_committed consumer (isolation_level 1, the response's aborted transactions
//     applied as Kafka's consumer does) never reads at or past the LSO, never reads a
//     record of a transaction its producer did not ask to commit, and every transactional
//     record it reads is followed in the leader's log, below the HW, by a COMMIT marker of
//     its producer (never an ABORT, never none: it was decided);
//   - at the end, after the faults healed: a read_committed read of every partition from
//     its log start sees each transaction whole or not at all, on every partition it wrote
//     to (no partial visibility across partitions), sees every transaction whose commit was
//     acknowledged, and no transaction its producer did not ask to commit;
//   - liveness (liveness.go): once the faults healed every transaction is committed or
//     aborted within the bound: every producer's transaction ended, every coordinator's
//     transactional ids complete, and LSO = HW on every partition.
//
// Markers are tracked as acknowledged records (value "M<producer id>.<epoch>.<c|a>"): losing
// an acknowledged marker is a loss like any other, excused by the same rules (excuse.go).

const (
	txnStatePartitions = 2
	// txnTimeoutMs is the producers' transaction.timeout.ms; txnAbortCheckMs the
	// coordinators' transaction.abort.timed.out.transaction.cleanup.interval.ms.
	txnTimeoutMs    = 1000
	txnAbortCheckMs = 250
	// txnRequestNs: a request without an answer for this long is given up.
	txnRequestNs = int64(10 * time.Second)
)

// TxnStats counts the transactions' work in a run.
type TxnStats struct {
	Inits, Begun, Committed, Aborted, Abandoned int
	Fenced, Zombies, Restarts, Loads            int
	Markers, ReadCommitted, RecordsRead         int
	// HangingAborted counts the operator's aborts of hanging transactions (txnoperator.go).
	HangingAborted int
	// Verified and VerifyRefused count the batches the leaders verified with the producers'
	// coordinators (KIP-890) and those the verification or its guard refused.
	Verified, VerifyRefused int
}

func (t *TxnStats) add(s TxnStats) {
	t.Inits += s.Inits
	t.Begun += s.Begun
	t.Committed += s.Committed
	t.Aborted += s.Aborted
	t.Abandoned += s.Abandoned
	t.Fenced += s.Fenced
	t.Zombies += s.Zombies
	t.Restarts += s.Restarts
	t.Loads += s.Loads
	t.Markers += s.Markers
	t.ReadCommitted += s.ReadCommitted
	t.RecordsRead += s.RecordsRead
	t.HangingAborted += s.HangingAborted
	t.Verified += s.Verified
	t.VerifyRefused += s.VerifyRefused
}

// txnSim is the simulator's transaction state: coordinators, producers and the oracle.
type txnSim struct {
	cfg       txn.Config
	created   bool
	coords    map[int32]*txnCoordRef
	producers []*tproducer
	nextPID   int64
	reqs      int
	// txns: every transaction begun, by number; ofValue: the transaction of each
	// transactional record value.
	txns    []*txnRec
	ofValue map[string]int
	// markerWaits: markers appended by a leader, waiting for acks=all.
	markerWaits []*markerWait
	// lsoSeen: the highest LSO seen per leadership term; rcPos the read_committed
	// consumer's position per partition.
	lsoSeen map[termKey]int64
	rcPos   map[int32]int64
	loaded  map[gterm]bool
	loss    txnLoss
}

type txnCoordRef struct {
	c   *txn.Coordinator
	b   *broker.Broker
	inc int
	// changed is the broker's change signal as of the coordinator's last Scan (as its
	// watcher goroutine would wait on it).
	changed <-chan struct{}
}

// txnRec is one transaction as its producer saw it.
type txnRec struct {
	num        int
	tid        string
	pid        int64
	epoch      int16
	parts      []int32
	values     map[int32][]string // acknowledged records by partition
	commitReq  bool               // EndTxn(commit) was sent
	commitAck  bool               // ... and answered success
	abortAck   bool               // EndTxn(abort) answered success
	zombieProc bool
}

type markerWait struct {
	n     *node
	inc   int
	w     *broker.ProduceWait
	mk    broker.TxnMarker
	dead  int64
	reply func([]broker.ProducePartition, error)
	// nums numbers each partition's marker (as a record's value number, for the excuses).
	nums []int
}

func (s *Sim) txnsInit() *txnSim {
	ts := &txnSim{coords: map[int32]*txnCoordRef{}, ofValue: map[string]int{}, lsoSeen: map[termKey]int64{},
		rcPos: map[int32]int64{}, loaded: map[gterm]bool{}, nextPID: 5000}
	cfg := txn.Config{
		Manual:                    true,
		NumPartitions:             txnStatePartitions,
		ReplicationFactor:         int16(min(3, s.o.Brokers)),
		MinISR:                    2,
		SegmentBytes:              16 * segmentBytes,
		AbortCheckIntervalMs:      txnAbortCheckMs,
		WriteTimeoutMs:            timeoutNs / int64(time.Millisecond),
		OffsetsTopicNumPartitions: offsetsPartitions,
		ProducerIDs:               func() int64 { ts.nextPID++; return ts.nextPID },
		Logf:                      func(f string, a ...any) { s.tracef(f, a...) },
	}
	ts.cfg = cfg.WithDefaults()
	for i := range 3 {
		ts.producers = append(ts.producers, &tproducer{tid: "tx-" + strconv.Itoa(i), state: tpInit})
	}
	return ts
}

// txnWork is the work loop's part for transactions: it creates __transaction_state (that
// takes the step's work: it reports true), keeps every running broker's coordinator current
// (Scan, Tick, Poll), answers the markers whose wait is over and moves one producer on (every
// producer while the faults heal).
func (s *Sim) txnWork(produce bool) bool {
	if s.txns == nil {
		s.txns = s.txnsInit()
	}
	ts := s.txns
	if !ts.created {
		rf := ts.cfg.ReplicationFactor
		configs := map[string]string{controller.ConfigMinInsyncReplicas: strconv.Itoa(min(2, int(rf))),
			controller.ConfigSegmentBytes: strconv.Itoa(16 * segmentBytes)}
		if s.fsyncAll {
			configs[controller.ConfigFlushMessages] = "1"
		}
		if _, err := s.ctrl.CreateTopic(txn.StateTopic, txnStatePartitions, rf, configs); err != nil {
			if !errors.Is(err, kerr.InvalidReplicationFactor) && !s.refused(err) {
				s.fail("creating %s: %v", txn.StateTopic, err)
			}
			return true
		}
		ts.created = true
		s.tracef("%s created", txn.StateTopic)
		return true
	}
	s.noteTxnFailures()
	s.txnCoordinators()
	s.checkMarkerWaits()
	switch {
	case !produce:
		// Converging: every producer moves on at every step, as their threads would.
		for _, tp := range slices.Clone(ts.producers) {
			s.txnStep(tp, false)
		}
	default:
		s.txnStep(ts.producers[s.rng.IntN(len(ts.producers))], produce)
	}
	return false
}

// txnCoordinators scans, ticks and polls the coordinator of every running broker.
func (s *Sim) txnCoordinators() {
	for _, n := range s.nodes {
		c := s.txnCoordinator(n)
		if c == nil {
			continue
		}
		ref := s.txns.coords[n.id]
		select {
		case <-ref.changed:
			ref.changed = nil
		default:
		}
		if ref.changed == nil {
			ref.changed = n.b.Changed()
			c.Scan()
		}
		for p := int32(0); p < txnStatePartitions; p++ {
			if e, ok := c.LoadedEpoch(p); ok {
				t := gterm{node: n.id, inc: n.inc, p: p, epoch: e}
				if !s.txns.loaded[t] {
					s.txns.loaded[t] = true
					s.stats.Txns.Loads++
				}
			}
		}
		if c.NextDeadline() <= s.nowMs() {
			c.Tick()
		}
		c.Poll()
	}
}

// txnCoordinator returns the transaction coordinator of broker n's running incarnation,
// starting one for a new incarnation (the previous one is closed); nil while n is down or
// paused.
func (s *Sim) txnCoordinator(n *node) *txn.Coordinator {
	ts := s.txns
	ref := ts.coords[n.id]
	if ref != nil && (ref.b != n.b || ref.inc != n.inc) {
		ref.c.Close()
		delete(ts.coords, n.id)
		ref = nil
	}
	if !n.up() || n.paused {
		return nil
	}
	if ref == nil {
		cfg := ts.cfg
		cfg.MarkersAsync = s.txnMarkers(n, n.inc)
		c := txn.NewCoordinator(cfg, n.b, s.ctrl, s.nowMs)
		c.Start()
		ref = &txnCoordRef{c: c, b: n.b, inc: n.inc}
		ts.coords[n.id] = ref
	}
	return ref.c
}

// txnMarkers is the MarkersAsync of the coordinator of broker from's incarnation inc: the
// markers travel to the leader over the simulated network, are appended there and answered
// once acks=all is met; a cut link or a leader that is down answers an error after the
// request timeout, a restarted coordinator hears nothing.
func (s *Sim) txnMarkers(from *node, inc int) func(int32, *broker.TxnMarker, func(error)) {
	return func(leader int32, mk *broker.TxnMarker, done func(error)) {
		ln := s.nodes[leader]
		linc := ln.inc
		back := func(parts []broker.ProducePartition, err error) {
			answer := func() {
				s.deliver(from, inc, func() {
					if err == nil {
						copy(mk.Partitions, parts)
					}
					done(err)
				}, nil)
			}
			s.send(leader, from.id, answer, func() {
				s.deliver(from, inc, func() { done(fmt.Errorf("markers to broker %d: answer lost: %w", leader, kerr.RequestTimedOut)) }, nil)
			})
		}
		lost := func() {
			s.at(s.now+rpcTimeNs, func() {
				s.deliver(from, inc, func() { done(fmt.Errorf("markers to broker %d: no answer: %w", leader, kerr.RequestTimedOut)) }, nil)
			})
		}
		req := *mk
		req.Partitions = slices.Clone(mk.Partitions)
		s.send(from.id, leader, func() {
			s.deliver(ln, linc, func() {
				waits := ln.b.AppendTxnMarkers([]broker.TxnMarker{req})
				mw := &markerWait{n: ln, inc: linc, mk: req, dead: s.now + timeoutNs, reply: back, nums: make([]int, len(req.Partitions))}
				for i, mp := range req.Partitions {
					if mp.Err == nil && mp.Topic == topic {
						s.nextValue++
						mw.nums[i] = s.nextValue
					}
				}
				if len(waits) == 0 {
					s.markersAnswered(mw)
					return
				}
				mw.w = waits[0]
				s.txns.markerWaits = append(s.txns.markerWaits, mw)
			}, lost)
		}, lost)
	}
}

// checkMarkerWaits answers the markers whose acks=all wait is over (the leader's HW passed
// them, its leadership ended, or the request timed out); a leader that died answers nothing
// (the coordinator times out).
func (s *Sim) checkMarkerWaits() {
	ts := s.txns
	kept := ts.markerWaits[:0]
	for _, mw := range ts.markerWaits {
		switch {
		case mw.n.inc != mw.inc || !mw.n.up():
			s.at(s.now+rpcTimeNs, func() {
				mw.reply(nil, fmt.Errorf("markers on broker %d: connection lost: %w", mw.n.id, kerr.RequestTimedOut))
			})
			continue
		case mw.n.paused:
		case mw.w.Check():
			s.markersAnswered(mw)
			continue
		case s.now > mw.dead:
			mw.w.Expire()
			s.markersAnswered(mw)
			continue
		}
		kept = append(kept, mw)
	}
	clear(ts.markerWaits[len(kept):])
	ts.markerWaits = kept
}

// markersAnswered records the markers acknowledged (as acknowledged records) and sends the
// answer back.
func (s *Sim) markersAnswered(mw *markerWait) {
	for i, p := range mw.mk.Partitions {
		if p.Err != nil || p.Topic != topic {
			continue
		}
		s.stats.Txns.Markers++
		v := markerValue(mw.mk.ProducerID, mw.mk.ProducerEpoch, mw.mk.Commit)
		if !s.recordAck(key{p.Partition, p.BaseOffset}, entry{v, mw.nums[i]}) {
			return
		}
		s.tracef("marker %s acknowledged on broker %d at p%d offset %d", v, mw.n.id, p.Partition, p.BaseOffset)
	}
	mw.reply(mw.mk.Partitions, nil)
}

// markerValue names a marker in readLog's values.
func markerValue(pid int64, epoch int16, commit bool) string {
	c := "a"
	if commit {
		c = "c"
	}
	return "M" + strconv.FormatInt(pid, 10) + "." + strconv.Itoa(int(epoch)) + "." + c
}

// markerEntry is what readLog holds for a control batch.
func markerEntry(batch []byte, h records.Header) string {
	m, err := records.ParseMarker(batch)
	if err != nil {
		return "M?"
	}
	return markerValue(h.ProducerID, h.ProducerEpoch, m.Commit())
}

// checkLSO checks, after a step, LSO <= HW on every replica of the topic and that a leader's
// LSO never goes back within its leadership.
func (s *Sim) checkLSO() {
	if s.txns == nil || len(s.txns.txns) == 0 {
		return // (no transaction yet: the LSO is the HW, checked as such)
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		st, _ := s.ctrl.Partition(topic, p)
		for _, n := range s.nodes {
			if !n.up() {
				continue
			}
			r, ok := n.b.Replica(topic, p)
			if !ok {
				continue
			}
			lso, hw := r.LSO(), r.HW()
			if lso > hw {
				s.fail("broker %d p%d: LSO %d > HW %d (LEO %d)", n.id, p, lso, hw, r.LEO())
				return
			}
			if !r.IsLeader() || n.id != st.Leader || r.LeaderEpoch() != st.LeaderEpoch {
				continue
			}
			tk := termKey{p, n.id, n.inc, st.LeaderEpoch}
			if last, seen := s.txns.lsoSeen[tk]; seen && lso < last {
				s.fail("p%d: leader %d LSO went back from %d to %d in epoch %d (HW %d)", p, n.id, last, lso, st.LeaderEpoch, hw)
				return
			}
			s.txns.lsoSeen[tk] = lso
		}
	}
}

// txnsNotLive lists what keeps the transactions from being live: a producer with a
// transaction or a request open, a zombie left, a coordinator's id not complete, a partition
// whose LSO is below its HW.
func (s *Sim) txnsNotLive() []string {
	ts := s.txns
	if ts == nil {
		return nil
	}
	var out []string
	for _, tp := range ts.producers {
		if tp.zombie || tp.state != tpIdle || tp.req != 0 || len(tp.inflight) > 0 {
			out = append(out, fmt.Sprintf("transactional producer %s (zombie %v) is %s", tp.tid, tp.zombie, tp.describe()))
		}
	}
	for p := int32(0); p < int32(s.nparts); p++ {
		st, _ := s.ctrl.Partition(topic, p)
		if st.Leader == controller.NoLeader || !s.nodes[st.Leader].up() {
			continue // (reported with the partition)
		}
		if r, ok := s.nodes[st.Leader].b.Replica(topic, p); ok && r.LSO() != r.HW() {
			out = append(out, fmt.Sprintf("p%d: LSO %d < HW %d on leader %d (open transactions %v)", p, r.LSO(), r.HW(), st.Leader, r.OpenTxns()))
		}
	}
	for p := int32(0); p < txnStatePartitions; p++ {
		st, ok := s.ctrl.Partition(txn.StateTopic, p)
		if !ok || st.Leader == controller.NoLeader {
			out = append(out, fmt.Sprintf("%s-%d has no leader", txn.StateTopic, p))
			continue
		}
		ref := ts.coords[st.Leader]
		if ref == nil || !s.nodes[st.Leader].up() || ref.b != s.nodes[st.Leader].b {
			out = append(out, fmt.Sprintf("%s-%d: no coordinator on leader %d", txn.StateTopic, p, st.Leader))
			continue
		}
		if _, ok := ref.c.LoadedEpoch(p); !ok {
			out = append(out, fmt.Sprintf("%s-%d: coordinator %d has not loaded it", txn.StateTopic, p, st.Leader))
		}
	}
	for _, tp := range ts.producers {
		p := txn.PartitionFor(tp.tid, txnStatePartitions)
		st, _ := s.ctrl.Partition(txn.StateTopic, p)
		ref := ts.coords[st.Leader]
		if ref == nil {
			continue
		}
		m, err := ref.c.Describe(tp.tid)
		if err != nil && !errors.Is(err, kerr.TransactionalIDNotFound) {
			out = append(out, fmt.Sprintf("transactional id %s: %v", tp.tid, err))
		} else if err == nil && m.State != txn.Empty && m.State != txn.CompleteCommit && m.State != txn.CompleteAbort {
			out = append(out, fmt.Sprintf("transactional id %s is %s on coordinator %d", tp.tid, m.State, st.Leader))
		}
	}
	return out
}
