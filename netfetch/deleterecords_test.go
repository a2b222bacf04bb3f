package netfetch_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/group"
)

// TestDeleteRecordsAPI: kadm's DeleteRecords moves each partition's log start on every
// replica and answers the low watermark (-1 = the high watermark); ListOffsets EARLIEST and a
// kgo consumer from the start see the new log start; a Fetch below it is OFFSET_OUT_OF_RANGE;
// an offset above the HW is OFFSET_OUT_OF_RANGE, an unknown partition
// UNKNOWN_TOPIC_OR_PARTITION, a broker that does not lead NOT_LEADER_OR_FOLLOWER, the internal
// topic INVALID_TOPIC_EXCEPTION.
func TestDeleteRecordsAPI(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.Broker.ReplicaFetchWaitMaxMs = 50 })
	cl := clustertest.NewClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	if err := c.CreateTopic("dr", 2, 3, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		for p := int32(0); p < 2; p++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "dr", Partition: p, Value: []byte{byte(i)}}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 12})
	os.Add(kadm.Offset{Topic: "dr", Partition: 1, At: -1})
	rs, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 12, 1: 30} {
		r, ok := rs.Lookup("dr", p)
		if !ok || r.Err != nil || r.LowWatermark != want {
			t.Errorf("DeleteRecords dr-%d: %+v, want low watermark %d", p, r, want)
		}
		// Answered once every replica followed.
		for _, id := range c.BrokerIDs() {
			if r, ok := c.Broker(id).Replica("dr", p); !ok || r.LogStart() != want {
				t.Errorf("broker %d: dr-%d log start %d, want %d", id, p, r.LogStart(), want)
			}
		}
	}
	starts, err := adm.ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("dr", 0); o.Offset != 12 {
		t.Errorf("ListOffsets EARLIEST dr-0: %+v, want 12", o)
	}
	if o, _ := starts.Lookup("dr", 1); o.Offset != 30 {
		t.Errorf("ListOffsets EARLIEST dr-1: %+v, want 30", o)
	}
	// A consumer from the start begins at the new log start.
	ccl := clustertest.NewClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"dr": {0: kgo.NewOffset().AtStart()}}))
	var got []*kgo.Record
	for len(got) < 18 {
		fs := ccl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records of dr-0: %v", len(got), ctx.Err())
		}
		got = append(got, fs.Records()...)
	}
	if got[0].Offset != 12 || len(got) != 18 {
		t.Errorf("consumed from the start: %d records from offset %d, want 18 from 12", len(got), got[0].Offset)
	}
	// A consumer Fetch below the log start.
	st, _ := c.Controller().Partition("dr", 0)
	fr := kmsg.NewPtrFetchRequest()
	fr.SetVersion(12)
	fr.ReplicaID, fr.MaxBytes = -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "dr"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 3, 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	fresp := rawRequest[*kmsg.FetchResponse](t, c.Addr(st.Leader), fr)
	if p := fresp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("Fetch at 3, below the log start 12: error %d, want OFFSET_OUT_OF_RANGE", p.ErrorCode)
	}
	// The refusals.
	raw := func(addr, topic string, p int32, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.SetVersion(2)
		req.TimeoutMillis = 5000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = p, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rawRequest[*kmsg.DeleteRecordsResponse](t, addr, req)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("DeleteRecords response %+v", resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	follower := st.Replicas[0]
	if follower == st.Leader {
		follower = st.Replicas[1]
	}
	if _, err := group.EnsureOffsetsTopic(c.Controller(), c.Config().Group); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what   string
		addr   string
		topic  string
		p      int32
		offset int64
		want   int16
	}{
		{"above the HW", c.Addr(st.Leader), "dr", 0, 31, kerr.OffsetOutOfRange.Code},
		{"below -1", c.Addr(st.Leader), "dr", 0, -2, kerr.OffsetOutOfRange.Code},
		{"unknown partition", c.Addr(st.Leader), "dr", 7, 1, kerr.UnknownTopicOrPartition.Code},
		{"unknown topic", c.Addr(st.Leader), "dr-none", 0, 1, kerr.UnknownTopicOrPartition.Code},
		{"to a follower", c.Addr(follower), "dr", 0, 13, kerr.NotLeaderForPartition.Code},
		{"internal topic", c.Addr(st.Leader), group.OffsetsTopic, 0, 0, kerr.InvalidTopicException.Code},
	} {
		if rp := raw(tc.addr, tc.topic, tc.p, tc.offset); rp.ErrorCode != tc.want || rp.LowWatermark != -1 {
			t.Errorf("%s: error %d low watermark %d, want error %d and -1", tc.what, rp.ErrorCode, rp.LowWatermark, tc.want)
		}
	}
	// Below the log start: nothing moves, the low watermark is answered.
	if rp := raw(c.Addr(st.Leader), "dr", 0, 4); rp.ErrorCode != 0 || rp.LowWatermark != 12 {
		t.Errorf("below the log start: %+v, want low watermark 12", rp)
	}
	// A follower that does not fetch holds the low watermark: REQUEST_TIMED_OUT after
	// timeout_ms, with the leader's deletion done.
	c.Broker(follower).Pause()
	defer c.Broker(follower).Resume()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 200
	req.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "dr", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 20}}}}
	t0 := time.Now()
	resp := rawRequest[*kmsg.DeleteRecordsResponse](t, c.Addr(st.Leader), req)
	if rp := resp.Topics[0].Partitions[0]; rp.ErrorCode != kerr.RequestTimedOut.Code || rp.LowWatermark != 12 {
		t.Errorf("with a paused follower: %+v, want REQUEST_TIMED_OUT at low watermark 12", rp)
	}
	if d := time.Since(t0); d < 200*time.Millisecond {
		t.Errorf("answered after %v, before timeout_ms", d)
	}
	if r, _ := c.Broker(st.Leader).Replica("dr", 0); r.LogStart() != 20 {
		t.Errorf("leader log start %d, want 20", r.LogStart())
	}
	if _, err := adm.DeleteRecords(ctx, kadm.Offsets{}); err != nil {
		t.Errorf("empty DeleteRecords: %v", err)
	}
}
