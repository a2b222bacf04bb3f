package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 65, min: 0, max: 0, handle: func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDescribeTransactions(req.(*kmsg.DescribeTransactionsRequest))
	}})
}

// handleDescribeTransactions describes the transactional ids this broker coordinates
// (kafka-transactions.sh describe): state, timeout, start, producer id and epoch, partitions.
func (c *conn) handleDescribeTransactions(req *kmsg.DescribeTransactionsRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	tc, cerr := c.txnCoordinator()
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		err := cerr
		if err == nil {
			var m txnMeta
			m, err = tc.Describe(id)
			if err == nil {
				st.State, st.TimeoutMillis, st.StartTimestamp = m.State.String(), m.TimeoutMs, m.StartMs
				st.ProducerID, st.ProducerEpoch = m.ProducerID, m.ProducerEpoch
				for i, tp := range m.Partitions {
					if i == 0 || tp.Topic != m.Partitions[i-1].Topic {
						t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
						t.Topic = tp.Topic
						st.Topics = append(st.Topics, t)
					}
					last := &st.Topics[len(st.Topics)-1]
					last.Partitions = append(last.Partitions, tp.Partition)
				}
			}
		}
		st.ErrorCode = errCode(err)
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
