package netfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/group"
)

func init() {
	register(api{key: 47, min: 0, max: 0, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleOffsetDelete(req.(*kmsg.OffsetDeleteRequest))
	}})
}

// handleOffsetDelete answers OffsetDelete (KIP-496, kafka-consumer-groups.sh --delete-offsets)
// as Kafka's KafkaApis and GroupCoordinator.handleDeleteOffsets: a partition the cluster does
// not have is UNKNOWN_TOPIC_OR_PARTITION; the others go to the group coordinator
// (group.Coordinator.DeleteOffsets): an Empty group loses the offsets, a consumer group with
// members loses those of topics no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC for the
// rest). A group error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID,
// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP for another protocol type's non-empty group) answers
// the request alone, without partitions.
func (c *conn) handleOffsetDelete(req *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	coord, err := c.coordinator()
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	errs := map[group.TP]error{}
	var tps []group.TP
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := group.TP{Topic: t.Topic, Partition: p.Partition}
			if _, ok := c.s.cfg.Controller.Partition(t.Topic, p.Partition); !ok {
				errs[tp] = fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, kerr.UnknownTopicOrPartition)
				continue
			}
			tps = append(tps, tp)
		}
	}
	per, err := coord.DeleteOffsets(c.ctx, req.Group, tps)
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	for tp, e := range per {
		errs[tp] = e
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = errCode(errs[group.TP{Topic: t.Topic, Partition: p.Partition}])
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
