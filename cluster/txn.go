package cluster

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/txn"
)

// newTxnCoordinator builds and starts broker b's transaction coordinator (its server closes
// it): producer ids from the counters every broker of the cluster shares, and markers
// written through each partition's leader broker of this process (txnMarkers).
func (c *Cluster) newTxnCoordinator(b *broker.Broker) *txn.Coordinator {
	cfg := c.cfg.Txn
	cfg.ProducerIDs = c.stats.NextProducerID
	cfg.Markers = c.txnMarkers
	if cfg.OffsetsTopicNumPartitions <= 0 {
		cfg.OffsetsTopicNumPartitions = c.cfg.Group.OffsetsTopicNumPartitions
	}
	if cfg.IDExpirationMs <= 0 {
		cfg.IDExpirationMs = c.cfg.Settings.Int("transactional.id.expiration.ms")
	}
	if cfg.RemoveExpiredIntervalMs <= 0 {
		cfg.RemoveExpiredIntervalMs = c.cfg.Settings.Int("transaction.remove.expired.transaction.cleanup.interval.ms")
	}
	if cfg.Logf == nil {
		cfg.Logf = c.logf
	}
	tc := txn.NewCoordinator(cfg, b, c.ctrl, nil)
	tc.Start()
	return tc
}

// txnMarkers is the coordinators' MarkerWriter: the leader's server writes the markers
// (Server.WriteTxnMarkers, WriteTxnMarkers in process: every broker of the cluster runs here).
func (c *Cluster) txnMarkers(ctx context.Context, leader int32, m *broker.TxnMarker) error {
	n := c.nodes[leader]
	if n == nil || n.state.Load() != nodeRunning {
		return fmt.Errorf("broker %d is not running: %w", leader, kerr.NotLeaderForPartition)
	}
	srv := n.srv.Load()
	if srv == nil {
		return fmt.Errorf("broker %d is not running: %w", leader, kerr.NotLeaderForPartition)
	}
	srv.WriteTxnMarkers(ctx, []broker.TxnMarker{*m})
	return nil
}

// verifyTxn is the brokers' netfetch.TxnVerifier (KIP-890): the question goes to the
// coordinator of the transactional id, the server of the leader of its __transaction_state
// partition (in process: every broker of the cluster runs here).
func (c *Cluster) verifyTxn(id string, pid int64, epoch int16, tps []txn.TP) (map[txn.TP]error, error) {
	leader, err := txn.Locate(c.ctrl, c.cfg.Txn, id)
	if err != nil {
		return nil, err
	}
	n := c.nodes[leader]
	if n == nil || n.state.Load() != nodeRunning {
		return nil, fmt.Errorf("the coordinator of %q, broker %d, is not running: %w", id, leader, kerr.NotCoordinator)
	}
	srv := n.srv.Load()
	if srv == nil {
		return nil, fmt.Errorf("the coordinator of %q, broker %d, is not running: %w", id, leader, kerr.NotCoordinator)
	}
	return srv.VerifyTxnPartitions(id, pid, epoch, tps)
}
