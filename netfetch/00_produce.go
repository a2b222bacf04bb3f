package netfetch

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/records"
)

func init() {
	register(api{key: 0, min: 0, max: 9, role: roleProduce, newReq: (*conn).produceRequest,
		handle: func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error) {
			return c.handleProduce(h, req.(*kmsg.ProduceRequest))
		}})
}

// produceRequest returns the connection's reused Produce request, reset: kmsg's ReadFrom
// refills its slices within their capacity. It (and the bytes it aliases in the request
// buffer) is dead once its response is written.
func (c *conn) produceRequest() kmsg.Request {
	if c.produceReq == nil {
		c.produceReq = kmsg.NewPtrProduceRequest()
	}
	topics := c.produceReq.Topics[:0]
	*c.produceReq = kmsg.ProduceRequest{Topics: topics}
	return c.produceReq
}

// handleProduce appends every partition of the request in one
// broker.Produce call (acks=-1 waits for the HW) and answers per partition. An acks=0/1
// produce wakes the followers' parked fetches only after its response is written
// (Broker.ProduceWakeLater) with isrbench.produce.wake.after.response=true (default false).
// acks=0 requests get no response (nil, nil), and close the connection if
// a partition failed. An acks=-1 request answered by the goroutine that completed it
// (produceInline) returns nil, nil too: its response is written.
func (c *conn) handleProduce(h reqHeader, req *kmsg.ProduceRequest) (kmsg.Response, error) {
	c.s.stats.cost.produce.Add(1)
	c.kind = kindProduce
	var reqErr error
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = fmt.Errorf("acks=%d (allowed: -1, 0, 1): %w", req.Acks, kerr.InvalidRequiredAcks)
	}
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	parts := slices.Grow(c.produceParts[:0], n) // reused: no allocation per request once grown
	// pre[i] is the error of the i-th partition of the request found before the append
	// (format, KIP-890 verification); those partitions are not in parts.
	pre := slices.Grow(c.producePre[:0], n)[:n]
	clear(pre)
	c.txnVerified = c.txnVerified[:0]
	if reqErr == nil {
		i := 0
		for ti := range req.Topics {
			t := &req.Topics[ti]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				if pre[i] = c.checkProduce(req, i, t.Topic, p.Partition, p.Records); pre[i] == nil {
					parts = append(parts, broker.ProducePartition{Topic: t.Topic, Partition: p.Partition, Records: p.Records})
				}
				i++
			}
		}
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 30 * time.Second // request.timeout.ms default, for a client sending 0
		}
		switch {
		case len(c.txnVerified) > 0:
			parts, c.waited = c.produceVerified(req.Acks, timeout, parts, pre)
		case len(parts) > 0 && req.Acks == -1 && c.answersInline():
			c.produceParts, c.producePre = parts, pre
			if done, err := c.produceInline(h, req, timeout); done {
				return nil, err
			}
		case len(parts) > 0 && req.Acks != -1 && !c.s.cfg.WakeBeforeResponse:
			// Kafka's order: the response is written before the followers are woken
			// (handle wakes them; answer writes the response).
			c.waited = c.s.cfg.Broker.ProduceWakeLater(c.ctx, req.Acks, timeout, parts, &c.wakes)
		case len(parts) > 0:
			c.waited = c.s.cfg.Broker.Produce(c.ctx, req.Acks, timeout, parts)
		}
	}
	c.produceParts, c.producePre = parts, pre
	if req.Acks == 0 {
		// No response to carry an error: like Kafka, the broker closes the connection
		// so that the client notices (and refreshes its metadata).
		for i := range parts {
			if err := parts[i].Err; err != nil {
				return nil, closef("acks=0 produce to %s-%d failed: %v", parts[i].Topic, parts[i].Partition, err)
			}
		}
		for _, err := range pre {
			if err != nil {
				return nil, closef("acks=0 produce failed: %v", err)
			}
		}
		return nil, nil
	}
	return c.produceResponse(req, reqErr), nil
}

// produceResponse builds the response of req from c.produceParts and c.producePre (reqErr, if
// not nil, answers every partition). The response is reused like the request: its Topics and
// their Partitions keep their capacity (it is dead once written).
func (c *conn) produceResponse(req *kmsg.ProduceRequest, reqErr error) *kmsg.ProduceResponse {
	parts, pre := c.produceParts, c.producePre
	resp := c.produceResp
	if resp == nil {
		resp = kmsg.NewPtrProduceResponse()
		c.produceResp = resp
	}
	topics := resp.Topics[:0]
	*resp = kmsg.ProduceResponse{}
	k, idx := 0, 0
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
				err = pre[idx]
				idx++
			}
			if reqErr == nil && err == nil {
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
	return resp
}

// checkProduce refuses what Kafka refuses of one partition's records before the broker
// appends them: a format the request's version may not carry (records.CheckProduceFormat),
// and a transactional batch that would open a transaction its coordinator does not hold the
// partition in (KIP-890, checkTxnVerified). The broker refuses the rest when it appends:
// internal topics (INVALID_TOPIC_EXCEPTION: the request's partitions are a client's, never
// InternalTopicsAllowed) and the sizes (max.message.bytes, the segment size).
func (c *conn) checkProduce(req *kmsg.ProduceRequest, i int, topic string, partition int32, recs []byte) error {
	if err := records.CheckProduceFormat(req.Version, recs); err != nil {
		return fmt.Errorf("%s-%d: %w", topic, partition, err)
	}
	return c.checkTxnVerified(req.TransactionID, i, topic, partition, recs)
}
