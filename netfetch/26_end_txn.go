package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	// v4 adds TRANSACTION_ABORTABLE, v5 KIP-890's epoch bump per transaction: not advertised.
	register(api{key: 26, min: 0, max: 3, handle: func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleEndTxn(req.(*kmsg.EndTxnRequest))
	}})
}

// handleEndTxn commits or aborts the producer's transaction (core/txn): it answers once the
// markers are written to every partition of the transaction.
func (c *conn) handleEndTxn(req *kmsg.EndTxnRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrEndTxnResponse()
	tc, err := c.txnCoordinator()
	if err == nil {
		err = tc.EndTxn(c.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	}
	resp.ErrorCode = txnErrCode(err, req.Version, 2)
	return resp, nil
}
