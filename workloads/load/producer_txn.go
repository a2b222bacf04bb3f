package load

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/spec"
)

// A transactional producer (producers.transactional.id) runs Kafka's
// beginTransaction / send x transaction.records / commitTransaction (or abortTransaction)
// on its pacer's schedule: the first send of a transaction begins it, the
// transaction.records-th ends it (Flush, then EndTxn), and so does the end of the load. While
// a transaction ends nothing is sent: its records' send delay shows the time.
//
// Commit latency is a committed transaction's first record's intended send time to the EndTxn
// answer (counted when that record is in the window). Each transaction's sequence range and
// outcome are kept for the read_committed read-back (CheckTransactions).

// Transaction outcomes.
const (
	txnOpen uint8 = iota
	txnCommitted
	txnAborted
	// txnUnknown: no EndTxn answer confirmed the outcome (the commit may have been written).
	txnUnknown
)

// errSendFailed counts a commit turned into an abort because a record of the transaction
// failed (TxnErrors "COMMIT:SEND_FAILED").
var errSendFailed = errors.New("SEND_FAILED")

// txnRange is one transaction of a producer: its records are seqs [first, end).
type txnRange struct {
	first, end uint64
	outcome    uint8
}

// txnProducer is the transaction state of a Producer; the producer goroutine alone uses open,
// index and firstIntended, the ranges are behind the Producer's mu.
type txnProducer struct {
	id       string
	records  int
	ratio    float64
	idHash   uint64
	open     bool
	index    uint64 // transactions begun so far
	first    uint64 // first seq of the open transaction
	firstInt int64  // its first record's intended send time, unix ns
	// sendFailed is set by a record of the open transaction that failed (the promise, on a
	// client goroutine): the transaction is then aborted, never committed, as the Java
	// producer's commitTransaction refuses after a failed send.
	sendFailed atomic.Bool
}

func newTxnProducer(id string, t spec.ProducerTxn) *txnProducer {
	h := fnv.New64a()
	h.Write([]byte(id))
	return &txnProducer{id: id, records: t.Records, ratio: t.AbortRatio, idHash: h.Sum64()}
}

// txnOpts are the kgo options of transactional producer txnID.
func txnOpts(p spec.ProducerSpec, txnID string) []kgo.Opt {
	return []kgo.Opt{kgo.TransactionalID(txnID), kgo.TransactionTimeout(time.Duration(p.Txn.TimeoutMs) * time.Millisecond)}
}

// AbortTxn reports whether transaction k (from 0) of the producer with transactional id hash
// idHash is aborted at abort ratio ratio: a splitmix64 hash of (idHash, k) below ratio, so the
// choice is the same in every run of a spec.
func AbortTxn(idHash, k uint64, ratio float64) bool {
	if ratio <= 0 {
		return false
	}
	z := idHash ^ (k+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11)/(1<<53) < ratio
}

// beginTxn begins a transaction before record seq (intended send time in) when none is open.
func (p *Producer) beginTxn(seq uint64, in int64) error {
	t := p.txn
	if t == nil || t.open {
		return nil
	}
	if err := p.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("transactional.id %s: begin transaction %d: %w", t.id, t.index, err)
	}
	t.open, t.first, t.firstInt = true, seq, in
	t.index++
	return nil
}

// txnFull reports whether the open transaction holds transaction.records records (seq is the
// next record's).
func (p *Producer) txnFull(seq uint64) bool {
	t := p.txn
	return t != nil && t.open && seq-t.first >= uint64(t.records)
}

// endTxn ends the open transaction, whose records are seqs [t.first, end): it flushes them,
// then commits it or, as the abort ratio picks, aborts it. A commit that is not attempted or
// aborted by the broker (a failed produce, TRANSACTION_ABORTABLE) is retried as an abort; an
// EndTxn whose outcome is unconfirmed is retried as an abort, and the transaction's outcome
// is then unknown. Errors are counted (TxnErrors), never fatal: the next transaction starts
// afresh. It returns an error only when the client cannot end the transaction at all (the run
// stops on it), and nil when ctx ended (the outcome is then unknown).
func (p *Producer) endTxn(ctx context.Context, end uint64) error {
	t := p.txn
	if t == nil || !t.open {
		return nil
	}
	t.open = false
	k := t.index - 1
	commit := !AbortTxn(t.idHash, k, t.ratio)
	outcome := txnAborted
	if err := p.cl.Flush(ctx); err != nil {
		p.noteTxn(t.first, end, txnUnknown, "FLUSH", err)
		return nil // ctx ended: the run is stopping
	}
	if t.sendFailed.Swap(false) && commit {
		commit = false // a record of it failed: committing would make a partial transaction visible
		p.countTxnErr("COMMIT", errSendFailed)
	}
	err := p.cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	switch {
	case err == nil && commit:
		outcome = txnCommitted
		if p.Win.In(t.firstInt) {
			p.Commit.RecordNs(time.Now().UnixNano() - t.firstInt)
		}
	case err == nil:
	case errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch):
		// Another producer initialised the same transactional.id: its InitProducerId
		// aborted this transaction, and this producer can send no more.
		p.countTxnErr("END_TXN", err)
		p.noteTxn(t.first, end, txnAborted, "", nil)
		return fmt.Errorf("transactional.id %s: fenced by another producer with the same id (%w): give each run its own producers.transactional.id", t.id, err)
	default:
		p.countTxnErr("END_TXN", err)
		unconfirmed := commit && !errors.Is(err, kerr.OperationNotAttempted) && !errors.Is(err, kerr.TransactionAbortable)
		if unconfirmed {
			outcome = txnUnknown
		}
		// Retry as an abort until it is confirmed (a coordinator moving or restarting
		// answers after a while) or ctx ends.
		for i := 0; ; i++ {
			aerr := p.cl.EndTransaction(ctx, kgo.TryAbort)
			if aerr == nil {
				break
			}
			p.countTxnErr("ABORT_TXN", aerr)
			if ctx.Err() != nil {
				p.noteTxn(t.first, end, txnUnknown, "", nil)
				return nil
			}
			if i == 100 {
				p.noteTxn(t.first, end, txnUnknown, "", nil)
				return fmt.Errorf("transactional.id %s: transaction %d: abort failed 100 times: %w", t.id, k, aerr)
			}
			if !poll.Sleep(ctx, 100*time.Millisecond) {
				p.noteTxn(t.first, end, txnUnknown, "", nil)
				return nil
			}
		}
	}
	p.noteTxn(t.first, end, outcome, "", nil)
	return nil
}

// noteTxn records transaction [first, end)'s outcome, and err under name when err is set.
func (p *Producer) noteTxn(first, end uint64, outcome uint8, name string, err error) {
	if err != nil {
		p.countTxnErr(name, err)
	}
	p.mu.Lock()
	p.txns = append(p.txns, txnRange{first, end, outcome})
	p.mu.Unlock()
}

// countTxnErr counts a transaction call's error as "<call>:<Kafka error name>".
func (p *Producer) countTxnErr(call string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.txnErrs == nil {
		p.txnErrs = map[string]int64{}
	}
	p.txnErrs[call+":"+errorName(err)]++
}

// TxnCounts sums the producers' transactions by outcome (whole run): committed, aborted,
// unknown, the records of the committed and aborted ones, and the transaction calls' errors.
func TxnCounts(prods []*Producer) (committed, aborted, unknown, committedRecs, abortedRecs int64, errs map[string]int64) {
	errs = map[string]int64{}
	for _, p := range prods {
		p.mu.Lock()
		for _, t := range p.txns {
			n := int64(t.end - t.first)
			switch t.outcome {
			case txnCommitted:
				committed++
				committedRecs += n
			case txnAborted:
				aborted++
				abortedRecs += n
			default:
				unknown++
			}
		}
		for k, v := range p.txnErrs {
			errs[k] += v
		}
		p.mu.Unlock()
	}
	return
}

// Transactional reports whether p is a transactional producer.
func (p *Producer) Transactional() bool { return p.txn != nil }

// IsolationOpts are a consumer's options for isolation level (spec.ReadCommitted or
// spec.ReadUncommitted). The consumer keeps the control records (it skips them as records of
// no producer) so that its position passes the commit and abort markers: it has caught up with
// a partition when it read up to the HW (read_committed: the LSO, which reaches the HW once
// every transaction ended).
func IsolationOpts(level string) []kgo.Opt {
	if level != spec.ReadCommitted {
		return []kgo.Opt{kgo.KeepControlRecords()}
	}
	return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}
}
