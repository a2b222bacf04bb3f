package netfetch

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
)

// handleProduce appends every partition of the request in one
// broker.Produce call (acks=-1 waits for the HW) and answers per partition.
// acks=0 requests get no response (nil, nil), and close the connection if
// a partition failed.
func (c *conn) handleProduce(req *kmsg.ProduceRequest) (kmsg.Response, error) {
	costs.produce.Add(1)
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
	parts := slices.Grow(c.produceParts[:0], n) // reused: no allocation per request once grown
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
	c.produceParts = parts
	if req.Acks == 0 {
		// No response to carry an error: like Kafka, the broker closes the connection
		// so that the client notices (and refreshes its metadata).
		for i := range parts {
			if err := parts[i].Err; err != nil {
				return nil, closef("acks=0 produce to %s-%d failed: %v", parts[i].Topic, parts[i].Partition, err)
			}
		}
		return nil, nil
	}
	// The response is reused like the request: its Topics and their
	// Partitions keep their capacity (the response is dead once written).
	resp := c.produceResp
	if resp == nil {
		resp = kmsg.NewPtrProduceResponse()
		c.produceResp = resp
	}
	topics := resp.Topics[:0]
	*resp = kmsg.ProduceResponse{}
	k := 0
	for i := range req.Topics {
		t := &req.Topics[i]
		n := len(topics)
		if n < cap(topics) {
			topics = topics[:n+1]
			keep := topics[n].Partitions[:0]
			topics[n] = kmsg.NewProduceResponseTopic()
			topics[n].Partitions = keep
		} else {
			topics = append(topics, kmsg.NewProduceResponseTopic())
		}
		rt := &topics[n]
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
	}
	resp.Topics = topics
	return resp, nil
}
