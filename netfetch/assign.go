package netfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

// createAssigned creates (or with validateOnly checks) a topic of CreateTopics with a manual
// replica assignment (controller.CreateTopicAssigned) and returns its partition count and
// replication factor, and the new partitions' states (none with validateOnly) for the answer
// to wait on their leaders. As in KRaft, num_partitions and replication_factor must then be -1
// (INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR otherwise).
func (c *conn) createAssigned(t *kmsg.CreateTopicsRequestTopic, configs map[string]string, validateOnly bool) (np int32, rf int16, parts []controller.PartitionState, err error) {
	if t.ReplicationFactor != -1 {
		return -1, -1, nil, fmt.Errorf("topic %q: a manual partition assignment was specified, but replication factor was not set to -1: %w", t.Topic, kerr.InvalidReplicationFactor)
	}
	if t.NumPartitions != -1 {
		return -1, -1, nil, fmt.Errorf("topic %q: a manual partition assignment was specified, but numPartitions was not set to -1: %w", t.Topic, kerr.InvalidPartitions)
	}
	as := make([]controller.ReplicaAssignment, len(t.ReplicaAssignment))
	for i, a := range t.ReplicaAssignment {
		as[i] = controller.ReplicaAssignment{Partition: a.Partition, Replicas: a.Replicas}
	}
	parts, err = c.s.cfg.Controller.CreateTopicAssigned(t.Topic, as, configs, validateOnly)
	if err != nil {
		return -1, -1, nil, err
	}
	if validateOnly {
		parts = nil
	}
	return int32(len(as)), int16(len(as[0].Replicas)), parts, nil
}
