package broker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/records"
)

// KIP-890 part 1 on a partition leader (Kafka's ReplicaManager.maybeStartTransactionVerificationForPartition
// and VerificationGuard), with transaction.partition.verification.enable on (Kafka's
// default): a transactional batch of a producer that has no ongoing transaction on the
// partition yet (in its epoch) would open one, so the producer's transaction coordinator must
// first confirm the partition is in the transaction. Without it, a batch that arrives after
// its transaction was aborted (a retry delayed in the network) opens a transaction no
// coordinator knows of, and the partition's LSO stays stuck on it until the partition is
// deleted.
//
// The broker answers which batches need it (TxnVerificationNeeded) and orders the appends of
// verified batches against the markers (the guard below); asking the coordinator is the
// caller's (netfetch over the network, the simulator over its simulated one), as is
// translating its answer (TxnVerifyErrForProduce).
//
// The guard: a marker written between a verification and the append would let the batch
// open the transaction anyway. A verification takes the guard's sequence before it asks
// (BeginTxnVerification); AppendTxnMarkers records, for each marker's partition and
// producer, the next value of the sequence, under the guard's mutex, before it appends; and
// ProduceVerified appends, under the same mutex, only the verified batches whose producer
// got no marker on their partition since their verification began (per producer, as
// Kafka's VerificationGuard: another producer's marker on the partition does not concern a
// batch). The mutex is held for appends only, never for a wait or a call to a coordinator.
// Entries no verification in flight can need are dropped, so the map stays bounded by the
// markers of the verifications in flight.

// txnGuardKey is a partition and a producer id.
type txnGuardKey struct {
	topic     string
	partition int32
	pid       int64
}

// txnGuard is the guard of the file comment. Safe for concurrent use.
type txnGuard struct {
	mu       sync.Mutex
	seq      uint64                 // markers written
	last     map[txnGuardKey]uint64 // the seq of the last marker per partition and producer
	inflight map[uint64]int         // verifications begun and not ended, by their start seq
	pruneAt  int
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
func (g *txnGuard) staleLocked(key txnGuardKey, start uint64) bool { return g.last[key] > start }

// markedLocked records a marker of key's producer on its partition.
func (g *txnGuard) markedLocked(key txnGuardKey) {
	if g.last == nil {
		g.last = map[txnGuardKey]uint64{}
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

// TxnVerificationNeeded reports whether the batch recs produced to topic-partition must be
// verified with its producer's transaction coordinator before it is appended, and its
// header: with verification on, a transactional data batch for a partition this broker
// leads, of a producer without a transaction open there in the batch's epoch. A partition
// this broker does not lead, an internal topic, or a batch that does not parse is left to
// the append, which refuses it with its own error.
func (b *Broker) TxnVerificationNeeded(topic string, partition int32, recs []byte) (records.Header, bool) {
	if !b.txnVerify || len(recs) == 0 || IsInternalTopic(topic) {
		return records.Header{}, false
	}
	h, err := records.ParseHeader(recs)
	if err != nil || !h.IsTransactional() || h.IsControl() {
		return h, false
	}
	r, ok := b.Replica(topic, partition)
	if !ok || !r.IsLeader() {
		return h, false
	}
	if epoch, open := r.OpenTxn(h.ProducerID); open && epoch == h.ProducerEpoch {
		return h, false // the transaction is open here already: verified when it began
	}
	return h, true
}

// BeginTxnVerification starts a verification (the guard's sequence now): give it to
// ProduceVerified in the partition's TxnVerified, or to EndTxnVerification when the batch
// is refused without an append.
func (b *Broker) BeginTxnVerification() uint64 { return b.txnGuard.begin() }

// EndTxnVerification ends a verification that will not reach ProduceVerified.
func (b *Broker) EndTxnVerification(start uint64) { b.txnGuard.end(start) }

// TxnVerified is a partition of a produce request that passed its verification.
type TxnVerified struct {
	Index      int // the partition's index in the request (ProduceVerified's pre)
	Topic      string
	Partition  int32
	ProducerID int64
	Start      uint64 // BeginTxnVerification's
	ID         string // the transactional id
}

// ProduceVerified is ProduceAppend for a request with verified partitions. pre holds, per
// partition of the request, nil or the error it was refused with already; parts are the
// request's partitions with a nil pre, in order. Under the guard, a verified partition that
// a marker of its producer reached since its verification began is refused (pre set to
// INVALID_TXN_STATE, as Kafka's failed VerificationGuard); the others are appended. It ends
// every verification of verified and returns the partitions appended (parts without the
// refused ones, in order) and their wait (nil: nothing appended).
func (b *Broker) ProduceVerified(acks int16, parts []ProducePartition, verified []TxnVerified, pre []error) ([]ProducePartition, *ProduceWait) {
	g := &b.txnGuard
	g.mu.Lock()
	defer g.mu.Unlock()
	stale := false
	for _, v := range verified {
		if g.staleLocked(v.key(), v.Start) {
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
			for _, v := range verified {
				if v.Index == i && g.staleLocked(v.key(), v.Start) {
					pre[i] = fmt.Errorf("%s-%d: a transaction marker of producer id %d was written while the partition was being verified in the transaction of %q: %w",
						v.Topic, v.Partition, v.ProducerID, v.ID, kerr.InvalidTxnState)
					refused = true
				}
			}
			if !refused {
				kept = append(kept, p)
			}
		}
		parts = kept
	}
	var w *ProduceWait
	if len(parts) > 0 {
		w = b.ProduceAppend(acks, parts)
	}
	for _, v := range verified {
		g.endLocked(v.Start)
	}
	return parts, w
}

func (v TxnVerified) key() txnGuardKey {
	return txnGuardKey{topic: v.Topic, partition: v.Partition, pid: v.ProducerID}
}

// TxnVerifyErrForProduce translates a coordinator's verification answer for one partition
// (nil: verified) to the produce error Kafka's ReplicaManager answers: INVALID_TXN_STATE for
// a partition not in the transaction; NOT_ENOUGH_REPLICAS (retriable for every client) when
// the coordinator cannot answer now (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS); INVALID_PRODUCER_EPOCH for a
// fenced producer.
func TxnVerifyErrForProduce(id, topic string, partition int32, err error) error {
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
