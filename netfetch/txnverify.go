package netfetch

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
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

// checkTxnVerified is the leader's half of KIP-890 part 1 (core/broker's txnverify.go says
// what and why): a batch that needs its transaction coordinator's confirmation
// (broker.TxnVerificationNeeded) is verified here, through s.verifyTxn, and on success
// listed in c.txnVerified for produceVerified. i is the partition's index in the request.
func (c *conn) checkTxnVerified(txnID *string, i int, topic string, partition int32, recs []byte) error {
	if c.s.cfg.Broker == nil {
		return nil
	}
	b := c.s.cfg.Broker
	h, need := b.TxnVerificationNeeded(topic, partition, recs)
	if !need {
		return nil
	}
	if txnID == nil || *txnID == "" {
		return fmt.Errorf("%s-%d: a transactional batch of producer id %d without a transactional id cannot be verified: %w",
			topic, partition, h.ProducerID, kerr.TransactionalIDAuthorizationFailed)
	}
	tp := txn.TP{Topic: topic, Partition: partition}
	start := b.BeginTxnVerification()
	per, err := c.s.verifyTxn(*txnID, h.ProducerID, h.ProducerEpoch, []txn.TP{tp})
	err = txn.VerifiedOne(per, err, tp)
	if h := c.s.onTxnVerified.Load(); err == nil && h != nil {
		(*h)(tp)
	}
	if err == nil {
		c.txnVerified = append(c.txnVerified, broker.TxnVerified{Index: i, Topic: topic, Partition: partition,
			ProducerID: h.ProducerID, Start: start, ID: *txnID})
	} else {
		b.EndTxnVerification(start)
	}
	return broker.TxnVerifyErrForProduce(*txnID, topic, partition, err)
}

// produceVerified is broker.Produce for a request with verified partitions (c.txnVerified):
// broker.ProduceVerified appends them under the verification guard, refusing those a
// marker reached since their verification; then acks=all waits up to timeout. It returns
// the partitions appended (parts without the refused ones, in order) and how long it
// waited. The ProduceDelay / ProduceSpin ablations do not apply to it.
func (c *conn) produceVerified(acks int16, timeout time.Duration, parts []broker.ProducePartition, pre []error) ([]broker.ProducePartition, time.Duration) {
	parts, w := c.s.cfg.Broker.ProduceVerified(acks, parts, c.txnVerified, pre)
	if w == nil {
		return parts, 0
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	w.Wait(ctx)
	return parts, time.Since(t0)
}
