package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/txn"
)

// The transactional producers of the simulation (txns.go): each a process of a transactional
// id that initialises it, begins transactions, adds partitions, sends acks=all batches (one in
// flight per partition, retried with the same sequence) and ends them. Requests to the
// coordinator go to the leader of the id's __transaction_state partition as the controller
// names it, over the simulated network.

type tpState int8

const (
	tpInit    tpState = iota // InitProducerId to send
	tpIdle                   // no transaction open
	tpAdding                 // AddPartitionsToTxn to send
	tpSending                // batches to send
	tpEnding                 // EndTxn to send
)

var tpStateNames = [...]string{"initialising", "idle", "adding partitions", "sending", "ending its transaction"}

// tproducer is one process of a transactional id.
type tproducer struct {
	tid   string
	inc   int // process incarnation: answers to an earlier one are dropped
	state tpState
	pid   int64
	epoch int16
	seq   map[int32]int32
	cur   *txnRec
	// toSend: batches left to send per partition of the transaction; inflight: the batch
	// in flight per partition.
	toSend   map[int32]int
	inflight map[int32]*idemBatch
	commit   bool // the transaction ends with a commit
	// req is the coordinator request in flight (0: none), sent at sentAt; after an error
	// the next waits until backoff (retry.backoff.ms).
	req     int
	sentAt  int64
	backoff int64
	// zombie: the old process of a restart, going on for life more requests.
	zombie bool
	life   int
}

func (tp *tproducer) describe() string {
	d := tpStateNames[tp.state]
	if tp.req != 0 {
		d += ", a request in flight"
	}
	if len(tp.inflight) > 0 {
		d += fmt.Sprintf(", %d batches in flight", len(tp.inflight))
	}
	return d
}

// txnStep moves producer tp on by one request. produce false: the faults heal; producers end
// what they began but begin nothing, and zombies stop.
func (s *Sim) txnStep(tp *tproducer, produce bool) {
	if tp.zombie && (!produce || tp.life <= 0) {
		s.dropTxnProducer(tp, "stops")
		return
	}
	if tp.req != 0 {
		if s.now-tp.sentAt < txnRequestNs {
			return
		}
		s.tracef("txn: %s gives up its request %d", tp.tid, tp.req)
		tp.req = 0
	}
	if s.now < tp.backoff {
		return
	}
	switch tp.state {
	case tpInit:
		s.txnInit(tp)
	case tpIdle:
		switch r := s.rng.IntN(100); {
		case !produce:
		case r < 5 && !tp.zombie:
			s.restartTxnProducer(tp)
		case r < 80:
			s.beginTxn(tp)
		}
	case tpAdding:
		s.txnAdd(tp)
	case tpSending:
		if produce && !tp.zombie && s.rng.IntN(20) == 0 {
			s.restartTxnProducer(tp) // mid-transaction: the new process's Init aborts it
			return
		}
		if produce && !tp.zombie && s.rng.IntN(60) == 0 {
			// The process stalls for good: its transaction times out on the coordinator.
			s.stats.Txns.Abandoned++
			s.tracef("txn: %s stalls in transaction %d", tp.tid, tp.cur.num)
			s.restartTxnProducerQuietly(tp)
			return
		}
		s.txnSend(tp)
	case tpEnding:
		if produce && !tp.zombie && s.rng.IntN(8) == 0 {
			s.restartTxnProducer(tp) // before its EndTxn: the old process may still send it
			return
		}
		s.txnEnd(tp)
	}
}

// restartTxnProducer: the process of tp restarts with the same transactional id; during a
// transaction, between batches, the old process goes on for a few requests (a zombie).
func (s *Sim) restartTxnProducer(tp *tproducer) {
	if tp.state >= tpAdding && len(tp.inflight) == 0 {
		// (Between batches: a batch in flight stays the old process's, answered to it.)
		z := *tp
		z.zombie, z.life = true, 1+s.rng.IntN(4)
		z.seq, z.toSend, z.inflight = maps.Clone(tp.seq), maps.Clone(tp.toSend), map[int32]*idemBatch{}
		s.txns.producers = append(s.txns.producers, &z)
		s.stats.Txns.Zombies++
		s.tracef("txn: %s restarts; the old process (producer %d epoch %d) goes on", tp.tid, tp.pid, tp.epoch)
	}
	s.restartTxnProducerQuietly(tp)
	s.stats.Txns.Restarts++
}

func (s *Sim) restartTxnProducerQuietly(tp *tproducer) {
	tp.inc++
	tp.state, tp.req, tp.cur, tp.inflight, tp.toSend = tpInit, 0, nil, nil, nil
	s.tracef("txn: %s restarts", tp.tid)
}

func (s *Sim) dropTxnProducer(tp *tproducer, why string) {
	s.txns.producers = slices.DeleteFunc(s.txns.producers, func(o *tproducer) bool { return o == tp })
	s.tracef("txn: zombie of %s %s", tp.tid, why)
}

// fenced handles an answer that fences tp (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, or a
// producer id the coordinator no longer maps): a zombie stops, a live process starts over
// (a new process with the same transactional id, as an application does).
func (s *Sim) fenced(tp *tproducer, err error) {
	s.stats.Txns.Fenced++
	if tp.zombie {
		s.dropTxnProducer(tp, fmt.Sprintf("is fenced: %v", err))
		return
	}
	s.tracef("txn: %s (producer %d epoch %d) fenced: %v", tp.tid, tp.pid, tp.epoch, err)
	s.restartTxnProducerQuietly(tp)
}

func fencedError(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) || errors.Is(err, kerr.InvalidTxnState)
}

// txnSend sends the next batch of tp's transaction to a partition with none in flight, or,
// once every batch is acknowledged, ends the transaction.
func (s *Sim) txnSend(tp *tproducer) {
	for _, p := range slices.Sorted(maps.Keys(tp.toSend)) {
		if tp.inflight[p] == nil && tp.toSend[p] > 0 {
			s.sendTxnBatch(tp, p)
			return
		}
	}
	if len(tp.inflight) == 0 {
		tp.state = tpEnding
		s.txnEnd(tp)
	}
}

// txnRequest carries a request of tp to the coordinator of its transactional id: exec runs on
// that broker with its coordinator and hands its answer to reply, which carries it back
// (dropped if tp gave the request up or restarted). A broker down or restarted answers
// NOT_COORDINATOR.
func (s *Sim) txnRequest(tp *tproducer, what string, exec func(c *txn.Coordinator, reply func(func())), answer func(error)) {
	p := txn.PartitionFor(tp.tid, txnStatePartitions)
	st, ok := s.ctrl.Partition(txn.StateTopic, p)
	if !ok || st.Leader == controller.NoLeader {
		return
	}
	ts := s.txns
	ts.reqs++
	id, inc := ts.reqs, tp.inc
	tp.req, tp.sentAt = id, s.now
	if tp.zombie {
		tp.life--
	}
	n := s.nodes[st.Leader]
	const client = -1
	reply := func(fn func()) {
		s.at(s.now+s.delay(n.id, client), func() {
			if tp.req != id || tp.inc != inc {
				return
			}
			tp.req = 0
			tp.backoff = s.now + int64(100*time.Millisecond) // (used only if it failed)
			fn()
		})
	}
	failed := func() {
		reply(func() { answer(fmt.Errorf("%s to broker %d: connection lost: %w", what, n.id, kerr.NotCoordinator)) })
	}
	s.at(s.now+s.delay(client, n.id), func() {
		s.deliver(n, n.inc, func() {
			c := s.txnCoordinator(n)
			if c == nil {
				failed()
				return
			}
			c.Scan()
			exec(c, reply)
		}, failed)
	})
}

func (s *Sim) txnInit(tp *tproducer) {
	s.stats.Txns.Inits++
	s.txnRequest(tp, "InitProducerId", func(c *txn.Coordinator, reply func(func())) {
		c.InitProducerIDAsync(tp.tid, txnTimeoutMs, -1, -1, func(pid int64, epoch int16, err error) {
			reply(func() {
				if err != nil {
					s.tracef("txn: %s InitProducerId: %v", tp.tid, err)
					return
				}
				tp.pid, tp.epoch, tp.state, tp.seq, tp.backoff = pid, epoch, tpIdle, map[int32]int32{}, 0
				s.tracef("txn: %s initialised: producer %d epoch %d", tp.tid, pid, epoch)
			})
		})
	}, func(error) {})
}

// beginTxn begins a transaction on one to three partitions of the topic, one or two batches
// each, ending in a commit three times in four.
func (s *Sim) beginTxn(tp *tproducer) {
	ts := s.txns
	k := 1 + s.rng.IntN(min(3, s.nparts))
	parts := slices.Clone(s.rng.Perm(s.nparts)[:k])
	t := &txnRec{num: len(ts.txns), tid: tp.tid, pid: tp.pid, epoch: tp.epoch, values: map[int32][]string{}, zombieProc: tp.zombie}
	tp.toSend, tp.inflight = map[int32]int{}, map[int32]*idemBatch{}
	for _, p := range parts {
		t.parts = append(t.parts, int32(p))
		tp.toSend[int32(p)] = 1 + s.rng.IntN(2)
	}
	slices.Sort(t.parts)
	ts.txns = append(ts.txns, t)
	tp.cur, tp.state, tp.commit = t, tpAdding, s.rng.IntN(4) != 0
	s.stats.Txns.Begun++
	s.tracef("txn: %s begins transaction %d on %v (producer %d epoch %d)", tp.tid, t.num, t.parts, tp.pid, tp.epoch)
	s.txnAdd(tp)
}

func (s *Sim) txnAdd(tp *tproducer) {
	tps := make([]txn.TP, len(tp.cur.parts))
	for i, p := range tp.cur.parts {
		tps[i] = txn.TP{Topic: topic, Partition: p}
	}
	pid, epoch := tp.pid, tp.epoch
	s.txnRequest(tp, "AddPartitionsToTxn", func(c *txn.Coordinator, reply func(func())) {
		c.AddPartitionsAsync(tp.tid, pid, epoch, tps, func(bad map[txn.TP]error, err error) {
			reply(func() {
				switch {
				case err == nil && len(bad) == 0:
					tp.state, tp.backoff = tpSending, 0
				case err != nil && fencedError(err):
					s.fenced(tp, err)
				default:
					s.tracef("txn: %s AddPartitionsToTxn: %v %v", tp.tid, err, bad)
				}
			})
		})
	}, func(error) {})
}

// sendTxnBatch sends the next batch of tp's transaction to partition p's leader (acks=all).
func (s *Sim) sendTxnBatch(tp *tproducer, p int32) {
	nrec := 1 + s.rng.IntN(3)
	ib := &idemBatch{p: p, seq: tp.seq[p], values: make([]string, nrec)}
	recs := make([]records.Record, nrec)
	for i := range recs {
		s.nextValue++
		ib.values[i] = fmt.Sprintf("x%d", s.nextValue)
		s.txns.ofValue[ib.values[i]] = tp.cur.num
		recs[i] = records.Record{Value: []byte(ib.values[i])}
	}
	ib.blob = txnBatch(tp.pid, tp.epoch, ib.seq, s.now/int64(time.Millisecond), recs)
	tp.inflight[p] = ib
	s.stats.Produced++
	s.sendTxnAttempt(tp, ib)
}

func (s *Sim) sendTxnAttempt(tp *tproducer, ib *idemBatch) {
	ib.attempt++
	attempt, inc, t := ib.attempt, tp.inc, tp.cur
	live := func() bool { return tp.inc == inc && tp.inflight[ib.p] == ib && ib.attempt == attempt }
	retry := func(why string) {
		if !live() {
			return
		}
		s.tracef("txn: %s p%d seq %d: %s, retrying", tp.tid, ib.p, ib.seq, why)
		s.at(s.now+int64(100*time.Millisecond), func() {
			if live() {
				s.sendTxnAttempt(tp, ib)
			}
		})
	}
	s.at(s.now+timeoutNs+int64(time.Second), func() { retry("no answer") })
	st, ok := s.ctrl.Partition(topic, ib.p)
	if !ok || st.Leader == controller.NoLeader {
		return
	}
	n := s.nodes[st.Leader]
	ninc := n.inc
	done := func(res broker.ProducePartition) {
		if !live() {
			return
		}
		switch {
		case res.Err == nil:
			delete(tp.inflight, ib.p)
			tp.toSend[ib.p]--
			tp.seq[ib.p] = ib.seq + int32(len(ib.values))
			s.stats.AckedAll++
			for i, v := range ib.values {
				s.recordAck(key{ib.p, res.BaseOffset + int64(i)}, entry{v, valueNum(v)})
			}
			t.values[ib.p] = append(t.values[ib.p], ib.values...)
			s.tracef("txn: %s transaction %d p%d seq %d: offsets %d..%d", tp.tid, t.num, ib.p, ib.seq, res.BaseOffset, res.BaseOffset+int64(len(ib.values))-1)
		case fencedError(res.Err):
			s.fenced(tp, res.Err)
		case errors.Is(res.Err, kerr.OutOfOrderSequenceNumber) && !s.lossy[ib.p]:
			s.fail("txn: %s p%d seq %d: %v: the broker lost the producer's acknowledged batches", tp.tid, ib.p, ib.seq, res.Err)
		case errors.Is(res.Err, kerr.OutOfOrderSequenceNumber), errors.Is(res.Err, kerr.UnknownProducerID):
			s.fenced(tp, res.Err) // after an excused loss: fatal to the producer, as for idempotent ones
		default:
			retry(res.Err.Error())
		}
	}
	s.at(s.now+s.delay(-1, n.id), func() {
		s.deliver(n, ninc, func() {
			parts := []broker.ProducePartition{{Topic: topic, Partition: ib.p, Records: slices.Clone(ib.blob)}}
			h, need := n.b.TxnVerificationNeeded(topic, ib.p, parts[0].Records)
			if !need {
				s.appendTxnBatch(n, ninc, parts, ib.values, done, nil)
				return
			}
			// KIP-890: the leader asks the producer's coordinator first, as netfetch does.
			start := n.b.BeginTxnVerification()
			s.verifyTxnBatch(n, ninc, tp.tid, h.ProducerID, h.ProducerEpoch, ib.p, func(err error) {
				if err = broker.TxnVerifyErrForProduce(tp.tid, topic, ib.p, err); err != nil {
					n.b.EndTxnVerification(start)
					s.stats.Txns.VerifyRefused++
					parts[0].Err, parts[0].BaseOffset = err, -1
					s.respond(n, -1, parts, ib.values, done)
					return
				}
				s.appendTxnBatch(n, ninc, parts, ib.values, done, []broker.TxnVerified{{Index: 0, Topic: topic, Partition: ib.p,
					ProducerID: h.ProducerID, Start: start, ID: tp.tid}})
			})
		}, nil)
	})
}

// appendTxnBatch appends a transactional batch on leader n (ProduceVerified when verified is
// set, under the verification guard) and answers it once acks=all is met.
func (s *Sim) appendTxnBatch(n *node, ninc int, parts []broker.ProducePartition, values []string, done func(broker.ProducePartition), verified []broker.TxnVerified) {
	var w *broker.ProduceWait
	if verified == nil {
		w = n.b.ProduceAppend(-1, parts)
	} else {
		pre := []error{nil}
		_, w = n.b.ProduceVerified(-1, parts, verified, pre)
		if pre[0] != nil {
			s.stats.Txns.VerifyRefused++
			s.tracef("broker %d: p%d: %v", n.id, parts[0].Partition, pre[0])
			parts[0].Err, parts[0].BaseOffset = pre[0], -1
		} else {
			s.stats.Txns.Verified++
		}
	}
	if w == nil {
		s.respond(n, -1, parts, values, done)
		return
	}
	s.pending = append(s.pending, s.newPending(n, ninc, w, parts, values, done))
}

// verifyTxnBatch asks, from leader n (incarnation ninc), the coordinator of transactional id
// tid whether partition p is in the ongoing transaction of producer pid / epoch, over the
// simulated network, and runs answer on n with the coordinator's answer for p (nil: it is).
// A lost request or answer, or a coordinator that is not there, answers NOT_COORDINATOR
// after the request timeout; a restarted n hears nothing (its produce is answered by no one,
// and the producer retries).
func (s *Sim) verifyTxnBatch(n *node, ninc int, tid string, pid int64, epoch int16, p int32, answer func(error)) {
	at := func(err error) func() {
		return func() { s.deliver(n, ninc, func() { answer(err) }, nil) }
	}
	lost := func() {
		s.at(s.now+rpcTimeNs, at(fmt.Errorf("verifying with the coordinator of %q: no answer: %w", tid, kerr.NotCoordinator)))
	}
	st, ok := s.ctrl.Partition(txn.StateTopic, txn.PartitionFor(tid, txnStatePartitions))
	if !ok || st.Leader == controller.NoLeader {
		lost()
		return
	}
	cn := s.nodes[st.Leader]
	cinc := cn.inc
	s.send(n.id, cn.id, func() {
		s.deliver(cn, cinc, func() {
			var err error
			if c := s.txnCoordinator(cn); c == nil {
				err = fmt.Errorf("broker %d has no transaction coordinator: %w", cn.id, kerr.NotCoordinator)
			} else {
				c.Scan()
				tp := txn.TP{Topic: topic, Partition: p}
				per, verr := c.VerifyPartitions(tid, pid, epoch, []txn.TP{tp})
				err = txn.VerifiedOne(per, verr, tp)
			}
			s.send(cn.id, n.id, at(err), lost)
		}, lost)
	}, lost)
}

func (s *Sim) txnEnd(tp *tproducer) {
	t, commit := tp.cur, tp.commit
	if commit {
		t.commitReq = true
	}
	pid, epoch := tp.pid, tp.epoch
	s.txnRequest(tp, "EndTxn", func(c *txn.Coordinator, reply func(func())) {
		c.EndTxnAsync(tp.tid, pid, epoch, commit, func(err error) {
			reply(func() {
				switch {
				case err == nil:
					if commit {
						t.commitAck = true
						s.stats.Txns.Committed++
					} else {
						t.abortAck = true
						s.stats.Txns.Aborted++
					}
					tp.state, tp.cur, tp.backoff = tpIdle, nil, 0
					s.tracef("txn: %s transaction %d %s", tp.tid, t.num, map[bool]string{true: "committed", false: "aborted"}[commit])
				case fencedError(err):
					s.fenced(tp, err)
				default:
					s.tracef("txn: %s EndTxn of transaction %d: %v", tp.tid, t.num, err)
				}
			})
		})
	}, func(error) {})
}

// txnBatch builds one uncompressed transactional batch (producer id, epoch, base sequence,
// the transactional attribute; CRC over the rest).
func txnBatch(pid int64, epoch int16, seq int32, ts int64, recs []records.Record) []byte {
	b := records.AppendBatch(nil, 0, 0, ts, recs)
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|uint16(records.TransactionalBit))
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
