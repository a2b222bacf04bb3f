package netfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 37, min: 0, max: 3, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleCreatePartitions(req.(*kmsg.CreatePartitionsRequest))
	}})
}

// handleCreatePartitions raises topics' partition counts (controller.CreatePartitions:
// increases only; the new partitions placed as CreateTopics places them, or by the manual
// assignment), with Kafka's errors (INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT,
// INVALID_REPLICATION_FACTOR, UNKNOWN_TOPIC_OR_PARTITION; INVALID_REQUEST for a topic named
// twice). validate_only creates nothing. The response waits (up to timeout_ms, at most
// 10 s) until the alive brokers serve the new partitions.
func (c *conn) handleCreatePartitions(req *kmsg.CreatePartitionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	created := false
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var err error
		if count[t.Topic] > 1 {
			err = fmt.Errorf("duplicate topic name %q: %w", t.Topic, kerr.InvalidRequest)
		} else {
			var assignment [][]int32
			if t.Assignment != nil {
				assignment = make([][]int32, len(t.Assignment))
				for j, a := range t.Assignment {
					assignment[j] = append([]int32{}, a.Replicas...)
				}
			}
			if _, err = c.s.cfg.Controller.CreatePartitions(t.Topic, t.Count, assignment, req.ValidateOnly); err == nil && !req.ValidateOnly {
				created = true
			}
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	if created {
		c.awaitBrokers(req.TimeoutMillis)
	}
	return resp, nil
}
