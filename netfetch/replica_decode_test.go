package netfetch

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
)

// encodeFetchV12Body encodes resp as a Fetch v12 response body (no header).
func encodeFetchV12Body(resp *kmsg.FetchResponse) []byte {
	resp.SetVersion(replicaFetchVersion)
	return resp.AppendTo(nil)
}

func fetchResp(topics ...kmsg.FetchResponseTopic) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Topics = topics
	return r
}

func fetchTopic(name string, parts ...kmsg.FetchResponseTopicPartition) kmsg.FetchResponseTopic {
	t := kmsg.NewFetchResponseTopic()
	t.Topic = name
	t.Partitions = parts
	return t
}

func fetchPart(p int32, ec int16, hw, logStart int64, recs []byte) kmsg.FetchResponseTopicPartition {
	fp := kmsg.NewFetchResponseTopicPartition()
	fp.Partition, fp.ErrorCode, fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset = p, ec, hw, hw, logStart
	fp.RecordBatches = recs
	return fp
}

// TestDecodeReplicaFetchResponse checks the hand decoder of the replica
// fetcher against kmsg's encoder, field by field.
func TestDecodeReplicaFetchResponse(t *testing.T) {
	rf := &broker.ReplicaFetch{Partitions: []broker.ReplicaFetchPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}}}
	withAborted := fetchPart(1, 0, 7, 0, []byte("xyz"))
	withAborted.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 5, FirstOffset: 2}}
	withDiverging := fetchPart(0, 0, 3, 1, nil)
	withDiverging.DivergingEpoch.Epoch, withDiverging.DivergingEpoch.EndOffset = 4, 2
	for _, tc := range []struct {
		name string
		resp *kmsg.FetchResponse
		want []broker.ReplicaFetchResult
	}{
		{"empty", fetchResp(), nil},
		{"one partition with records", fetchResp(fetchTopic("a", fetchPart(0, 0, 10, 0, []byte("records")))),
			[]broker.ReplicaFetchResult{{Topic: "a", Partition: 0, HighWatermark: 10, LogStartOffset: 0, Records: []byte("records")}}},
		{"two topics, error, aborted txns, tags", fetchResp(
			fetchTopic("a", fetchPart(0, kerr.OffsetOutOfRange.Code, -1, -1, nil), withAborted),
			fetchTopic("b", withDiverging)),
			[]broker.ReplicaFetchResult{
				{Topic: "a", Partition: 0, Err: kerr.OffsetOutOfRange, HighWatermark: -1, LogStartOffset: -1},
				{Topic: "a", Partition: 1, HighWatermark: 7, Records: []byte("xyz")},
				{Topic: "b", Partition: 0, HighWatermark: 3, LogStartOffset: 1},
			}},
		{"topic not in the request", fetchResp(fetchTopic("zz", fetchPart(2, 0, 1, 0, []byte("r")))),
			[]broker.ReplicaFetchResult{{Topic: "zz", Partition: 2, HighWatermark: 1, Records: []byte("r")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := encodeFetchV12Body(tc.resp)
			var out broker.ReplicaFetchResponse
			if err := decodeReplicaFetchResponse(body, rf, &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Partitions) != len(tc.want) {
				t.Fatalf("got %d partitions, want %d", len(out.Partitions), len(tc.want))
			}
			for i, w := range tc.want {
				g := out.Partitions[i]
				if g.Topic != w.Topic || g.Partition != w.Partition || !errors.Is(g.Err, w.Err) || (g.Err == nil) != (w.Err == nil) ||
					g.HighWatermark != w.HighWatermark || g.LogStartOffset != w.LogStartOffset || !bytes.Equal(g.Records, w.Records) {
					t.Errorf("partition %d: got %+v, want %+v", i, g, w)
				}
			}
			// Every strict prefix is an error, never a panic or a partial success.
			for n := 0; n < len(body); n++ {
				if err := decodeReplicaFetchResponse(body[:n], rf, &out); err == nil {
					t.Fatalf("prefix of %d/%d bytes decoded without error", n, len(body))
				}
			}
		})
	}
	t.Run("response error code", func(t *testing.T) {
		r := fetchResp()
		r.ErrorCode = kerr.FetchSessionIDNotFound.Code
		var out broker.ReplicaFetchResponse
		if err := decodeReplicaFetchResponse(encodeFetchV12Body(r), rf, &out); !errors.Is(err, kerr.FetchSessionIDNotFound) {
			t.Fatalf("got %v, want FETCH_SESSION_ID_NOT_FOUND", err)
		}
	})
}

func TestDecodeReplicaFetchResponseAllocs(t *testing.T) {
	rf := &broker.ReplicaFetch{Partitions: []broker.ReplicaFetchPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}}}
	body := encodeFetchV12Body(fetchResp(fetchTopic("a", fetchPart(0, 0, 10, 0, []byte("records")), fetchPart(1, 0, 10, 0, nil))))
	var out broker.ReplicaFetchResponse
	if err := decodeReplicaFetchResponse(body, rf, &out); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = decodeReplicaFetchResponse(body, rf, &out) }); n != 0 {
		t.Fatalf("%v allocations per decode, want 0", n)
	}
}

// FuzzDecodeReplicaFetchResponse: arbitrary peer bytes give an error or a
// result, never a panic; whatever decodes must agree with kmsg.
func FuzzDecodeReplicaFetchResponse(f *testing.F) {
	f.Add(encodeFetchV12Body(fetchResp(fetchTopic("a", fetchPart(0, 0, 10, 0, []byte("records"))))))
	f.Add(encodeFetchV12Body(fetchResp()))
	rf := &broker.ReplicaFetch{Partitions: []broker.ReplicaFetchPartition{{Topic: "a", Partition: 0}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		var out broker.ReplicaFetchResponse
		err := decodeReplicaFetchResponse(body, rf, &out)
		ref := kmsg.NewPtrFetchResponse()
		ref.SetVersion(replicaFetchVersion)
		if err != nil || ref.ReadFrom(body) != nil || ref.ErrorCode != 0 {
			return
		}
		i := 0
		for _, tp := range ref.Topics {
			for _, p := range tp.Partitions {
				if i >= len(out.Partitions) {
					t.Fatalf("kmsg has more partitions than the decoder (%d)", len(out.Partitions))
				}
				g := out.Partitions[i]
				if g.Topic != tp.Topic || g.Partition != p.Partition || g.HighWatermark != p.HighWatermark || !bytes.Equal(g.Records, p.RecordBatches) {
					t.Fatalf("partition %d: decoder %+v, kmsg %s-%d hw %d", i, g, tp.Topic, p.Partition, p.HighWatermark)
				}
				i++
			}
		}
		if i != len(out.Partitions) {
			t.Fatalf("decoder %d partitions, kmsg %d", len(out.Partitions), i)
		}
	})
}
