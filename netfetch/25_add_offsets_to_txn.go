package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 25, min: 0, max: 3, handle: func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleAddOffsetsToTxn(req.(*kmsg.AddOffsetsToTxnRequest))
	}})
}

// handleAddOffsetsToTxn adds the group's __consumer_offsets partition to the producer's
// transaction (core/txn).
func (c *conn) handleAddOffsetsToTxn(req *kmsg.AddOffsetsToTxnRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	tc, err := c.txnCoordinator()
	if err == nil {
		err = tc.AddOffsets(c.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
	}
	resp.ErrorCode = txnErrCode(err, req.Version, 2)
	return resp, nil
}
