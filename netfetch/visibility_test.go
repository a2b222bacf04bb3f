package netfetch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// These tests pin what consumers see over the wire (01_fetch.go, 02_list_offsets.go), with
// raw requests and a real client, against a leader whose LEO (7) is past its HW (3): its
// followers' fetchers are paused (their listeners still answer), so acks=1 records stay
// above the HW.

// aheadOfHW starts 3 brokers with topic vis (RF 3, min.insync.replicas 2), commits a-0..a-2
// (offsets 0..2, timestamp 1000) with acks=all, pauses the followers' fetchers and appends
// b-0..b-3 (offsets 3..6, timestamp 2000) with acks=1. It returns the cluster, the leader's id,
// a follower's id and a raw connection to the leader.
func aheadOfHW(t *testing.T) (*cluster.Cluster, int32, int32, *kafkatest.Client) {
	t.Helper()
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		cfg.Broker.ReplicaLagTimeMaxMs = 60000 // the paused followers stay in the ISR
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
	})
	st, follower := clustertest.FollowedTopic(t, c, "vis")
	rc := kafkatest.Dial(t, c.Addr(st.Leader))
	produce := func(acks int16, blob []byte, wantBase int64) {
		t.Helper()
		resp := kafkatest.NewProduceResp()
		rc.RoundTrip(kafkatest.NewProduce("vis", acks, blob), resp)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != wantBase {
			t.Fatalf("produce acks=%d: error %d base %d, want offset %d", acks, p.ErrorCode, p.BaseOffset, wantBase)
		}
	}
	produce(-1, batchOf("a", 3, 1000), 0)
	for _, id := range st.Replicas {
		if id != st.Leader {
			c.Broker(id).Pause() // fetchers only: the listener keeps answering
		}
	}
	produce(1, batchOf("b", 4, 2000), 3)
	r, _ := c.Broker(st.Leader).Replica("vis", 0)
	if r.LEO() != 7 || r.HW() != 3 {
		t.Fatalf("leader LEO %d HW %d, want 7 and 3", r.LEO(), r.HW())
	}
	return c, st.Leader, follower, rc
}

func batchOf(prefix string, n int, ts int64) []byte {
	recs := make([]records.Record, n)
	for i := range recs {
		recs[i] = records.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return records.AppendBatch(nil, 0, 0, ts, recs)
}

// TestWireConsumerFetchStopsBelowHW: a consumer Fetch (replica_id -1, read_uncommitted) at
// every offset of [0, LEO], at the versions clients use, returns no batch holding an offset at
// or past the HW and every record below it; a kgo consumer reads a-0..a-2 and nothing more.
func TestWireConsumerFetchStopsBelowHW(t *testing.T) {
	c, leader, _, rc := aheadOfHW(t)
	want := []string{"a-0", "a-1", "a-2"}
	for _, v := range []int16{4, 11, 12} {
		for from := int64(0); from <= 7; from++ {
			req := kmsg.NewPtrFetchRequest()
			req.SetVersion(v)
			req.ReplicaID, req.MaxBytes, req.IsolationLevel = -1, 1<<20, 0
			req.SessionEpoch = -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "vis"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = from, 1<<20, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := kmsg.NewPtrFetchResponse()
			rc.RoundTrip(req, resp)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.HighWatermark != 3 {
				t.Fatalf("Fetch v%d at %d: error %d HW %d, want no error and HW 3", v, from, p.ErrorCode, p.HighWatermark)
			}
			var got []string
			err := records.Split(p.RecordBatches, func(b []byte, h records.Header) error {
				if h.LastOffset() >= p.HighWatermark {
					t.Fatalf("Fetch v%d at %d returned batch [%d, %d], at or past the HW %d", v, from, h.BaseOffset, h.LastOffset(), p.HighWatermark)
				}
				return records.ForEachRecord(b, func(off, _ int64, _, val []byte) error {
					if off >= from {
						got = append(got, string(val))
					}
					return nil
				})
			})
			if err != nil {
				t.Fatalf("Fetch v%d at %d: records: %v", v, from, err)
			}
			var wantFrom []string
			if from < int64(len(want)) {
				wantFrom = want[from:]
			}
			if fmt.Sprint(got) != fmt.Sprint(wantFrom) {
				t.Errorf("Fetch v%d at %d: read %v, want %v", v, from, got, wantFrom)
			}
		}
	}

	cl := clustertest.NewClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"vis": {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(50*time.Millisecond))
	var got []string
	ctx := clustertest.Context(t)
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kgo consumer read %v, want %v", got, want)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Errorf("kgo fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= 3 {
				t.Errorf("kgo consumer read %q at offset %d, at or past the HW 3 of leader %d", r.Value, r.Offset, leader)
			}
			got = append(got, string(r.Value))
		})
	}
	// A few more polls at the HW (each a long poll the server ends empty after 50 ms).
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	for pctx.Err() == nil {
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			t.Errorf("kgo consumer read %q at offset %d past the HW 3", r.Value, r.Offset)
		})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("kgo consumer read %v, want %v", got, want)
	}
}

// TestWireListOffsetsLatestIsTheHW: ListOffsets LATEST answers a consumer (replica_id -1)
// the HW at every version, read_uncommitted and read_committed alike; a follower's replica
// id and the debugging id -2 get the LEO (Kafka passes them no isolation level); by
// timestamp, a consumer is answered only offsets below the HW. kadm's end offsets are the HW.
func TestWireListOffsetsLatestIsTheHW(t *testing.T) {
	c, _, follower, rc := aheadOfHW(t)
	list := func(v int16, replicaID int32, isolation int8, ts int64) (int16, int64) {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(v)
		req.ReplicaID, req.IsolationLevel = replicaID, isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "vis"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrListOffsetsResponse()
		rc.RoundTrip(req, resp)
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, p.Offset
	}
	for v := int16(1); v <= 7; v++ {
		for _, tc := range []struct {
			name      string
			replicaID int32
			isolation int8
			ts        int64
			want      int64
		}{
			{"consumer latest read_uncommitted", -1, 0, -1, 3},
			{"consumer latest read_committed", -1, 1, -1, 3},
			{"consumer earliest", -1, 0, -2, 0},
			{"consumer by a timestamp only records past the HW have", -1, 0, 1500, -1},
			{"follower latest", follower, 0, -1, 7},
			{"debugging latest", -2, 0, -1, 7},
		} {
			if v < 2 && tc.isolation != 0 {
				continue // isolation_level is v2+
			}
			if code, off := list(v, tc.replicaID, tc.isolation, tc.ts); code != 0 || off != tc.want {
				t.Errorf("ListOffsets v%d %s: error %d offset %d, want %d", v, tc.name, code, off, tc.want)
			}
		}
	}
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	ends, err := adm.ListEndOffsets(clustertest.Context(t), "vis")
	if err != nil || ends.Error() != nil {
		t.Fatalf("kadm ListEndOffsets: %v %v", err, ends.Error())
	}
	if o, ok := ends.Lookup("vis", 0); !ok || o.Offset != 3 {
		t.Errorf("kadm end offset %+v, want the HW 3", o)
	}
}
