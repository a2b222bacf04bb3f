package netfetch

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
)

// handleProduce appends every partition of the request in one
// broker.Produce call (acks=-1 waits for the HW) and answers per partition.
// acks=0 requests get no response (nil, nil).
func (c *conn) handleProduce(req *kmsg.ProduceRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrProduceResponse()
	var reqErr error
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = fmt.Errorf("acks=%d (allowed: -1, 0, 1): %w", req.Acks, kerr.InvalidRequiredAcks)
	case req.TransactionID != nil:
		reqErr = fmt.Errorf("transactional produce (transactional.id %q) is not supported: %w", *req.TransactionID, kerr.TransactionalIDAuthorizationFailed)
	}
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	parts := make([]broker.ProducePartition, 0, n)
	if reqErr == nil {
		for i := range req.Topics {
			t := &req.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				parts = append(parts, broker.ProducePartition{Topic: t.Topic, Partition: p.Partition, Records: p.Records})
			}
		}
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 30 * time.Second // request.timeout.ms default, for a client sending 0
		}
		c.s.cfg.Broker.Produce(c.ctx, req.Acks, timeout, parts)
	}
	if req.Acks == 0 {
		return nil, nil
	}
	k := 0
	for i := range req.Topics {
		t := &req.Topics[i]
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for j := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = t.Partitions[j].Partition
			err := reqErr
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			if reqErr == nil {
				pp := &parts[k]
				k++
				err = pp.Err
				if err == nil {
					rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = pp.BaseOffset, pp.LogAppendTimeMs, pp.LogStartOffset
				}
			}
			rp.ErrorCode = errCode(err)
			if req.Version >= 8 {
				rp.ErrorMessage = errMessage(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
