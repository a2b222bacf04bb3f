package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 22, min: 0, max: 4, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleInitProducerID(req.(*kmsg.InitProducerIDRequest))
	}})
}

// handleInitProducerID hands out increasing producer ids with epoch 0 so
// that idempotent producers (kgo's default) can produce; the partitions check
// their sequence numbers (core/partition producer state). Ids start at the
// wall clock in µs (newCounters), so they stay unique across restarts.
// With a transactional id the transaction coordinator answers (core/txn: the id's producer
// id and next epoch, fencing older producers of the id; PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH below v4).
func (c *conn) handleInitProducerID(req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrInitProducerIDResponse()
	if req.TransactionalID != nil {
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		tc, err := c.txnCoordinator()
		if err == nil {
			pid, epoch := int64(-1), int16(-1)
			if req.Version >= 3 {
				pid, epoch = req.ProducerID, req.ProducerEpoch
			}
			resp.ProducerID, resp.ProducerEpoch, err = tc.InitProducerID(c.ctx, *req.TransactionalID, req.TransactionTimeoutMillis, pid, epoch)
		}
		if err != nil {
			resp.ProducerID, resp.ProducerEpoch = -1, -1
			resp.ErrorCode = txnErrCode(err, req.Version, 4)
		}
		return resp, nil
	}
	resp.ProducerID = c.s.stats.producerID.Add(1)
	resp.ProducerEpoch = 0
	return resp, nil
}
