package netfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register(api{key: 61, min: 0, max: 0, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDescribeProducers(req.(*kmsg.DescribeProducersRequest))
	}})
}

// handleDescribeProducers answers DescribeProducers (KIP-664, kafka-transactions.sh
// describe-producers) from the idempotent producer state of this broker's replicas, leader or
// follower (partition.Replica.ProducerStates, Kafka's UnifiedLog.activeProducers): per
// producer id its epoch, the last sequence and max timestamp of its last batch, the
// coordinator epoch of its last marker and the first offset of its open transaction (-1:
// none). Errors per partition:
// INVALID_TOPIC_EXCEPTION for a bad topic name, UNKNOWN_TOPIC_OR_PARTITION for a partition the
// cluster does not have, NOT_LEADER_OR_FOLLOWER when this broker hosts no replica of it.
func (c *conn) handleDescribeProducers(req *kmsg.DescribeProducersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	ctrl, b := c.s.cfg.Controller, c.s.cfg.Broker
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		topicErr := controller.ValidateTopicName(t.Topic)
		if _, ok := ctrl.Partitions(t.Topic); topicErr == nil && !ok {
			topicErr = fmt.Errorf("topic %s: %w", t.Topic, kerr.UnknownTopicOrPartition)
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			err := topicErr
			if err == nil {
				if _, ok := ctrl.Partition(t.Topic, p); !ok {
					err = fmt.Errorf("%s-%d: %w", t.Topic, p, kerr.UnknownTopicOrPartition)
				}
			}
			if err == nil {
				if r, ok := b.Replica(t.Topic, p); !ok {
					err = fmt.Errorf("broker %d hosts no replica of %s-%d: %w", c.s.cfg.BrokerID, t.Topic, p, kerr.NotLeaderForPartition)
				} else {
					for _, info := range r.ProducerStates() {
						ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
						ap.ProducerID, ap.ProducerEpoch, ap.CoordinatorEpoch = info.ProducerID, int32(info.ProducerEpoch), info.CoordinatorEpoch
						ap.CurrentTxnStartOffset = info.TxnStartOffset
						if n := len(info.Batches); n > 0 {
							last := info.Batches[n-1]
							ap.LastSequence, ap.LastTimestamp = last.LastSequence, last.MaxTimestamp
						}
						rp.ActiveProducers = append(rp.ActiveProducers, ap)
					}
				}
			}
			rp.ErrorCode, rp.ErrorMessage = errCode(err), errMessage(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
