package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 12, min: 0, max: 4, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleHeartbeat(req.(*kmsg.HeartbeatRequest))
	}})
}

// handleHeartbeat renews a member's session; REBALANCE_IN_PROGRESS asks it to rejoin.
func (c *conn) handleHeartbeat(req *kmsg.HeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	coord, err := c.coordinator()
	if err == nil {
		err = coord.Heartbeat(req.Group, req.MemberID, strOrEmpty(req.InstanceID), req.Generation)
	}
	resp.ErrorCode = errCode(err)
	return resp, nil
}
