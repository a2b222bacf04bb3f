package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleOffsetForLeaderEpoch answers KIP-101/279 queries (followers and
// consumers): the largest epoch <= LeaderEpoch known to the leader and its
// end offset (exclusive), or -1/-1 when undefined.
func (c *conn) handleOffsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for j := range t.Partitions {
			p := &t.Partitions[j]
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			epoch, end, err := c.s.cfg.Broker.EndOffsetForEpoch(t.Topic, p.Partition, p.CurrentLeaderEpoch, p.LeaderEpoch)
			rp.ErrorCode = errCode(err)
			if err == nil {
				rp.LeaderEpoch, rp.EndOffset = epoch, end
			} else {
				rp.LeaderEpoch, rp.EndOffset = -1, -1
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func init() {
	register(api{key: 23, min: 2, max: 4, role: roleFetchServe, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleOffsetForLeaderEpoch(req.(*kmsg.OffsetForLeaderEpochRequest))
	}})
}
