package netfetch

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/core/records"
)

func init() {
	register(api{key: 0, min: 0, max: 9, role: roleProduce, newReq: (*conn).produceRequest,
		handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
			return c.handleProduce(req.(*kmsg.ProduceRequest))
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
// broker.Produce call (acks=-1 waits for the HW) and answers per partition.
// acks=0 requests get no response (nil, nil), and close the connection if
// a partition failed.
func (c *conn) handleProduce(req *kmsg.ProduceRequest) (kmsg.Response, error) {
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
	// (format, size, internal topic); those partitions are not in parts.
	pre := slices.Grow(c.producePre[:0], n)[:n]
	clear(pre)
	if reqErr == nil {
		i := 0
		for ti := range req.Topics {
			t := &req.Topics[ti]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				if pre[i] = c.checkProduce(req.Version, t.Topic, p.Partition, p.Records); pre[i] == nil {
					parts = append(parts, broker.ProducePartition{Topic: t.Topic, Partition: p.Partition, Records: p.Records})
				}
				i++
			}
		}
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 30 * time.Second // request.timeout.ms default, for a client sending 0
		}
		if len(parts) > 0 {
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
	// The response is reused like the request: its Topics and their
	// Partitions keep their capacity (the response is dead once written).
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
	return resp, nil
}

// Byte positions in a RecordBatch v2 header (also the magic of a v0/v1 message set).
const (
	batchLengthAt   = 8
	magicAt         = 16
	attributesAt    = 21
	compressionZstd = 4
)

// checkProduce refuses what Kafka refuses before appending one partition's records:
// appends to internal topics (INVALID_TOPIC_EXCEPTION); message sets of magic 0/1, which
// Produce v0-v2 carry (UNSUPPORTED_FOR_MESSAGE_FORMAT: isrbench stores RecordBatch v2 only)
// or any magic but 2 from v3 on (INVALID_RECORD); zstd before Produce v7
// (UNSUPPORTED_COMPRESSION_TYPE); a batch larger than max.message.bytes (the topic's, else
// the broker's message.max.bytes: MESSAGE_TOO_LARGE); records larger than a segment
// (segment.bytes / log.segment.bytes: RECORD_LIST_TOO_LARGE).
func (c *conn) checkProduce(version int16, topic string, partition int32, recs []byte) error {
	if topic == group.OffsetsTopic {
		return fmt.Errorf("cannot append to internal topic %s: %w", topic, kerr.InvalidTopicException)
	}
	if len(recs) <= magicAt {
		return nil // too short for a batch: the log refuses it as corrupt
	}
	if magic := recs[magicAt]; magic != 2 {
		if version < 3 {
			return fmt.Errorf("%s-%d: message format v%d (Produce v%d) is not supported: isrbench stores RecordBatch v2 (message format 2, Produce v3 and later) only: %w",
				topic, partition, magic, version, kerr.UnsupportedForMessageFormat)
		}
		return fmt.Errorf("%s-%d: Produce v%d may only carry record batches with magic 2, got magic %d: %w", topic, partition, version, magic, kerr.InvalidRecord)
	}
	if version < 7 && len(recs) > attributesAt+1 && recs[attributesAt+1]&records.CompressionMask == compressionZstd {
		return fmt.Errorf("%s-%d: zstd needs Produce v7 or later, got v%d: %w", topic, partition, version, kerr.UnsupportedCompressionType)
	}
	lim := c.limitsFor(topic)
	if int64(len(recs)) <= int64(lim.maxMessage) {
		return nil // no batch can be larger
	}
	if int64(len(recs)) > lim.segment {
		return fmt.Errorf("%s-%d: %d bytes of records exceed the segment size %d: %w", topic, partition, len(recs), lim.segment, kerr.RecordListTooLarge)
	}
	for pos := 0; pos+batchLengthAt+4 <= len(recs); {
		size := 12 + int64(binary.BigEndian.Uint32(recs[pos+batchLengthAt:]))
		if size > int64(lim.maxMessage) {
			return fmt.Errorf("%s-%d: the record batch is %d bytes, more than max.message.bytes %d: %w", topic, partition, size, lim.maxMessage, kerr.MessageTooLarge)
		}
		pos += int(size)
	}
	return nil
}

// topicLimits are a topic's effective max.message.bytes and segment size.
type topicLimits struct {
	maxMessage int32
	segment    int64
}

// limitsCacheTTL bounds how long a connection uses a topic's cached limits before it reads
// the topic config again (a config change applies within it).
const limitsCacheTTL = time.Second

// limitsFor returns topic's limits from the connection's cache (refreshed every
// limitsCacheTTL): no controller lookup and no allocation per produce.
func (c *conn) limitsFor(topic string) topicLimits {
	now := time.Now()
	if c.limits == nil || now.Sub(c.limitsAt) > limitsCacheTTL {
		clear(c.limits)
		if c.limits == nil {
			c.limits = map[string]topicLimits{}
		}
		c.limitsAt = now
	}
	if l, ok := c.limits[topic]; ok {
		return l
	}
	l := topicLimits{maxMessage: c.s.cfg.MessageMaxBytes, segment: math.MaxInt64}
	if b := c.s.cfg.Broker; b != nil && b.Config().Log.SegmentBytes > 0 {
		l.segment = b.Config().Log.SegmentBytes
	}
	if ctrl := c.s.cfg.Controller; ctrl != nil {
		// The dynamic broker configs (this broker's, else the cluster-wide default), then
		// the topic's overrides.
		dyn := ctrl.EffectiveBrokerConfigs(c.s.cfg.BrokerID)
		if v, err := strconv.ParseInt(dyn["message.max.bytes"], 10, 32); err == nil {
			l.maxMessage = int32(v)
		}
		if v, err := strconv.ParseInt(dyn["log.segment.bytes"], 10, 64); err == nil && v > 0 {
			l.segment = v
		}
		tc := ctrl.TopicConfig(topic)
		if v, err := strconv.ParseInt(tc[controller.ConfigMaxMessageBytes], 10, 32); err == nil {
			l.maxMessage = int32(v)
		}
		if v, err := strconv.ParseInt(tc[controller.ConfigSegmentBytes], 10, 64); err == nil && v > 0 {
			l.segment = v
		}
	}
	c.limits[topic] = l
	return l
}
