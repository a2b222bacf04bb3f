package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register(api{key: 46, min: 0, max: 0, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleListPartitionReassignments(req.(*kmsg.ListPartitionReassignmentsRequest))
	}})
}

// handleListPartitionReassignments lists the reassignments in progress
// (controller.ListPartitionReassignments): of every topic when topics is null, else of the
// partitions named; unknown ones and those not being reassigned are left out, as Kafka does.
// Each gives its replicas (target followed by the removing ones), adding and removing
// replicas.
func (c *conn) handleListPartitionReassignments(req *kmsg.ListPartitionReassignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	var tps []controller.TopicPartition
	if req.Topics != nil {
		tps = []controller.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, controller.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	for _, o := range c.s.cfg.Controller.ListPartitionReassignments(tps) {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != o.Topic {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = o.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition = o.Partition
		rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = o.Replicas, o.AddingReplicas, o.RemovingReplicas
		if rp.AddingReplicas == nil {
			rp.AddingReplicas = []int32{}
		}
		if rp.RemovingReplicas == nil {
			rp.RemovingReplicas = []int32{}
		}
		resp.Topics[len(resp.Topics)-1].Partitions = append(resp.Topics[len(resp.Topics)-1].Partitions, rp)
	}
	return resp, nil
}
