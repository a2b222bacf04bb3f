package netfetch

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 43, min: 0, max: 2, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleElectLeaders(req.(*kmsg.ElectLeadersRequest))
	}})
}

// handleElectLeaders runs PREFERRED (0; v0 always) or UNCLEAN (1) elections
// (controller.ElectLeader, Kafka's rules): per partition ELECTION_NOT_NEEDED,
// PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE or
// UNKNOWN_TOPIC_OR_PARTITION. Null topics mean every partition, and then the partitions that
// need no election are left out of the response, as in Kafka. Another election type is a
// top-level INVALID_REQUEST (v1+). The response waits (up to timeout_ms, at most 10 s) until
// the alive brokers applied the elections.
func (c *conn) handleElectLeaders(req *kmsg.ElectLeadersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	ctrl := c.s.cfg.Controller
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		err := fmt.Errorf("unknown election type %d (0 PREFERRED, 1 UNCLEAN): %w", req.ElectionType, kerr.InvalidRequest)
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	unclean := req.Version >= 1 && req.ElectionType == 1
	type target struct {
		topic string
		parts []int32
	}
	var targets []target
	all := req.Topics == nil
	if all {
		for _, name := range ctrl.Topics() {
			ps, _ := ctrl.Partitions(name)
			t := target{topic: name}
			for _, st := range ps {
				t.parts = append(t.parts, st.Partition)
			}
			targets = append(targets, t)
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, target{t.Topic, t.Partitions})
		}
	}
	elected := false
	for _, t := range targets {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.topic
		for _, p := range t.parts {
			_, err := ctrl.ElectLeader(t.topic, p, unclean)
			if err == nil {
				elected = true
			} else if all && errors.Is(err, kerr.ElectionNotNeeded) {
				continue
			}
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p
			rp.ErrorCode, rp.ErrorMessage = errCode(err), errMessage(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if elected {
		c.awaitBrokers(req.TimeoutMillis)
	}
	return resp, nil
}
