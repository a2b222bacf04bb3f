package netfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
)

// The replica fetch client's wire work: a Fetch request's partitions appended, and a Fetch
// response decoded without allocating.

// appendFetchPartition appends p to the request topics, in a new topic entry unless it is
// the last one's topic (the entries and their partition slices are reused).
func appendFetchPartition(topics []kmsg.FetchRequestTopic, p broker.FetchPartition) []kmsg.FetchRequestTopic {
	if n := len(topics); n == 0 || topics[n-1].Topic != p.Topic {
		if n < cap(topics) {
			topics = topics[:n+1]
			keep := topics[n].Partitions[:0]
			topics[n] = kmsg.NewFetchRequestTopic()
			topics[n].Partitions = keep
		} else {
			topics = append(topics, kmsg.NewFetchRequestTopic())
		}
		topics[n].Topic = p.Topic
	}
	t := &topics[len(topics)-1]
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.CurrentLeaderEpoch, fp.FetchOffset = p.Partition, p.CurrentLeaderEpoch, p.FetchOffset
	fp.LastFetchedEpoch, fp.LogStartOffset, fp.PartitionMaxBytes = -1, p.LogStartOffset, p.MaxBytes
	t.Partitions = append(t.Partitions, fp)
	return topics
}

// decodeReplicaFetchResponse decodes a Fetch v12 response body (after the
// response header), appending its partitions to out (the outputs and
// RecordBytes set, Records empty). RecordBytes alias body; topic names are the
// request's strings (a topic the request did not name keeps a copy), so a
// steady-state response allocates nothing. It reports a whole-response error
// code as an error wrapping the kerr error.
func decodeReplicaFetchResponse(body []byte, rf *broker.FetchRequest, out []broker.FetchPartition) ([]broker.FetchPartition, error) {
	r := kbin.Reader{Src: body}
	r.Int32() // throttle_time_ms
	if ec := r.Int16(); ec != 0 && r.Ok() {
		return out, fmt.Errorf("fetch: %w", kerr.ErrorForCode(ec))
	}
	r.Int32() // session_id
	nt := r.CompactArrayLen()
	if !r.Ok() || nt < 0 || int(nt) > len(r.Src) {
		return out, fmt.Errorf("decoding Fetch v%d response: bad topic count %d", replicaFetchVersion, nt)
	}
	for i := int32(0); i < nt && r.Ok(); i++ {
		name := r.Span(int(r.Uvarint()) - 1)
		topic := ""
		for j := range rf.Partitions {
			if rf.Partitions[j].Topic == string(name) { // no allocation: comparison only
				topic = rf.Partitions[j].Topic
				break
			}
		}
		if topic == "" && r.Ok() {
			topic = string(name)
		}
		np := r.CompactArrayLen()
		if !r.Ok() || np < 0 || int(np) > len(r.Src) {
			return out, fmt.Errorf("decoding Fetch v%d response: bad partition count %d for topic %q", replicaFetchVersion, np, topic)
		}
		for k := int32(0); k < np && r.Ok(); k++ {
			res := broker.FetchPartition{Topic: topic, LastStableOffset: -1, DivergingEpoch: -1, DivergingEndOffset: -1}
			res.Partition = r.Int32()
			ec := r.Int16()
			res.HighWatermark = r.Int64()
			res.LastStableOffset = r.Int64()
			res.LogStartOffsetOut = r.Int64()
			if na := r.CompactArrayLen(); na > 0 { // aborted_transactions
				if int(na) > len(r.Src) {
					return out, fmt.Errorf("decoding Fetch v%d response: bad aborted transaction count %d", replicaFetchVersion, na)
				}
				for a := int32(0); a < na && r.Ok(); a++ {
					r.Int64() // producer_id
					r.Int64() // first_offset
					skipTags(&r)
				}
			}
			r.Int32() // preferred_read_replica
			res.RecordBytes = r.CompactNullableBytes()
			skipTags(&r) // diverging_epoch, current_leader, snapshot_id
			res.Err = kerr.ErrorForCode(ec)
			out = append(out, res)
		}
		skipTags(&r) // topic
	}
	skipTags(&r) // response
	if err := r.Complete(); err != nil {
		return out, fmt.Errorf("decoding Fetch v%d response: %w", replicaFetchVersion, err)
	}
	return out, nil
}

// skipTags skips a tagged-field section (kmsg.SkipTags takes an interface,
// which would move the reader to the heap).
func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint() // tag
		r.Span(int(r.Uvarint()))
	}
}
