package txn

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
	if id == "" {
		return -1, -1, fmt.Errorf("transactional id is empty: %w", kerr.InvalidRequest)
	}
	if timeoutMs <= 0 || timeoutMs > c.cfg.MaxTimeoutMs {
		return -1, -1, fmt.Errorf("transaction.timeout.ms %d outside (0, transaction.max.timeout.ms %d]: %w", timeoutMs, c.cfg.MaxTimeoutMs, kerr.InvalidTransactionTimeout)
	}
	for attempt := 0; ; attempt++ {
		var abort bool
		next, _, err := c.update(ctx, id, func(cur Meta, exists bool) (Meta, bool, error) {
			d, err := Init(cur, exists, id, timeoutMs, reqPID, reqEpoch, c.now(), c.cfg.ProducerIDs)
			if err != nil {
				return Meta{}, false, err
			}
			if d.AbortFirst {
				abort = true
				return Fence(cur, c.now()), true, nil
			}
			return d.Next, true, nil
		})
		if err != nil {
			return -1, -1, err
		}
		if !abort {
			return next.ProducerID, next.ProducerEpoch, nil
		}
		if attempt > 0 {
			return -1, -1, concurrent(next)
		}
		// The open transaction is aborted with the bumped epoch, then the id initialised.
		if err := c.completeAndWait(ctx, next); err != nil {
			return -1, -1, err
		}
		reqPID, reqEpoch = -1, -1 // the abort bumped the epoch the request named
	}
}

// AddPartitions answers AddPartitionsToTxn: the partitions join id's transaction. A partition
// of a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION, and then nothing is added
// (the others answer OPERATION_NOT_ATTEMPTED, which the wire layer fills in).
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []TP) (map[TP]error, error) {
	return c.addPartitions(ctx, id, pid, epoch, tps, true)
}

func (c *Coordinator) addPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []TP, check bool) (map[TP]error, error) {
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
		return bad, nil
	}
	_, _, err := c.update(ctx, id, func(cur Meta, exists bool) (Meta, bool, error) {
		return AddPartitions(cur, exists, id, pid, epoch, tps, c.now())
	})
	return nil, err
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
	_, err := c.addPartitions(ctx, id, pid, epoch, []TP{{OffsetsTopic, p}}, false)
	return err
}

// EndTxn answers EndTxn: commit or abort id's transaction. It returns once every marker is
// written and the transaction is complete (or ctx ends: the coordinator then finishes it in
// the background, and the producer's next request answers CONCURRENT_TRANSACTIONS until
// then).
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool) error {
	next, _, err := c.update(ctx, id, func(cur Meta, exists bool) (Meta, bool, error) {
		return End(cur, exists, id, pid, epoch, commit, c.now())
	})
	if err != nil {
		return err
	}
	if next.State != PrepareCommit && next.State != PrepareAbort {
		return nil // a retry of a completed EndTxn
	}
	return c.completeAndWait(ctx, next)
}

// completeAndWait finishes the prepared transaction m on a goroutine of the coordinator's
// (it goes on if ctx ends first) and waits for it or ctx.
func (c *Coordinator) completeAndWait(ctx context.Context, m Meta) error {
	done := make(chan error, 1)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); done <- c.complete(c.ctx, m) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// complete writes the markers of prepared transaction m to every partition of it, retrying
// until each is written (or its topic is gone, or the leader refuses it as fenced), then
// records CompleteCommit / CompleteAbort. It gives up with NOT_COORDINATOR when this broker
// stops leading the transaction's partition (the next coordinator completes it on load).
func (c *Coordinator) complete(ctx context.Context, m Meta) error {
	commit := m.State == PrepareCommit
	todo := append([]TP(nil), m.Partitions...)
	backoff := 20 * time.Millisecond
	for len(todo) > 0 {
		c.mu.Lock()
		_, lp, err := c.partLocked(m.TransactionalID)
		epoch := int32(-1)
		if lp != nil {
			epoch = lp.epoch
		}
		c.mu.Unlock()
		if err != nil {
			return err
		}
		byLeader := map[int32][]broker.ProducePartition{}
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
		for _, l := range leaders {
			mk := &broker.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: epoch, Commit: commit, Partitions: byLeader[l]}
			wctx, cancel := context.WithTimeout(ctx, time.Duration(c.cfg.WriteTimeoutMs)*time.Millisecond)
			err := c.cfg.Markers(wctx, l, mk)
			cancel()
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
			if err != nil {
				c.logf("transactional id %q: markers through broker %d: %v (retrying)", m.TransactionalID, l, err)
			}
		}
		todo = next
		if len(todo) == 0 {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("transactional id %q: coordinator closing: %w", m.TransactionalID, kerr.NotCoordinator)
		}
		backoff = min(2*backoff, time.Second)
	}
	_, _, err := c.update(ctx, m.TransactionalID, func(cur Meta, exists bool) (Meta, bool, error) {
		if !exists || cur.State != m.State || cur.ProducerID != m.ProducerID || cur.ProducerEpoch != m.ProducerEpoch {
			return cur, false, nil // completed by someone else meanwhile
		}
		return Complete(cur, c.now()), true, nil
	})
	return err
}

func (c *Coordinator) exists(topic string) bool {
	_, ok := c.ctrl.Partitions(topic)
	return ok
}

// expireLoop aborts, every transaction.abort.timed.out.transaction.cleanup.interval.ms, the
// transactions open longer than their transaction.timeout.ms.
func (c *Coordinator) expireLoop() {
	t := time.NewTicker(time.Duration(c.cfg.AbortCheckIntervalMs) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.AbortExpired()
		case <-c.ctx.Done():
			return
		}
	}
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
		next, _, err := c.update(c.ctx, id, func(cur Meta, exists bool) (Meta, bool, error) {
			if !exists || !Expired(cur, c.now()) {
				return cur, false, nil
			}
			return Fence(cur, c.now()), true, nil
		})
		if err != nil || next.State != PrepareAbort {
			continue
		}
		c.logf("transactional id %q: transaction open longer than transaction.timeout.ms %d: aborting with producer epoch %d",
			id, next.TimeoutMs, next.ProducerEpoch)
		c.wg.Add(1)
		go func() { defer c.wg.Done(); _ = c.complete(c.ctx, next) }()
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
