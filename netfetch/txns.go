package netfetch

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

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
