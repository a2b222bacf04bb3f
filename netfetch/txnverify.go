package netfetch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/core/txn"
)

// TxnVerifier answers KIP-890's question for a partition leader: does the ongoing transaction
// of transactional id (producer id pid, epoch) hold each of tps? It is the id's coordinator's
// txn.Coordinator.VerifyPartitions: per partition nil or INVALID_TXN_STATE, or an error for
// the whole transaction (PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, ...).
// Called from connection goroutines concurrently.
type TxnVerifier func(id string, pid int64, epoch int16, tps []txn.TP) (map[txn.TP]error, error)

// VerifyTxnPartitions answers a verification with this server's transaction coordinator:
// NOT_COORDINATOR when it has none or does not own id's __transaction_state partition.
// Safe for concurrent use.
func (s *Server) VerifyTxnPartitions(id string, pid int64, epoch int16, tps []txn.TP) (map[txn.TP]error, error) {
	if s.txns == nil {
		return nil, fmt.Errorf("broker %d has no transaction coordinator: %w", s.cfg.BrokerID, kerr.NotCoordinator)
	}
	return s.txns.VerifyPartitions(id, pid, epoch, tps)
}

// checkTxnVerified is the leader's half of KIP-890 part 1 (Kafka's
// ReplicaManager.maybeStartTransactionVerificationForPartition), with
// transaction.partition.verification.enable on: a transactional batch of a producer that has
// no ongoing transaction on the partition yet (in its epoch) would open one, so the
// producer's transaction coordinator must first confirm the partition is in the transaction.
// Without this, a batch that arrives after its transaction was aborted (a retry delayed in
// the network) opens a transaction no coordinator knows of, and the partition's LSO stays
// stuck on it until the partition is deleted.
//
// The answer, as Kafka's ReplicaManager gives it to the producer: INVALID_TXN_STATE for a
// partition not in the transaction; NOT_ENOUGH_REPLICAS (retriable for every client) when
// the coordinator cannot answer now (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS); INVALID_PRODUCER_EPOCH for a
// fenced producer. A partition this broker does not lead, or a batch that does not parse,
// is left to the append, which refuses it with its own error.
//
// A marker written between the verification and the append would let the batch open the
// transaction anyway (Kafka closes this with its VerificationGuard): the partition's marker
// generation (txnGuard) is read before the verification, and produceVerified appends only if
// no marker came meanwhile. i is the partition's index in the request.
func (c *conn) checkTxnVerified(txnID *string, i int, topic string, partition int32, recs []byte) error {
	if !c.s.txnVerify || c.s.cfg.Broker == nil || len(recs) == 0 || broker.IsInternalTopic(topic) {
		return nil // an internal topic: the append refuses it (INVALID_TOPIC_EXCEPTION)
	}
	h, err := records.ParseHeader(recs)
	if err != nil || !h.IsTransactional() || h.IsControl() {
		return nil
	}
	r, ok := c.s.cfg.Broker.Replica(topic, partition)
	if !ok || !r.IsLeader() {
		return nil
	}
	if epoch, open := r.OpenTxn(h.ProducerID); open && epoch == h.ProducerEpoch {
		return nil // the transaction is open here already: verified when it began
	}
	if txnID == nil || *txnID == "" {
		return fmt.Errorf("%s-%d: a transactional batch of producer id %d without a transactional id cannot be verified: %w",
			topic, partition, h.ProducerID, kerr.TransactionalIDAuthorizationFailed)
	}
	tp := txn.TP{Topic: topic, Partition: partition}
	key := guardKey{tp: tp, pid: h.ProducerID}
	start := c.s.txnGuard.begin()
	per, err := c.s.verifyTxn(*txnID, h.ProducerID, h.ProducerEpoch, []txn.TP{tp})
	if err == nil {
		err = per[tp]
		if _, listed := per[tp]; !listed {
			err = fmt.Errorf("the coordinator did not answer for %s-%d: %w", topic, partition, kerr.InvalidTxnState)
		}
	}
	if h := c.s.onTxnVerified.Load(); err == nil && h != nil {
		(*h)(tp)
	}
	if err == nil {
		c.txnVerified = append(c.txnVerified, verifiedPart{i: i, key: key, start: start, id: *txnID})
	} else {
		c.s.txnGuard.end(start)
	}
	return verifyErrForProduce(*txnID, topic, partition, err)
}

// txnGuard orders the transaction markers written through this server against the appends
// of verified batches, per producer as Kafka's VerificationGuard (a marker of another
// producer's transaction on the partition does not concern a batch): a marker is appended
// under mu after recording, for its partition and producer, the next value of a sequence;
// a verified batch is appended under mu only if no marker of its producer reached its
// partition after its verification began (the sequence then). mu is held for appends
// only, never for a wait or a call to a coordinator. Entries no verification in flight can
// need are dropped, so the map stays bounded by the markers of the verifications in
// flight. Safe for concurrent use.
type txnGuard struct {
	mu       sync.Mutex
	seq      uint64              // markers written
	last     map[guardKey]uint64 // the seq of the last marker per partition and producer
	inflight map[uint64]int      // verifications begun and not ended, by their start seq
	pruneAt  int
}

type guardKey struct {
	tp  txn.TP
	pid int64
}

// begin starts a verification: its start, to be given to end once its batch is appended
// or refused.
func (g *txnGuard) begin() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight == nil {
		g.inflight = map[uint64]int{}
	}
	g.inflight[g.seq]++
	return g.seq
}

// end ends the verification begun at start (g.mu not held).
func (g *txnGuard) end(start uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.endLocked(start)
}

func (g *txnGuard) endLocked(start uint64) {
	if g.inflight[start]--; g.inflight[start] <= 0 {
		delete(g.inflight, start)
	}
}

// staleLocked reports whether a marker of key's producer reached its partition after a
// verification begun at start.
func (g *txnGuard) staleLocked(key guardKey, start uint64) bool { return g.last[key] > start }

// markedLocked records a marker of key's producer on its partition.
func (g *txnGuard) markedLocked(key guardKey) {
	if g.last == nil {
		g.last = map[guardKey]uint64{}
	}
	g.seq++
	g.last[key] = g.seq
	if len(g.last) <= max(g.pruneAt, 1024) {
		return
	}
	// An entry matters only to a verification begun before it: drop the others.
	oldest := g.seq
	for s := range g.inflight {
		oldest = min(oldest, s)
	}
	for k, v := range g.last {
		if v <= oldest {
			delete(g.last, k)
		}
	}
	g.pruneAt = 2 * len(g.last)
}

// verifiedPart is a request partition that passed its verification (checkTxnVerified).
type verifiedPart struct {
	i     int // index in the request (pre)
	key   guardKey
	start uint64 // txnGuard.begin's
	id    string
}

// appendTxnMarkers appends ms's markers (broker.AppendTxnMarkers) after bumping the marker
// generation of each of their partitions, under the guard, and returns their acks=all waits.
func (s *Server) appendTxnMarkers(ms []broker.TxnMarker) []*broker.ProduceWait {
	g := &s.txnGuard
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.txnVerify {
		for _, m := range ms {
			for _, p := range m.Partitions {
				g.markedLocked(guardKey{tp: txn.TP{Topic: p.Topic, Partition: p.Partition}, pid: m.ProducerID})
			}
		}
	}
	return s.cfg.Broker.AppendTxnMarkers(ms)
}

// produceVerified is broker.Produce for a request with verified partitions
// (c.txnVerified): under the guard, a verified partition a marker reached since its
// verification is refused (pre, INVALID_TXN_STATE, as Kafka's failed VerificationGuard), the
// others are appended (broker.ProduceAppend); then acks=all waits up to timeout, outside the
// guard. It returns the partitions appended (parts without the refused ones, in order) and
// how long it waited. The ProduceDelay / ProduceSpin ablations do not apply to it.
func (c *conn) produceVerified(acks int16, timeout time.Duration, parts []broker.ProducePartition, pre []error) ([]broker.ProducePartition, time.Duration) {
	g := &c.s.txnGuard
	g.mu.Lock()
	stale := false
	for _, v := range c.txnVerified {
		if g.staleLocked(v.key, v.start) {
			stale = true
			break
		}
	}
	if stale {
		kept, k := parts[:0], 0
		for i := range pre {
			if pre[i] != nil {
				continue
			}
			p := parts[k]
			k++
			refused := false
			for _, v := range c.txnVerified {
				if v.i == i && g.staleLocked(v.key, v.start) {
					pre[i] = fmt.Errorf("%s-%d: a transaction marker of producer id %d was written while the partition was being verified in the transaction of %q: %w",
						v.key.tp.Topic, v.key.tp.Partition, v.key.pid, v.id, kerr.InvalidTxnState)
					refused = true
				}
			}
			if !refused {
				kept = append(kept, p)
			}
		}
		parts = kept
	}
	var w *broker.ProduceWait
	if len(parts) > 0 {
		w = c.s.cfg.Broker.ProduceAppend(acks, parts)
	}
	for _, v := range c.txnVerified {
		g.endLocked(v.start)
	}
	g.mu.Unlock()
	if w == nil {
		return parts, 0
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	w.Wait(ctx)
	return parts, time.Since(t0)
}

// verifyErrForProduce translates a coordinator's verification error to the produce error
// Kafka's ReplicaManager answers (see checkTxnVerified).
func verifyErrForProduce(id, topic string, partition int32, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.InvalidTxnState):
		return fmt.Errorf("%s-%d was not added to the transaction of transactional id %q: %w", topic, partition, id, err)
	case errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.NotCoordinator),
		errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.CoordinatorLoadInProgress):
		return fmt.Errorf("%s-%d: unable to verify the partition has been added to the transaction of %q (%v): %w",
			topic, partition, id, err, kerr.NotEnoughReplicas)
	case errors.Is(err, kerr.ProducerFenced):
		return fmt.Errorf("%s-%d: the transaction of %q: %v: %w", topic, partition, id, err, kerr.InvalidProducerEpoch)
	}
	return fmt.Errorf("%s-%d: verifying the transaction of %q: %w", topic, partition, id, err)
}
