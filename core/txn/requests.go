package txn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
)

// OffsetsTopic is the group coordinator's topic, whose partition AddOffsetsToTxn adds.
const OffsetsTopic = "__consumer_offsets"

// InitProducerID answers InitProducerId for transactional id id (KIP-98): the producer id and
// the new epoch, after aborting an open transaction with a bumped epoch (which fences the old
// producer). reqPID / reqEpoch are the request's (-1 when absent, KIP-360).
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, reqPID int64, reqEpoch int16) (int64, int16, error) {
	type result struct {
		pid   int64
		epoch int16
		err   error
	}
	r, err := block(ctx, func(done func(result)) {
		c.InitProducerIDAsync(id, timeoutMs, reqPID, reqEpoch, func(pid int64, epoch int16, err error) { done(result{pid, epoch, err}) })
	})
	if err != nil {
		return -1, -1, err
	}
	return r.pid, r.epoch, r.err
}

// InitProducerIDAsync is InitProducerID calling done with its answer (without the
// coordinator's lock, at most once).
func (c *Coordinator) InitProducerIDAsync(id string, timeoutMs int32, reqPID int64, reqEpoch int16, done func(int64, int16, error)) {
	if id == "" {
		done(-1, -1, fmt.Errorf("transactional id is empty: %w", kerr.InvalidRequest))
		return
	}
	if timeoutMs <= 0 || timeoutMs > c.cfg.MaxTimeoutMs {
		done(-1, -1, fmt.Errorf("transaction.timeout.ms %d outside (0, transaction.max.timeout.ms %d]: %w", timeoutMs, c.cfg.MaxTimeoutMs, kerr.InvalidTransactionTimeout))
		return
	}
	c.initAttempt(id, timeoutMs, reqPID, reqEpoch, 0, done)
}

func (c *Coordinator) initAttempt(id string, timeoutMs int32, reqPID int64, reqEpoch int16, attempt int, done func(int64, int16, error)) {
	abort := false
	c.updateAsync(id, func(cur Meta, exists bool) (Meta, bool, error) {
		d, err := Init(cur, exists, id, timeoutMs, reqPID, reqEpoch, c.now(), c.cfg.ProducerIDs)
		if err != nil {
			return Meta{}, false, err
		}
		if d.AbortFirst {
			abort = true
			return Fence(cur, c.now()), true, nil
		}
		return d.Next, true, nil
	}, func(next Meta, _ int32, err error) {
		switch {
		case err != nil:
			done(-1, -1, err)
		case !abort:
			done(next.ProducerID, next.ProducerEpoch, nil)
		case attempt > 0:
			done(-1, -1, concurrent(next))
		default:
			// The open transaction is aborted with the bumped epoch, then the id initialised
			// (the abort bumped the epoch the request named).
			c.completeAsync(next, func(err error) {
				if err != nil {
					done(-1, -1, err)
					return
				}
				c.initAttempt(id, timeoutMs, -1, -1, attempt+1, done)
			})
		}
	})
}

// AddPartitions answers AddPartitionsToTxn: the partitions join id's transaction. A partition
// of a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION, and then nothing is added
// (the others answer OPERATION_NOT_ATTEMPTED, which the wire layer fills in).
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []TP) (map[TP]error, error) {
	type result struct {
		bad map[TP]error
		err error
	}
	r, err := block(ctx, func(done func(result)) {
		c.AddPartitionsAsync(id, pid, epoch, tps, func(bad map[TP]error, err error) { done(result{bad, err}) })
	})
	if err != nil {
		return nil, err
	}
	return r.bad, r.err
}

// AddPartitionsAsync is AddPartitions calling done with its answer.
func (c *Coordinator) AddPartitionsAsync(id string, pid int64, epoch int16, tps []TP, done func(map[TP]error, error)) {
	c.addPartitions(id, pid, epoch, tps, true, done)
}

func (c *Coordinator) addPartitions(id string, pid int64, epoch int16, tps []TP, check bool, done func(map[TP]error, error)) {
	bad := map[TP]error{}
	for _, tp := range tps {
		if !check {
			break
		}
		parts, ok := c.ctrl.Partitions(tp.Topic)
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(parts) {
			bad[tp] = fmt.Errorf("%s-%d does not exist: %w", tp.Topic, tp.Partition, kerr.UnknownTopicOrPartition)
		}
	}
	if len(bad) > 0 {
		done(bad, nil)
		return
	}
	c.updateAsync(id, func(cur Meta, exists bool) (Meta, bool, error) {
		return AddPartitions(cur, exists, id, pid, epoch, tps, c.now())
	}, func(_ Meta, _ int32, err error) { done(nil, err) })
}

// VerifiedOne is the answer of a verification of the one partition tp (VerifyPartitions'
// per and err): nil when tp is in the transaction, else why not (an answer that does not
// name tp is INVALID_TXN_STATE).
func VerifiedOne(per map[TP]error, err error, tp TP) error {
	if err != nil {
		return err
	}
	if err, listed := per[tp]; listed {
		return err
	}
	return fmt.Errorf("the coordinator did not answer for %s-%d: %w", tp.Topic, tp.Partition, kerr.InvalidTxnState)
}

// VerifyPartitions answers a verify-only AddPartitionsToTxn (KIP-890, version 4+): whether
// producer pid / epoch's transaction of id holds each partition (Verify), without a write. A
// request in flight on the id answers CONCURRENT_TRANSACTIONS (the leader retries).
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, tps []TP) (map[TP]error, error) {
	if id == "" {
		return nil, fmt.Errorf("transactional id is empty: %w", kerr.InvalidRequest)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, lp, err := c.partLocked(id)
	if err != nil {
		return nil, err
	}
	e := lp.txns[id]
	if e != nil && e.pending {
		return nil, fmt.Errorf("transactional id %q has a request in flight: %w", id, kerr.ConcurrentTransactions)
	}
	var cur Meta
	if e != nil && e.exists {
		cur = e.meta
	}
	return Verify(cur, e != nil && e.exists, id, pid, epoch, tps)
}

// AddOffsets answers AddOffsetsToTxn: the group's __consumer_offsets partition joins the
// transaction (TxnOffsetCommit then writes the group's offsets there).
func (c *Coordinator) AddOffsets(ctx context.Context, id string, pid int64, epoch int16, group string) error {
	if group == "" {
		return fmt.Errorf("group id is empty: %w", kerr.InvalidGroupID)
	}
	// __consumer_offsets may not exist yet: clients send AddOffsetsToTxn before they look
	// up the group's coordinator, which creates it. Its marker is written once it exists.
	p := broker.JavaAbs(broker.JavaStringHashCode(group)) % c.cfg.OffsetsTopicNumPartitions
	r, err := block(ctx, func(done func(error)) {
		c.addPartitions(id, pid, epoch, []TP{{OffsetsTopic, p}}, false, func(_ map[TP]error, err error) { done(err) })
	})
	if err != nil {
		return err
	}
	return r
}

// EndTxn answers EndTxn: commit or abort id's transaction. It returns once every marker is
// written and the transaction is complete (or ctx ends: the coordinator then finishes it in
// the background, and the producer's next request answers CONCURRENT_TRANSACTIONS until
// then).
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool) error {
	r, err := block(ctx, func(done func(error)) { c.EndTxnAsync(id, pid, epoch, commit, done) })
	if err != nil {
		return err
	}
	return r
}

// EndTxnAsync is EndTxn calling done with its answer.
func (c *Coordinator) EndTxnAsync(id string, pid int64, epoch int16, commit bool, done func(error)) {
	c.updateAsync(id, func(cur Meta, exists bool) (Meta, bool, error) {
		return End(cur, exists, id, pid, epoch, commit, c.now())
	}, func(next Meta, _ int32, err error) {
		if err != nil || next.State != PrepareCommit && next.State != PrepareAbort {
			done(err) // (nil: a retry of a completed EndTxn)
			return
		}
		c.completeAsync(next, done)
	})
}

// completeAsync writes the markers of prepared transaction m to every partition of it,
// retrying until each is written (or its topic is gone, or the leader refuses it as fenced),
// then records CompleteCommit / CompleteAbort, and calls done. It gives up with
// NOT_COORDINATOR when this broker stops leading the transaction's partition (the next
// coordinator completes it on load) or the coordinator closes.
func (c *Coordinator) completeAsync(m Meta, done func(error)) {
	c.markerRound(m, append([]TP(nil), m.Partitions...), 20, done)
}

// markerRound sends one round of m's markers for the partitions todo, one request per leader;
// those not written are retried after backoffMs (doubling up to 1 s).
func (c *Coordinator) markerRound(m Meta, todo []TP, backoffMs int64, done func(error)) {
	c.mu.Lock()
	_, lp, err := c.partLocked(m.TransactionalID)
	epoch := int32(-1)
	if lp != nil {
		epoch = lp.epoch
	}
	c.mu.Unlock()
	if err != nil {
		done(err)
		return
	}
	byLeader := map[int32][]broker.ProducePartition{}
	var mu sync.Mutex // next and left, when leaders answer concurrently
	var next []TP
	for _, tp := range todo {
		parts, ok := c.ctrl.Partitions(tp.Topic)
		if !ok || int(tp.Partition) >= len(parts) {
			continue // deleted: Kafka drops its markers too
		}
		if l := parts[tp.Partition].Leader; l >= 0 {
			byLeader[l] = append(byLeader[l], broker.ProducePartition{Topic: tp.Topic, Partition: tp.Partition})
		} else {
			next = append(next, tp)
		}
	}
	leaders := make([]int32, 0, len(byLeader))
	for l := range byLeader {
		leaders = append(leaders, l)
	}
	sort.Slice(leaders, func(i, j int) bool { return leaders[i] < leaders[j] })
	left := len(leaders) + 1 // +1: this function's own turn, so that the last answer ends the round
	commit := m.State == PrepareCommit
	finish := func() {
		mu.Lock()
		left--
		last, again := left == 0, next
		mu.Unlock()
		if !last {
			return
		}
		if len(again) == 0 {
			c.updateAsync(m.TransactionalID, func(cur Meta, exists bool) (Meta, bool, error) {
				if !exists || cur.State != m.State || cur.ProducerID != m.ProducerID || cur.ProducerEpoch != m.ProducerEpoch {
					return cur, false, nil // completed by someone else meanwhile
				}
				return Complete(cur, c.now()), true, nil
			}, func(_ Meta, _ int32, err error) {
				if err == nil || errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorLoadInProgress) {
					done(err) // (the next coordinator of the partition completes it on load)
					return
				}
				// Not written (short of replicas, timed out): the markers are, so the
				// transaction is decided; its completion is written again, or nothing would
				// (EndTxn retries answer CONCURRENT_TRANSACTIONS meanwhile).
				c.logf("transactional id %q: recording %s: %v (retrying)", m.TransactionalID, Complete(m, 0).State, err)
				c.after(backoffMs, func(closed bool) {
					if closed {
						done(fmt.Errorf("transactional id %q: coordinator closing: %w", m.TransactionalID, kerr.NotCoordinator))
						return
					}
					c.markerRound(m, nil, min(2*backoffMs, 1000), done)
				})
			})
			return
		}
		c.after(backoffMs, func(closed bool) {
			if closed {
				done(fmt.Errorf("transactional id %q: coordinator closing: %w", m.TransactionalID, kerr.NotCoordinator))
				return
			}
			c.markerRound(m, again, min(2*backoffMs, 1000), done)
		})
	}
	for _, l := range leaders {
		mk := &broker.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: epoch, Commit: commit, Partitions: byLeader[l]}
		c.sendMarkers(l, mk, func(err error) {
			mu.Lock()
			for _, p := range mk.Partitions {
				switch {
				case err != nil:
					next = append(next, TP{p.Topic, p.Partition})
				case p.Err == nil, kerr.ErrorForCode(errCode(p.Err)) == kerr.UnknownTopicOrPartition && !c.exists(p.Topic),
					errIs(p.Err, kerr.InvalidProducerEpoch), errIs(p.Err, kerr.TransactionCoordinatorFenced):
					// written, or refused for good (Kafka's TransactionMarkerRequestCompletionHandler)
				default:
					next = append(next, TP{p.Topic, p.Partition})
				}
			}
			mu.Unlock()
			if err != nil {
				c.logf("transactional id %q: markers through broker %d: %v (retrying)", m.TransactionalID, l, err)
			}
			finish()
		})
	}
	finish()
}

func (c *Coordinator) exists(topic string) bool {
	_, ok := c.ctrl.Partitions(topic)
	return ok
}

// expireLoop aborts, every transaction.abort.timed.out.transaction.cleanup.interval.ms, the
// transactions open longer than their transaction.timeout.ms, and expires, every
// transaction.remove.expired.transaction.cleanup.interval.ms, the idle transactional ids.
func (c *Coordinator) expireLoop() {
	t := time.NewTicker(time.Duration(c.cfg.AbortCheckIntervalMs) * time.Millisecond)
	defer t.Stop()
	r := time.NewTicker(time.Duration(c.cfg.RemoveExpiredIntervalMs) * time.Millisecond)
	defer r.Stop()
	for {
		select {
		case <-t.C:
			c.AbortExpired()
		case <-r.C:
			c.ExpireIDs()
		case <-c.ctx.Done():
			return
		}
	}
}

// ExpireIDs expires the transactional ids idle past transactional.id.expiration.ms now
// (IDExpired; none with a request in flight): a tombstone for each is written to
// __transaction_state with acks=all, then the id is forgotten. It returns the ids it found;
// the tombstones are written in the background (Config.Manual: Poll ends their waits).
func (c *Coordinator) ExpireIDs() []string {
	now := c.now()
	var ids []string
	c.mu.Lock()
	for _, lp := range c.mu.parts {
		if lp.loading {
			continue
		}
		for id, e := range lp.txns {
			if e.exists && !e.pending && IDExpired(e.meta, now, c.cfg.IDExpirationMs) {
				ids = append(ids, id)
			}
		}
	}
	c.mu.Unlock()
	sort.Strings(ids)
	for _, id := range ids {
		c.updateAsync(id, func(cur Meta, exists bool) (Meta, bool, error) {
			if !exists || !IDExpired(cur, c.now(), c.cfg.IDExpirationMs) {
				return cur, false, nil
			}
			dead := cur
			dead.State, dead.UpdateMs = Dead, c.now()
			return dead, true, nil
		}, func(next Meta, _ int32, err error) {
			switch {
			case err != nil:
				c.logf("transactional id %q: expiring it: %v (tried again at the next check)", id, err)
			case next.State == Dead:
				c.logf("transactional id %q (producer id %d) idle longer than transactional.id.expiration.ms %d: expired", id, next.ProducerID, c.cfg.IDExpirationMs)
			}
		})
	}
	return ids
}

// AbortExpired aborts the transactions open past their timeout now (with a bumped epoch, so
// their producer is fenced, as Kafka's abortTimedOutTransactions) and returns their ids. The
// aborts run in the background.
func (c *Coordinator) AbortExpired() []string {
	now := c.now()
	var ids []string
	c.mu.Lock()
	for _, lp := range c.mu.parts {
		if lp.loading {
			continue
		}
		for id, e := range lp.txns {
			if e.exists && !e.pending && Expired(e.meta, now) {
				ids = append(ids, id)
			}
		}
	}
	c.mu.Unlock()
	sort.Strings(ids)
	for _, id := range ids {
		c.updateAsync(id, func(cur Meta, exists bool) (Meta, bool, error) {
			if !exists || !Expired(cur, c.now()) {
				return cur, false, nil
			}
			return Fence(cur, c.now()), true, nil
		}, func(next Meta, _ int32, err error) {
			if err != nil || next.State != PrepareAbort {
				return
			}
			c.logf("transactional id %q: transaction open longer than transaction.timeout.ms %d: aborting with producer epoch %d",
				id, next.TimeoutMs, next.ProducerEpoch)
			c.completeAsync(next, func(error) {})
		})
	}
	return ids
}

// Describe returns the state of transactional ids this coordinator holds (DescribeTransactions):
// TRANSACTIONAL_ID_NOT_FOUND for an unknown one, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
// when its partition is not served here.
func (c *Coordinator) Describe(id string) (Meta, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, lp, err := c.partLocked(id)
	if err != nil {
		return Meta{}, err
	}
	e := lp.txns[id]
	if e == nil || !e.exists {
		return Meta{}, fmt.Errorf("transactional id %q: %w", id, kerr.TransactionalIDNotFound)
	}
	return e.meta, nil
}

// List returns every transactional id this coordinator holds (ListTransactions), sorted.
func (c *Coordinator) List() []Meta {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Meta
	for _, lp := range c.mu.parts {
		if lp.loading {
			continue
		}
		for _, e := range lp.txns {
			if e.exists {
				out = append(out, e.meta)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out
}

func errIs(err error, k *kerr.Error) bool { return err != nil && kerr.ErrorForCode(errCode(err)) == k }

func errCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
