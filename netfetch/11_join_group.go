package netfetch

import (
	"bytes"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/group"
)

func init() {
	register(api{key: 11, min: 0, max: 9, handle: func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleJoinGroup(h, req.(*kmsg.JoinGroupRequest))
	}})
}

// handleJoinGroup answers JoinGroup. The request waits (the connection goroutine parks, as
// Kafka handles one request per connection at a time) until the rebalance completes; the
// coordinator holds no lock meanwhile, and a closing connection or server releases it.
// From v4 a new member first gets MEMBER_ID_REQUIRED with its member id.
func (c *conn) handleJoinGroup(h reqHeader, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	// Everything handed to the coordinator is copied: the header's client id and kmsg's byte
	// fields alias the connection's request buffer, which the next request overwrites.
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	coord, err := c.coordinator()
	if err != nil {
		resp.ErrorCode, resp.Generation, resp.MemberID = errCode(err), -1, req.MemberID
		return resp, nil
	}
	jr := group.JoinRequest{
		Group: req.Group, MemberID: req.MemberID, InstanceID: strOrEmpty(req.InstanceID),
		ClientID: strings.Clone(h.clientID), ClientHost: c.clientHost(), ProtocolType: req.ProtocolType,
		SessionTimeoutMs: req.SessionTimeoutMillis, RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		RequireKnownMemberID: req.Version >= 4, SupportsSkipAssignment: req.Version >= 9,
	}
	if req.Version == 0 {
		jr.RebalanceTimeoutMs = req.SessionTimeoutMillis // v0 has no rebalance timeout
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	t0 := time.Now()
	res, err := coord.Join(c.ctx, jr)
	c.waited = time.Since(t0) // the rebalance wait: remote time, as in Kafka's group purgatory
	if err != nil {
		return nil, err // the connection is going away
	}
	resp.ErrorCode = errCode(res.Err)
	resp.MemberID = res.MemberID
	if res.Err != nil {
		resp.Generation = -1
		if resp.MemberID == "" {
			resp.MemberID = req.MemberID
		}
		if req.Version < 7 {
			resp.Protocol = strPtr("")
		}
		return resp, nil
	}
	resp.Generation, resp.LeaderID, resp.SkipAssignment = res.Generation, res.Leader, res.SkipAssignment
	resp.ProtocolType, resp.Protocol = strPtr(res.ProtocolType), strPtr(res.Protocol)
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, nullIfEmpty(m.InstanceID), m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
