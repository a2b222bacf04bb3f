package netfetch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 21, min: 0, max: 2, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDeleteRecords(req.(*kmsg.DeleteRecordsRequest))
	}})
}

// maxDeleteRecordsWait bounds a DeleteRecords request's timeout_ms.
const maxDeleteRecordsWait = 60 * time.Second

// handleDeleteRecords answers DeleteRecords (KIP-107, kafka-delete-records.sh) as Kafka's
// ReplicaManager.deleteRecords: on each partition's leader the log start moves up to the
// requested offset (-1: the high watermark; broker.DeleteRecordsOnLeader), and the partition
// is answered once every replica on an alive broker has followed, with the low watermark (the
// smallest log start over them: the first offset still readable anywhere). Every partition's
// log start moves first, then the response waits for the low watermarks, all bounded by
// timeout_ms (at most 60 s): a partition not complete by then answers REQUEST_TIMED_OUT with
// the low watermark reached (the leader's deletion stays). Errors per partition, as Kafka's:
// UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have,
// NOT_LEADER_OR_FOLLOWER when this broker does not lead it, OFFSET_OUT_OF_RANGE for an offset
// above the high watermark or below -1, INVALID_TOPIC_EXCEPTION for an internal topic
// (broker.IsInternalTopic); the low watermark is -1 then.
func (c *conn) handleDeleteRecords(req *kmsg.DeleteRecordsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	wait := min(time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond, maxDeleteRecordsWait)
	ctx, cancel := context.WithTimeout(c.ctx, wait)
	defer cancel()
	requested := make([][]int64, len(req.Topics))
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		requested[i] = make([]int64, len(t.Partitions))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			var err error
			requested[i][j], err = c.deleteRecordsOnLeader(t.Topic, p.Partition, p.Offset)
			rp.ErrorCode = errCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if rp.ErrorCode != 0 {
				continue
			}
			lw, err := c.s.cfg.Broker.AwaitLowWatermark(ctx, rt.Topic, rp.Partition, requested[i][j])
			rp.ErrorCode = errCode(err)
			if err == nil || errors.Is(err, kerr.RequestTimedOut) {
				rp.LowWatermark = lw
			}
		}
	}
	return resp, nil
}

// deleteRecordsOnLeader moves one partition's log start on this broker, its leader.
func (c *conn) deleteRecordsOnLeader(topic string, p int32, offset int64) (requested int64, err error) {
	if _, ok := c.s.cfg.Controller.Partition(topic, p); !ok {
		return -1, fmt.Errorf("%s-%d: %w", topic, p, kerr.UnknownTopicOrPartition)
	}
	requested, err = c.s.cfg.Broker.DeleteRecordsOnLeader(topic, p, offset)
	if errors.Is(err, kerr.UnknownTopicOrPartition) { // the cluster has it; this broker does not host it
		err = fmt.Errorf("broker %d does not lead %s-%d: %w", c.s.cfg.BrokerID, topic, p, kerr.NotLeaderForPartition)
	}
	return requested, err
}
