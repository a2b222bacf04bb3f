package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/group"
)

func init() {
	register(api{key: 13, min: 0, max: 5, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleLeaveGroup(req.(*kmsg.LeaveGroupRequest))
	}})
}

// handleLeaveGroup removes members from a group at once (the group rebalances without
// waiting for their session timeout). v3+ names several members, also by
// group.instance.id alone.
func (c *conn) handleLeaveGroup(req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	coord, err := c.coordinator()
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	var members []group.LeaveMember
	if req.Version < 3 {
		members = []group.LeaveMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			members = append(members, group.LeaveMember{MemberID: m.MemberID, InstanceID: strOrEmpty(m.InstanceID)})
		}
	}
	top, per := coord.Leave(req.Group, members)
	if top != nil {
		resp.ErrorCode = errCode(top)
		return resp, nil
	}
	if req.Version < 3 {
		resp.ErrorCode = errCode(per[0])
		return resp, nil
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, errCode(per[i])
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
