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
	rf := &broker.FetchRequest{Partitions: []broker.FetchPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}}}
	withAborted := fetchPart(1, 0, 7, 0, []byte("xyz"))
	withAborted.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 5, FirstOffset: 2}}
	withDiverging := fetchPart(0, 0, 3, 1, nil)
	withDiverging.DivergingEpoch.Epoch, withDiverging.DivergingEpoch.EndOffset = 4, 2
	for _, tc := range []struct {
		name string
		resp *kmsg.FetchResponse
		want []broker.FetchPartition
	}{
		{"empty", fetchResp(), nil},
		{"one partition with records", fetchResp(fetchTopic("a", fetchPart(0, 0, 10, 0, []byte("records")))),
			[]broker.FetchPartition{{Topic: "a", Partition: 0, HighWatermark: 10, LogStartOffsetOut: 0, RecordBytes: []byte("records")}}},
		{"two topics, error, aborted txns, tags", fetchResp(
			fetchTopic("a", fetchPart(0, kerr.OffsetOutOfRange.Code, -1, -1, nil), withAborted),
			fetchTopic("b", withDiverging)),
			[]broker.FetchPartition{
				{Topic: "a", Partition: 0, Err: kerr.OffsetOutOfRange, HighWatermark: -1, LogStartOffsetOut: -1},
				{Topic: "a", Partition: 1, HighWatermark: 7, RecordBytes: []byte("xyz")},
				{Topic: "b", Partition: 0, HighWatermark: 3, LogStartOffsetOut: 1},
			}},
		{"topic not in the request", fetchResp(fetchTopic("zz", fetchPart(2, 0, 1, 0, []byte("r")))),
			[]broker.FetchPartition{{Topic: "zz", Partition: 2, HighWatermark: 1, RecordBytes: []byte("r")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := encodeFetchV12Body(tc.resp)
			out, err := decodeReplicaFetchResponse(body, rf, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(tc.want) {
				t.Fatalf("got %d partitions, want %d", len(out), len(tc.want))
			}
			for i, w := range tc.want {
				g := out[i]
				if g.Topic != w.Topic || g.Partition != w.Partition || !errors.Is(g.Err, w.Err) || (g.Err == nil) != (w.Err == nil) ||
					g.HighWatermark != w.HighWatermark || g.LogStartOffsetOut != w.LogStartOffsetOut || !bytes.Equal(g.RecordBytes, w.RecordBytes) ||
					g.Records.Size != 0 {
					t.Errorf("partition %d: got %+v, want %+v", i, g, w)
				}
			}
			// Every strict prefix is an error, never a panic or a partial success.
			for n := 0; n < len(body); n++ {
				if _, err := decodeReplicaFetchResponse(body[:n], rf, out[:0]); err == nil {
					t.Fatalf("prefix of %d/%d bytes decoded without error", n, len(body))
				}
			}
		})
	}
	t.Run("response error code", func(t *testing.T) {
		r := fetchResp()
		r.ErrorCode = kerr.FetchSessionIDNotFound.Code
		if _, err := decodeReplicaFetchResponse(encodeFetchV12Body(r), rf, nil); !errors.Is(err, kerr.FetchSessionIDNotFound) {
			t.Fatalf("got %v, want FETCH_SESSION_ID_NOT_FOUND", err)
		}
	})
}

func TestDecodeReplicaFetchResponseAllocs(t *testing.T) {
	rf := &broker.FetchRequest{Partitions: []broker.FetchPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}}}
	body := encodeFetchV12Body(fetchResp(fetchTopic("a", fetchPart(0, 0, 10, 0, []byte("records")), fetchPart(1, 0, 10, 0, nil))))
	out, err := decodeReplicaFetchResponse(body, rf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { out, _ = decodeReplicaFetchResponse(body, rf, out[:0]) }); n != 0 {
		t.Fatalf("%v allocations per decode, want 0", n)
	}
}

// FuzzDecodeReplicaFetchResponse: arbitrary peer bytes give an error or a
// result, never a panic; whatever decodes must agree with kmsg.
func FuzzDecodeReplicaFetchResponse(f *testing.F) {
	f.Add(encodeFetchV12Body(fetchResp(fetchTopic("a", fetchPart(0, 0, 10, 0, []byte("records"))))))
	f.Add(encodeFetchV12Body(fetchResp()))
	rf := &broker.FetchRequest{Partitions: []broker.FetchPartition{{Topic: "a", Partition: 0}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := decodeReplicaFetchResponse(body, rf, nil)
		ref := kmsg.NewPtrFetchResponse()
		ref.SetVersion(replicaFetchVersion)
		if err != nil || ref.ReadFrom(body) != nil || ref.ErrorCode != 0 {
			return
		}
		i := 0
		for _, tp := range ref.Topics {
			for _, p := range tp.Partitions {
				if i >= len(out) {
					t.Fatalf("kmsg has more partitions than the decoder (%d)", len(out))
				}
				g := out[i]
				if g.Topic != tp.Topic || g.Partition != p.Partition || g.HighWatermark != p.HighWatermark || !bytes.Equal(g.RecordBytes, p.RecordBatches) {
					t.Fatalf("partition %d: decoder %+v, kmsg %s-%d hw %d", i, g, tp.Topic, p.Partition, p.HighWatermark)
				}
				i++
			}
		}
		if i != len(out) {
			t.Fatalf("decoder %d partitions, kmsg %d", len(out), i)
		}
	})
}
