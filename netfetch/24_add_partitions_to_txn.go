package netfetch

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/txn"
)

func init() {
	// v0-v3 are the clients' versions; v4+ (KIP-890's broker-to-broker verification) is not
	// advertised.
	register(api{key: 24, min: 0, max: 3, handle: func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleAddPartitionsToTxn(h, req.(*kmsg.AddPartitionsToTxnRequest))
	}})
}

// handleAddPartitionsToTxn adds partitions to the producer's transaction (core/txn). Every
// partition answers the same error, except that when some partitions do not exist those
// answer UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as Kafka.
func (c *conn) handleAddPartitionsToTxn(h reqHeader, req *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	var tps []txn.TP
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, txn.TP{Topic: t.Topic, Partition: p})
		}
	}
	var bad map[txn.TP]error
	tc, err := c.txnCoordinator()
	if err == nil {
		bad, err = tc.AddPartitions(c.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps)
	}
	code := txnErrCode(err, req.Version, 2)
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			if len(bad) > 0 {
				rp.ErrorCode = kerr.OperationNotAttempted.Code
				if e := bad[txn.TP{Topic: t.Topic, Partition: p}]; e != nil {
					rp.ErrorCode = errCode(e)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
