package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register(api{key: 45, min: 0, max: 1, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleAlterPartitionReassignments(req.(*kmsg.AlterPartitionAssignmentsRequest))
	}})
}

// handleAlterPartitionReassignments starts, changes or cancels (null replicas) partition
// reassignments (KIP-455; controller.AlterPartitionReassignments, Kafka's rules), all of the
// request as one metadata change. Per partition: UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_REPLICA_ASSIGNMENT (empty target, a broker twice or not registered, a cancellation
// that would need an unclean election), NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICATION_FACTOR
// (v1 with allow_replication_factor_change false, KIP-860), POLICY_VIOLATION (more replicas
// than the brokers can host), KAFKA_STORAGE_ERROR (the metadata log cannot be written), each
// with its message. The answer comes once the change is durable, as Kafka's, not once the
// reassignment completed: ListPartitionReassignments shows those still in progress.
func (c *conn) handleAlterPartitionReassignments(req *kmsg.AlterPartitionAssignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	var reqs []controller.Reassignment
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			reqs = append(reqs, controller.Reassignment{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas})
		}
	}
	errs := c.s.cfg.Controller.AlterPartitionReassignments(reqs, allowRF)
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = errCode(errs[i]), errMessage(errs[i])
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
