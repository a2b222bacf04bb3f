package netfetch

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/txn"
)

func init() {
	// v0-v3 are the clients' versions (franz-go pins its own requests to v3, librdkafka,
	// sarama, kafkajs and the Java client send v3 or below). v4 is KIP-890's batched form:
	// several transactions per request, each either added or, with VerifyOnly, verified
	// (the broker-to-broker side; Kafka serves it to any caller its authorizer lets through,
	// and isrbench has no authorizer). v5 (KIP-890 part 2's TRANSACTION_ABORTABLE) is not
	// served.
	register(api{key: 24, min: 0, max: 4, handle: func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error) {
		if req.GetVersion() >= 4 {
			return c.handleAddPartitionsToTxnBatched(req.(*kmsg.AddPartitionsToTxnRequest))
		}
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

// handleAddPartitionsToTxnBatched answers v4+: per transaction, a VerifyOnly one is verified
// (txn.Coordinator.VerifyPartitions: each partition nil when the ongoing transaction holds
// it, else INVALID_TXN_STATE; a whole-transaction error such as PRODUCER_FENCED or
// CONCURRENT_TRANSACTIONS on every partition), any other is added as a v3 request is.
// Kafka's top-level error stays 0: it is only for an unauthorized request.
func (c *conn) handleAddPartitionsToTxnBatched(req *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	tc, cerr := c.txnCoordinator()
	for _, t := range req.Transactions {
		var tps []txn.TP
		for _, rt := range t.Topics {
			for _, p := range rt.Partitions {
				tps = append(tps, txn.TP{Topic: rt.Topic, Partition: p})
			}
		}
		per, err := map[txn.TP]error(nil), cerr
		if err == nil {
			if t.VerifyOnly {
				per, err = tc.VerifyPartitions(t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps)
			} else {
				per, err = tc.AddPartitions(c.ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps)
			}
		}
		code := errCode(err)
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = t.TransactionalID
		for _, rt := range t.Topics {
			out := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			out.Topic = rt.Topic
			for _, p := range rt.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				if err == nil && len(per) > 0 {
					e, listed := per[txn.TP{Topic: rt.Topic, Partition: p}]
					switch {
					case e != nil:
						rp.ErrorCode = errCode(e)
					case !listed && !t.VerifyOnly:
						rp.ErrorCode = kerr.OperationNotAttempted.Code // an add that failed elsewhere
					}
				}
				out.Partitions = append(out.Partitions, rp)
			}
			rtx.Topics = append(rtx.Topics, out)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp, nil
}
