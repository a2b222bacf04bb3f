package netfetch

import (
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
)

func init() {
	// v13 names topics by id (KIP-516): Metadata hands the ids out, the request's are resolved
	// through the controller's lock-free index (UNKNOWN_TOPIC_ID for one no topic has).
	register(api{key: 1, min: 4, max: 13, role: roleFetchServe, newReq: (*conn).fetchRequest,
		serve: func(c *conn, h reqHeader, req kmsg.Request) error {
			return c.handleFetch(h, req.(*kmsg.FetchRequest))
		}})
}

// fetchRequest returns the connection's reused Fetch request, reset (see produceRequest).
func (c *conn) fetchRequest() kmsg.Request {
	if c.fetchReq == nil {
		c.fetchReq = kmsg.NewPtrFetchRequest()
	}
	topics := c.fetchReq.Topics[:0]
	*c.fetchReq = kmsg.FetchRequest{Topics: topics}
	return c.fetchReq
}

// fetchState is a connection's reused Fetch state: the broker request
// (its Partitions slice keeps its capacity), the topic grouping of the
// request and the response encoder. Owned by the connection goroutine.
type fetchState struct {
	req   broker.FetchRequest
	spans []topicSpan
	// unknownParts and unknownSpans are the partitions of a v13+ request whose topic id no
	// topic has: answered UNKNOWN_TOPIC_ID after the others.
	unknownParts []broker.FetchPartition
	unknownSpans []topicSpan
	enc          fetchEncoder
	copy         []byte   // the whole response (ZeroCopy=false), or the staged bytes of a zero-copy one
	segs         []outSeg // zero-copy path: the pieces of the response

	zw   zcWriter           // zero-copy path: the write in progress
	zwFn func(uintptr) bool // zw.write, bound once
}

// topicSpan is one request topic: Partitions[start:end] of the broker request.
type topicSpan struct {
	topic      string
	id         [16]byte // the topic id a v13+ response names it by
	start, end int
}

// handleFetch runs a consumer or replica Fetch (v4..v13) through the
// broker's long poll and writes the response: header and per-partition
// fields from the reused encoder buffer, records straight from the segment
// files with sendfile(2) (or pread+write when ZeroCopy is off). Every Slice
// is released before returning. A v13 request's topic ids are resolved to names first
// (resolveTopicIDs); the rest runs by name.
func (c *conn) handleFetch(h reqHeader, r *kmsg.FetchRequest) error {
	c.s.stats.cost.countFetch(r.ReplicaID >= 0)
	c.kind = kindConsumerFetch
	if r.ReplicaID >= 0 {
		c.kind = kindReplicaFetch
	}
	st := &c.fetch
	req := &st.req
	req.ReplicaID = r.ReplicaID
	req.ReplicaEpoch = replicaEpochOf(r)
	req.MaxWait = time.Duration(r.MaxWaitMillis) * time.Millisecond
	req.MinBytes, req.MaxBytes, req.IsolationLevel = r.MinBytes, r.MaxBytes, r.IsolationLevel
	req.Partitions = req.Partitions[:0]
	st.spans = st.spans[:0]
	var ix *controller.TopicIDIndex
	if r.Version >= 13 {
		ix = c.resolveTopicIDs(r)
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.Topic == "" && r.Version >= 13 {
			continue // an unknown topic id (resolveTopicIDs)
		}
		start := len(req.Partitions)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			cle := p.CurrentLeaderEpoch
			if r.Version < 9 {
				cle = -1
			}
			ls := p.LogStartOffset
			if r.Version < 5 {
				ls = -1
			}
			req.Partitions = append(req.Partitions, broker.FetchPartition{
				Topic: t.Topic, Partition: p.Partition, FetchOffset: p.FetchOffset,
				CurrentLeaderEpoch: cle, LogStartOffset: ls, MaxBytes: p.PartitionMaxBytes,
				DivergingEpoch: -1, DivergingEndOffset: -1,
			})
		}
		st.spans = append(st.spans, topicSpan{topic: t.Topic, id: t.TopicID, start: start, end: len(req.Partitions)})
	}
	sf := c.s.sessions.begin(r, req)
	if sf.errCode != 0 {
		if err := st.enc.encode(r.Version, h.corr, sf.errCode, 0, nil, nil); err != nil {
			return err
		}
		c.markSend()
		if !c.s.waitUnpaused() {
			return net.ErrClosed
		}
		return c.sendFetch(nil)
	}
	if sf.session != nil {
		// Incremental: the session visits what changed and leaves in req.Partitions, sorted,
		// the partitions the client must hear about.
		c.waited = c.s.cfg.Broker.SessionFetch(c.ctx, sf.session.bs, req)
		st.spans = spansOf(st.spans[:0], req.Partitions)
		c.s.stats.incremental.Add(1)
		c.s.stats.omitted.Add(int64(max(sf.session.bs.Len()-len(req.Partitions), 0)))
	} else {
		c.waited = c.s.cfg.Broker.Fetch(c.ctx, req)
	}
	defer func() {
		for i := range req.Partitions {
			req.Partitions[i].Records.Release()
			req.Partitions[i].Records = log.Slice{}
		}
	}()
	parts, spans := req.Partitions, st.spans
	if c.s.sessions != nil && sf.session == nil {
		c.s.sessions.finish(&sf, req.ReplicaID >= 0, parts)
	}
	if r.Version >= 13 {
		parts, spans = st.withTopicIDs(ix, parts, spans)
	}
	if err := st.enc.encode(r.Version, h.corr, 0, sf.respID, parts, spans); err != nil {
		return err
	}
	c.markSend()
	if !c.s.waitUnpaused() {
		return net.ErrClosed
	}
	return c.s.stats.cost.countFetchResponse(c.sendFetch(parts))
}

// spansOf appends to dst the topic spans of parts (sorted by topic: one span per topic).
func spansOf(dst []topicSpan, parts []broker.FetchPartition) []topicSpan {
	for i := range parts {
		if n := len(dst); n == 0 || dst[n-1].topic != parts[i].Topic {
			dst = append(dst, topicSpan{topic: parts[i].Topic, start: i})
		}
		dst[len(dst)-1].end = i + 1
	}
	return dst
}

// resolveTopicIDs names the topics and forgotten topics of a v13+ Fetch by their ids, from
// the controller's index (lock-free). A topic whose id no topic has keeps the empty name;
// its partitions are noted in the connection's fetch state to be answered UNKNOWN_TOPIC_ID
// (they never enter a fetch session). Forgotten topics of unknown ids are dropped.
func (c *conn) resolveTopicIDs(r *kmsg.FetchRequest) *controller.TopicIDIndex {
	ix := c.s.cfg.Controller.TopicIDIndex()
	st := &c.fetch
	st.unknownParts, st.unknownSpans = st.unknownParts[:0], st.unknownSpans[:0]
	for i := range r.Topics {
		t := &r.Topics[i]
		name, ok := ix.ByID[t.TopicID]
		t.Topic = name
		if ok {
			continue
		}
		start := len(st.unknownParts)
		for j := range t.Partitions {
			st.unknownParts = append(st.unknownParts, broker.FetchPartition{
				Partition: t.Partitions[j].Partition, Err: kerr.UnknownTopicID,
				HighWatermark: -1, LastStableOffset: -1, LogStartOffsetOut: -1, DivergingEpoch: -1, DivergingEndOffset: -1,
			})
		}
		st.unknownSpans = append(st.unknownSpans, topicSpan{id: t.TopicID, start: start, end: len(st.unknownParts)})
	}
	for i := range r.ForgottenTopics {
		ft := &r.ForgottenTopics[i]
		ft.Topic = ix.ByID[ft.TopicID] // "" for an unknown id: matches no session partition
	}
	return ix
}

// withTopicIDs completes a v13+ response: every span gets its topic's id (spans a fetch
// session built carry only names), and the partitions of unknown topic ids follow the
// others. It returns the partitions and spans to encode (parts' backing array may grow).
func (st *fetchState) withTopicIDs(ix *controller.TopicIDIndex, parts []broker.FetchPartition, spans []topicSpan) ([]broker.FetchPartition, []topicSpan) {
	for i := range spans {
		if spans[i].id == ([16]byte{}) {
			spans[i].id = ix.ByName[spans[i].topic]
		}
	}
	if len(st.unknownParts) == 0 {
		return parts, spans
	}
	base := len(parts)
	parts = append(parts, st.unknownParts...)
	for _, sp := range st.unknownSpans {
		sp.start, sp.end = sp.start+base, sp.end+base
		spans = append(spans, sp)
	}
	return parts, spans
}
