package netfetch

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/core/txn"
)

// txnCoordinator returns the server's transaction coordinator, or NOT_COORDINATOR when the
// server has none (no broker).
func (c *conn) txnCoordinator() (*txn.Coordinator, error) {
	if c.s.txns == nil {
		return nil, kerr.NotCoordinator
	}
	return c.s.txns, nil
}

// txnErrCode is errCode with PRODUCER_FENCED answered INVALID_PRODUCER_EPOCH to request
// versions below fencedSince, which predate it (Kafka's KafkaApis does the same).
func txnErrCode(err error, version, fencedSince int16) int16 {
	if err == nil {
		return 0
	}
	if version < fencedSince && errors.Is(err, kerr.ProducerFenced) {
		return kerr.InvalidProducerEpoch.Code
	}
	return errCode(err)
}

// WriteTxnMarkers writes m's markers to the partitions this broker leads
// (broker.AppendTxnMarkers), waits for acks=all (or ctx), then tells the group coordinator
// the outcome for the __consumer_offsets partitions that took their marker, so that the
// transaction's offsets become visible (commit) or are dropped (abort). Safe for concurrent
// use.
func (s *Server) WriteTxnMarkers(ctx context.Context, ms []broker.TxnMarker) {
	b := s.cfg.Broker
	if b == nil {
		for i := range ms {
			for j := range ms[i].Partitions {
				ms[i].Partitions[j].Err = kerr.NotLeaderForPartition
			}
		}
		return
	}
	for _, w := range b.AppendTxnMarkers(ms) { // under the verification guard (core/broker txnverify.go)
		w.Wait(ctx)
	}
	if s.groups == nil {
		return
	}
	for _, m := range ms {
		var ps []int32
		for _, p := range m.Partitions {
			if p.Topic == group.OffsetsTopic && p.Err == nil {
				ps = append(ps, p.Partition)
			}
		}
		if len(ps) > 0 {
			s.groups.CompleteTxn(m.ProducerID, m.Commit, ps)
		}
	}
}

// localMarkers is the MarkerWriter of a server-built transaction coordinator: this broker's
// own partitions only.
func (s *Server) localMarkers(ctx context.Context, leader int32, m *broker.TxnMarker) error {
	if leader != s.cfg.BrokerID {
		return fmt.Errorf("broker %d cannot reach broker %d for transaction markers: %w", s.cfg.BrokerID, leader, kerr.NotLeaderForPartition)
	}
	ms := []broker.TxnMarker{*m}
	s.WriteTxnMarkers(ctx, ms)
	return nil
}
