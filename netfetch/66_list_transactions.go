package netfetch

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/txn"
)

type txnMeta = txn.Meta

func init() {
	register(api{key: 66, min: 0, max: 1, handle: func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleListTransactions(req.(*kmsg.ListTransactionsRequest))
	}})
}

// handleListTransactions lists the transactional ids this broker coordinates, filtered by
// state names, producer ids and (v1) a minimum running time in ms.
func (c *conn) handleListTransactions(req *kmsg.ListTransactionsRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrListTransactionsResponse()
	tc, err := c.txnCoordinator()
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	now := c.s.now().UnixMilli()
	for _, m := range tc.List() {
		switch {
		case len(req.StateFilters) > 0 && !slices.Contains(req.StateFilters, m.State.String()),
			len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, m.ProducerID),
			req.DurationFilterMillis >= 0 && req.Version >= 1 && (m.StartMs < 0 || now-m.StartMs < req.DurationFilterMillis):
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = m.TransactionalID, m.ProducerID, m.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
