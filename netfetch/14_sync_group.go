package netfetch

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/group"
)

func init() {
	register(api{key: 14, min: 0, max: 5, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleSyncGroup(req.(*kmsg.SyncGroupRequest))
	}})
}

// handleSyncGroup answers SyncGroup: the leader's request carries the assignment it
// computed (any protocol: the coordinator relays the bytes); every member's request waits
// until the leader's assignment is stored in __consumer_offsets with acks=all.
func (c *conn) handleSyncGroup(req *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	coord, err := c.coordinator()
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	sr := group.SyncRequest{
		Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: strOrEmpty(req.InstanceID),
		ProtocolType: strOrEmpty(req.ProtocolType), Protocol: strOrEmpty(req.Protocol),
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = bytes.Clone(a.MemberAssignment) // aliases the request buffer
		}
	}
	t0 := time.Now()
	res, err := coord.Sync(c.ctx, sr)
	c.waited = time.Since(t0) // the rebalance wait: remote time, as in Kafka's group purgatory
	if err != nil {
		return nil, err
	}
	resp.ErrorCode = errCode(res.Err)
	if res.Err == nil {
		resp.ProtocolType, resp.Protocol = strPtr(res.ProtocolType), strPtr(res.Protocol)
		resp.MemberAssignment = res.Assignment
	}
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp, nil
}
