package load

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A restart-producer fault (spec.Fault, kind restart-producer) kills a transactional
// producer in the middle of a transaction and starts it again with the same
// transactional.id. The producer goroutine does it between two sends once an open transaction
// holds half its transaction.records (at least one): it creates the new client and waits for its InitProducerId, which bumps the producer
// epoch (fencing the old client, now a zombie) and makes the coordinator abort the zombie's
// open transaction. The zombie then tries to flush and commit that transaction, as a process
// that was only paused would, and must be refused; it is closed, and the load goes on with the
// new client from the next record. The killed transaction's records count as aborted: the
// read_committed check (CheckTransactions) finds an anomaly if any of them is visible.

// restartReq asks the producer goroutine to restart; done gets its report.
type restartReq struct {
	done chan RestartReport
}

// RestartReport is what a producer restart did.
type RestartReport struct {
	// TxnID is the transactional.id; ProducerID and Epoch the new instance's.
	TxnID      string
	ProducerID int64
	Epoch      int16
	// Killed is the number of records of the open transaction the restart killed.
	Killed uint64
	// ZombieErr is the error that refused the zombie's commit ("" if it was accepted).
	ZombieErr string
	// Err is why the restart failed or the zombie was not fenced (nil when it went as it must).
	Err error
}

// errZombieRefusedAtProduce stands for the zombie's EndTxn when every record of its
// transaction was refused, so that the client sent none.
var errZombieRefusedAtProduce = errors.New("every record of its transaction refused (PRODUCER_FENCED at produce: no partition joined it, so no EndTxn was sent)")

// ackedIn counts the records of seqs [from, to) that were acknowledged.
func (p *Producer) ackedIn(from, to uint64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for i := from; i < to; i++ {
		if p.acked.has(i) {
			n++
		}
	}
	return n
}

// restartWait bounds each step of a restart (the InitProducerId that waits for the abort of
// the open transaction; the zombie's flush and commit).
const restartWait = 30 * time.Second

// Restart kills transactional producer p in its next open transaction and restarts it with
// the same transactional.id; it returns when that was done, or with an error when ctx ends
// first (the load ended, or p is not transactional). Any goroutine may call it; one restart
// at a time.
func (p *Producer) Restart(ctx context.Context) RestartReport {
	if p.txn == nil {
		return RestartReport{Err: fmt.Errorf("producer %d is not transactional", p.ID)}
	}
	req := restartReq{done: make(chan RestartReport, 1)}
	select {
	case p.restart <- req:
	case <-ctx.Done():
		return RestartReport{TxnID: p.txn.id, Err: ctx.Err()}
	}
	select {
	case rep := <-req.done:
		return rep
	case <-ctx.Done():
		// Not taken before the load ended: withdraw the request if it is still queued.
		select {
		case <-p.restart:
			return RestartReport{TxnID: p.txn.id, Err: fmt.Errorf("the producer had no open transaction before the load ended: %w", ctx.Err())}
		case rep := <-req.done:
			return rep
		}
	}
}

// restartTxn (producer goroutine, a transaction open, seq the next record's) replaces p's
// client by a new instance of the same transactional.id and lets the old one try to commit.
func (p *Producer) restartTxn(ctx context.Context, seq uint64) RestartReport {
	t := p.txn
	rep := RestartReport{TxnID: t.id, Killed: seq - t.first}
	cl, err := newClient(roleProducer, p.opts...)
	if err != nil {
		rep.Err = fmt.Errorf("transactional.id %s: the new instance: %w", t.id, err)
		return rep
	}
	ictx, cancel := context.WithTimeout(ctx, restartWait)
	rep.ProducerID, rep.Epoch, err = cl.ProducerID(ictx)
	cancel()
	if err != nil {
		cl.Close()
		rep.Err = fmt.Errorf("transactional.id %s: the new instance's InitProducerId: %w", t.id, err)
		return rep
	}
	zombie := p.cl
	p.mu.Lock()
	p.cl = cl
	p.mu.Unlock()
	zctx, cancel := context.WithTimeout(ctx, restartWait)
	ferr := zombie.Flush(zctx) // its records fail with PRODUCER_FENCED or INVALID_PRODUCER_EPOCH
	zerr := zombie.EndTransaction(zctx, kgo.TryCommit)
	cancel()
	zombie.Close()
	t.open = false
	p.noteTxn(t.first, seq, txnAborted, "", nil)
	if zerr == nil {
		// franz-go ends a transaction none of whose records was accepted without asking the
		// coordinator (no partition joined it, so there is nothing to commit): the zombie was
		// fenced at its produce, before any EndTxn. Any record of it acknowledged would be a
		// zombie write accepted.
		switch acked := p.ackedIn(t.first, seq); {
		case ferr != nil:
			rep.Err = fmt.Errorf("transactional.id %s: the zombie's flush did not finish: %w", t.id, ferr)
			return rep
		case acked > 0:
			rep.Err = fmt.Errorf("transactional.id %s: the zombie's commit was accepted after the new instance's InitProducerId (%d of its records acknowledged): it was not fenced", t.id, acked)
			return rep
		}
		zerr = errZombieRefusedAtProduce
	}
	rep.ZombieErr = zerr.Error()
	if ke := (*kerr.Error)(nil); errors.As(zerr, &ke) {
		rep.ZombieErr = ke.Message
	}
	if ferr != nil && !errors.Is(ferr, context.DeadlineExceeded) {
		rep.ZombieErr += " (its flush: " + ferr.Error() + ")"
	}
	p.countTxnErr("ZOMBIE_END_TXN", zerr)
	return rep
}
