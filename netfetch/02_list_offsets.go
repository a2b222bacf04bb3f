package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleListOffsets answers ListOffsets (Broker.ListOffsetFor): timestamp -2 = earliest
// (log start, inclusive), -1 = latest (the HW for consumers, replica_id -1: exclusive end of
// what they may read; the LEO for a replica, replica_id >= 0, and for the debugging id -2,
// which a follower answers too), a timestamp >= 0 the first offset below that end with a
// record at or after it (-1 if none). current_leader_epoch (v4+) is fenced as in Fetch. The
// leader epoch (v4+) comes from the same replica as the offset.
func (c *conn) handleListOffsets(req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrListOffsetsResponse()
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for j := range t.Partitions {
			p := &t.Partitions[j]
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Timestamp = -1
			cle := p.CurrentLeaderEpoch
			if req.Version < 4 {
				cle = -1
			}
			off, epoch, err := c.s.cfg.Broker.ListOffsetFor(req.ReplicaID, cle, t.Topic, p.Partition, p.Timestamp, req.IsolationLevel)
			rp.ErrorCode = errCode(err)
			rp.Offset, rp.LeaderEpoch = off, epoch // -1, -1 on an error
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func init() {
	register(api{key: 2, min: 1, max: 7, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleListOffsets(req.(*kmsg.ListOffsetsRequest))
	}})
}
