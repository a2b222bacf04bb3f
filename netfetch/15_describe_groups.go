package netfetch

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 15, min: 0, max: 5, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDescribeGroups(req.(*kmsg.DescribeGroupsRequest))
	}})
}

// handleDescribeGroups describes groups this broker coordinates: state (Kafka's names),
// protocol type, and members; the protocol and the members' metadata and assignments only
// when Stable, as Kafka. An unknown group is Dead with no error.
func (c *conn) handleDescribeGroups(req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	coord, cerr := c.coordinator()
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		rg.AuthorizedOperations = math.MinInt32 // not requested / not computed
		if cerr != nil {
			rg.ErrorCode = errCode(cerr)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d, err := coord.Describe(id)
		if err != nil {
			rg.ErrorCode = errCode(err)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.State, rg.ProtocolType, rg.Protocol = d.State.String(), d.ProtocolType, d.Protocol
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, nullIfEmpty(m.InstanceID), m.ClientID, m.ClientHost
			rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
			if rm.ProtocolMetadata == nil {
				rm.ProtocolMetadata = []byte{}
			}
			if rm.MemberAssignment == nil {
				rm.MemberAssignment = []byte{}
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
