package txn

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The decision rules: pure functions of a transactional id's state, the request and the time
// (ms), as Kafka's TransactionCoordinator and TransactionMetadata decide. They never write:
// the Coordinator writes what they return to __transaction_state and installs it once the
// write is acknowledged.

// checkProducer: the request's producer id and epoch must be the transaction's current
// ones (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED otherwise; the wire layer answers
// INVALID_PRODUCER_EPOCH to request versions that predate PRODUCER_FENCED).
func checkProducer(m Meta, pid int64, epoch int16) error {
	if m.ProducerID != pid {
		return fmt.Errorf("transactional id %q has producer id %d, the request %d: %w", m.TransactionalID, m.ProducerID, pid, kerr.InvalidProducerIDMapping)
	}
	if epoch != m.ProducerEpoch {
		return fmt.Errorf("transactional id %q is at producer epoch %d, the request at %d (a newer producer fenced this one): %w",
			m.TransactionalID, m.ProducerEpoch, epoch, kerr.ProducerFenced)
	}
	return nil
}

func concurrent(m Meta) error {
	return fmt.Errorf("transactional id %q is completing a transaction (%s): %w", m.TransactionalID, m.State, kerr.ConcurrentTransactions)
}

// InitDecision is what Init returns: the next state to write, or that the open transaction
// must first be aborted with a bumped epoch (Fence) and Init asked again.
type InitDecision struct {
	Next       Meta
	AbortFirst bool
}

// Init decides InitProducerId for transactional id (KIP-98, KIP-360): a new id gets a fresh
// producer id at epoch 0; a known one is bumped to the next epoch (a new producer id once the
// epoch would overflow), which fences any older producer of the id. An open transaction is
// aborted first (AbortFirst). reqPID / reqEpoch (-1 / -1 when absent, KIP-360) must match the
// current producer when given.
func Init(cur Meta, exists bool, id string, timeoutMs int32, reqPID int64, reqEpoch int16, now int64, newPID func() int64) (InitDecision, error) {
	if !exists {
		return InitDecision{Next: Meta{TransactionalID: id, ProducerID: newPID(), ProducerEpoch: 0, TimeoutMs: timeoutMs, State: Empty, UpdateMs: now, StartMs: -1}}, nil
	}
	switch cur.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return InitDecision{}, concurrent(cur)
	case Ongoing:
		return InitDecision{AbortFirst: true}, nil
	}
	if reqPID >= 0 && (reqPID != cur.ProducerID || reqEpoch != cur.ProducerEpoch) {
		return InitDecision{}, fmt.Errorf("transactional id %q is at producer id %d epoch %d, the request names %d epoch %d: %w",
			id, cur.ProducerID, cur.ProducerEpoch, reqPID, reqEpoch, kerr.ProducerFenced)
	}
	next := cur
	next.TimeoutMs, next.State, next.Partitions, next.UpdateMs, next.StartMs = timeoutMs, Empty, nil, now, -1
	if cur.ProducerEpoch >= math.MaxInt16-1 {
		next.ProducerID, next.ProducerEpoch = newPID(), 0
	} else {
		next.ProducerEpoch++
	}
	return InitDecision{Next: next}, nil
}

// Fence starts the abort of cur's open transaction with a bumped epoch (a re-initialising
// producer, or the transaction timed out): the markers carry the new epoch, so the old
// producer's later writes are refused everywhere.
func Fence(cur Meta, now int64) Meta {
	next := cur
	next.State, next.UpdateMs = PrepareAbort, now
	if next.ProducerEpoch < math.MaxInt16 {
		next.ProducerEpoch++
	}
	return next
}

// AddPartitions decides AddPartitionsToTxn (and AddOffsetsToTxn with the group's
// __consumer_offsets partition): the transaction becomes Ongoing with tps added. write is
// false when nothing changes (every partition already in an Ongoing transaction).
func AddPartitions(cur Meta, exists bool, id string, pid int64, epoch int16, tps []TP, now int64) (next Meta, write bool, err error) {
	if !exists {
		return Meta{}, false, fmt.Errorf("transactional id %q unknown (InitProducerId first): %w", id, kerr.InvalidProducerIDMapping)
	}
	if err := checkProducer(cur, pid, epoch); err != nil {
		return Meta{}, false, err
	}
	switch cur.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return Meta{}, false, concurrent(cur)
	case Dead:
		return Meta{}, false, fmt.Errorf("transactional id %q is dead: %w", id, kerr.InvalidTxnState)
	}
	if cur.State == Ongoing {
		all := true
		for _, tp := range tps {
			all = all && cur.has(tp)
		}
		if all {
			return cur, false, nil
		}
	}
	next = cur
	if cur.State != Ongoing {
		next.Partitions, next.StartMs = nil, now
	}
	next.Partitions = next.withPartitions(tps)
	next.State, next.UpdateMs = Ongoing, now
	return next, true, nil
}

// End decides EndTxn: an Ongoing transaction goes to PrepareCommit or PrepareAbort (write);
// a retry of a completed EndTxn succeeds without a write; anything else is
// INVALID_TXN_STATE, or CONCURRENT_TRANSACTIONS while the markers are being written.
func End(cur Meta, exists bool, id string, pid int64, epoch int16, commit bool, now int64) (next Meta, write bool, err error) {
	if !exists {
		return Meta{}, false, fmt.Errorf("transactional id %q unknown: %w", id, kerr.InvalidProducerIDMapping)
	}
	if err := checkProducer(cur, pid, epoch); err != nil {
		return Meta{}, false, err
	}
	want := "abort"
	if commit {
		want = "commit"
	}
	switch {
	case cur.State == Ongoing:
		next = cur
		next.State, next.UpdateMs = PrepareAbort, now
		if commit {
			next.State = PrepareCommit
		}
		return next, true, nil
	case commit && cur.State == CompleteCommit, !commit && cur.State == CompleteAbort:
		return cur, false, nil
	case commit && cur.State == PrepareCommit, !commit && cur.State == PrepareAbort:
		return Meta{}, false, concurrent(cur)
	}
	return Meta{}, false, fmt.Errorf("transactional id %q cannot %s: its transaction is %s: %w", id, want, cur.State, kerr.InvalidTxnState)
}

// Complete is the state once every marker of a PrepareCommit / PrepareAbort transaction is
// written: CompleteCommit / CompleteAbort, with no partitions.
func Complete(cur Meta, now int64) Meta {
	next := cur
	switch cur.State {
	case PrepareCommit:
		next.State = CompleteCommit
	case PrepareAbort, PrepareEpochFence:
		next.State = CompleteAbort
	default:
		return cur
	}
	next.Partitions, next.UpdateMs = nil, now
	return next
}

// Expired reports whether cur's transaction has been open longer than its
// transaction.timeout.ms at now (the coordinator then aborts it, Fence).
func Expired(cur Meta, now int64) bool {
	return cur.State == Ongoing && cur.StartMs >= 0 && now > cur.StartMs+int64(cur.TimeoutMs)
}

// IDExpired reports whether transactional id cur is idle past transactional.id.expiration.ms
// (expirationMs) at now: no transaction open (Empty, CompleteCommit, CompleteAbort) and its
// last update at or before now - expirationMs (Kafka's removeExpiredTransactionalIds). The
// coordinator then writes its tombstone (the Dead state) and forgets it.
func IDExpired(cur Meta, now, expirationMs int64) bool {
	switch cur.State {
	case Empty, CompleteCommit, CompleteAbort:
		return cur.UpdateMs <= now-expirationMs
	}
	return false
}

// Verify decides the verify-only AddPartitionsToTxn of KIP-890 (version 4+, sent by a
// partition leader before it appends a transactional batch; Kafka's
// handleVerifyPartitionsInTransaction): nothing is written. The producer id and epoch must be
// the transaction's current ones (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED), a
// transaction being completed answers CONCURRENT_TRANSACTIONS (retriable); otherwise each
// partition answers nil when the transaction (Ongoing) holds it and INVALID_TXN_STATE when it
// does not: the producer did not add it, or its transaction already ended (a late batch of
// an ended transaction, which must not open a new one there).
func Verify(cur Meta, exists bool, id string, pid int64, epoch int16, tps []TP) (map[TP]error, error) {
	if !exists {
		return nil, fmt.Errorf("transactional id %q unknown: %w", id, kerr.InvalidProducerIDMapping)
	}
	if err := checkProducer(cur, pid, epoch); err != nil {
		return nil, err
	}
	switch cur.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return nil, concurrent(cur)
	}
	out := make(map[TP]error, len(tps))
	for _, tp := range tps {
		if cur.State == Ongoing && cur.has(tp) {
			out[tp] = nil
			continue
		}
		out[tp] = fmt.Errorf("transactional id %q (producer id %d epoch %d, %s) does not hold %s-%d in its transaction: %w",
			id, pid, epoch, cur.State, tp.Topic, tp.Partition, kerr.InvalidTxnState)
	}
	return out, nil
}
