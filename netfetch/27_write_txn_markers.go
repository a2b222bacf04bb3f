package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
)

func init() {
	register(api{key: 27, min: 0, max: 1, handle: func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleWriteTxnMarkers(req.(*kmsg.WriteTxnMarkersRequest))
	}})
}

// handleWriteTxnMarkers writes transaction markers to the partitions this broker leads
// (broker.AppendTxnMarkers, acks=all) and answers once each is acknowledged or failed: the
// coordinator-to-leader call of Kafka's transactions. The embedded cluster's coordinators
// call the leaders in process through the same broker method.
func (c *conn) handleWriteTxnMarkers(req *kmsg.WriteTxnMarkersRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	markers := make([]broker.TxnMarker, len(req.Markers))
	for i, m := range req.Markers {
		mk := broker.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Committed}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				mk.Partitions = append(mk.Partitions, broker.ProducePartition{Topic: t.Topic, Partition: p})
			}
		}
		markers[i] = mk
	}
	c.s.WriteTxnMarkers(c.ctx, markers)
	for i, m := range markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		k := 0
		for _, t := range req.Markers[i].Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				rp.ErrorCode = errCode(m.Partitions[k].Err)
				k++
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}
