package netfetch_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// TestWireIncrementalFetchCarriesEveryChange: over the wire, a consumer's incremental fetch
// (KIP-227) that names nothing is answered with exactly the partitions that changed since the
// last response (records and a new HW on a partition the request left out), none when nothing
// did, and a parked one is answered with the partition whose record woke it; the session
// errors stay Kafka's.
func TestWireIncrementalFetchCarriesEveryChange(t *testing.T) {
	c := clustertest.Start(t, 1, nil)
	if err := c.CreateTopic("w", 3, 1, nil); err != nil {
		t.Fatal(err)
	}
	rc := kafkatest.Dial(t, c.Addr(0))
	produce := func(rc *kafkatest.Client, p int32) {
		t.Helper()
		req := kafkatest.NewProduce("w", 1, kafkatest.Batch(0))
		req.Topics[0].Partitions[0].Partition = p
		resp := kafkatest.NewProduceResp()
		rc.RoundTrip(req, resp)
		if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
			t.Fatalf("produce to w-%d: error %d", p, ec)
		}
	}
	fetchReq := func(id, epoch, maxWaitMs int32, named map[int32]int64) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.MaxWaitMillis, req.MinBytes = -1, 1<<20, maxWaitMs, 1
		req.SessionID, req.SessionEpoch = id, epoch
		if len(named) > 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "w"
			for p := int32(0); p < 3; p++ {
				if off, ok := named[p]; ok {
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, off, 1<<20, -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
			}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	// answered lists the response's partitions as "p:hw=H,records=bool".
	answered := func(resp *kmsg.FetchResponse) string {
		var out []string
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				out = append(out, fmt.Sprintf("%d:hw=%d,records=%v", p.Partition, p.HighWatermark, len(p.RecordBatches) > 0))
			}
		}
		return fmt.Sprint(out)
	}
	fetch := func(id, epoch int32, named map[int32]int64, want string) *kmsg.FetchResponse {
		t.Helper()
		resp := kmsg.NewPtrFetchResponse()
		rc.RoundTrip(fetchReq(id, epoch, 0, named), resp)
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch epoch %d: error %d", epoch, resp.ErrorCode)
		}
		if got := answered(resp); got != want {
			t.Fatalf("fetch epoch %d answered %s, want %s", epoch, got, want)
		}
		return resp
	}
	for p := int32(0); p < 3; p++ {
		produce(rc, p)
	}
	full := fetch(0, 0, map[int32]int64{0: 1, 1: 1, 2: 1}, "[0:hw=1,records=false 1:hw=1,records=false 2:hw=1,records=false]")
	id := full.SessionID
	if id == 0 {
		t.Fatal("a full fetch at epoch 0 opened no session")
	}
	fetch(id, 1, nil, "[]")
	produce(rc, 1)
	fetch(id, 2, nil, "[1:hw=2,records=true]")
	fetch(id, 3, map[int32]int64{1: 2}, "[]")

	// Parked (max wait 60 s): a record on 2, produced over another connection, answers it.
	rc.Send(fetchReq(id, 4, 60000, nil))
	produce(kafkatest.Dial(t, c.Addr(0)), 2)
	_, body, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	rd := kbin.Reader{Src: body}
	kmsg.SkipTags(&rd) // response header v1
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	if err := resp.ReadFrom(rd.Src); err != nil {
		t.Fatal(err)
	}
	if got, want := answered(resp), "[2:hw=2,records=true]"; got != want {
		t.Fatalf("parked fetch answered %s, want %s", got, want)
	}

	// Session errors.
	for _, tc := range []struct {
		id, epoch int32
		want      *kerr.Error
	}{{id, 4, kerr.InvalidFetchSessionEpoch}, {id + 1, 1, kerr.FetchSessionIDNotFound}} {
		resp := kmsg.NewPtrFetchResponse()
		rc.RoundTrip(fetchReq(tc.id, tc.epoch, 0, nil), resp)
		if resp.ErrorCode != tc.want.Code {
			t.Errorf("session %d epoch %d: error %d, want %s", tc.id, tc.epoch, resp.ErrorCode, tc.want.Message)
		}
	}
}
