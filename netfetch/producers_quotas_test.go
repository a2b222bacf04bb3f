package netfetch_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
)

// TestDescribeProducersAPI: kadm's DescribeProducers lists the idempotent kgo producer with
// its epoch, last sequence and last timestamp on the leader, and a follower answers from its
// own replica's state; unknown partitions and brokers without a replica get Kafka's errors.
func TestDescribeProducersAPI(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	before := time.Now().UnixMilli()
	cl := clustertest.NewClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	if err := c.CreateTopic("dp", 2, 2, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 7; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "dp", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"dp": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	p0 := ds["dp"].Partitions[0]
	pr, ok := p0.ActiveProducers[pid]
	if p0.Err != nil || len(p0.ActiveProducers) != 1 || !ok {
		t.Fatalf("dp-0: %+v, want producer %d", p0, pid)
	}
	if pr.ProducerEpoch != epoch || pr.LastSequence != 6 || pr.LastTimestamp < before || pr.CoordinatorEpoch != -1 || pr.CurrentTxnStartOffset != -1 {
		t.Errorf("producer %+v: want epoch %d, last sequence 6, a timestamp >= %d, coordinator epoch -1, no transaction", pr, epoch, before)
	}
	if p1 := ds["dp"].Partitions[1]; p1.Err != nil || len(p1.ActiveProducers) != 0 {
		t.Errorf("dp-1 (nothing produced): %+v", p1)
	}
	// Raw requests: a follower's replica answers too; a broker without a replica and an
	// unknown partition do not.
	st, _ := c.Controller().Partition("dp", 0)
	var none int32 = -1
	for _, id := range c.BrokerIDs() {
		if id != st.Replicas[0] && id != st.Replicas[1] {
			none = id
		}
	}
	describe := func(id int32, topic string, p int32) kmsg.DescribeProducersResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrDescribeProducersRequest()
		req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: topic, Partitions: []int32{p}}}
		resp := rawRequest[*kmsg.DescribeProducersResponse](t, c.Addr(id), req)
		return resp.Topics[0].Partitions[0]
	}
	follower := st.Replicas[1]
	if follower == st.Leader {
		follower = st.Replicas[0]
	}
	if r, ok := c.Broker(follower).Replica("dp", 0); ok { // the follower has the batches
		for ch := r.LEOChanged(); r.LEO() < 7; ch = r.LEOChanged() {
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatalf("follower %d: LEO %d, want 7", follower, r.LEO())
			}
		}
	}
	if rp := describe(follower, "dp", 0); rp.ErrorCode != 0 || len(rp.ActiveProducers) != 1 || rp.ActiveProducers[0].LastSequence != 6 {
		t.Errorf("follower %d: %+v, want the producer at sequence 6", follower, rp)
	}
	for _, tc := range []struct {
		what  string
		id    int32
		topic string
		p     int32
		want  int16
	}{
		{"no replica here", none, "dp", 0, kerr.NotLeaderForPartition.Code},
		{"unknown partition", st.Leader, "dp", 9, kerr.UnknownTopicOrPartition.Code},
		{"unknown topic", st.Leader, "dp-none", 0, kerr.UnknownTopicOrPartition.Code},
		{"bad topic name", st.Leader, "a b", 0, kerr.InvalidTopicException.Code},
	} {
		if rp := describe(tc.id, tc.topic, tc.p); rp.ErrorCode != tc.want {
			t.Errorf("%s: error %d, want %d", tc.what, rp.ErrorCode, tc.want)
		}
	}
}

// TestDescribeClientQuotasAPI: with no quotas configured, as Kafka: an empty list for a valid
// filter, Kafka's filter errors for a bad one.
func TestDescribeClientQuotasAPI(t *testing.T) {
	c := clustertest.Start(t, 1, nil)
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	ctx := clustertest.Context(t)
	user := "alice"
	for _, comps := range [][]kadm.DescribeClientQuotaComponent{
		nil,
		{{Type: "user", MatchName: &user, MatchType: 0}},
		{{Type: "user", MatchType: 1}, {Type: "client-id", MatchType: 2}},
		{{Type: "ip", MatchType: 2}},
	} {
		qs, err := adm.DescribeClientQuotas(ctx, false, comps)
		if err != nil || len(qs) != 0 {
			t.Errorf("filter %+v: %v %v, want no quotas", comps, qs, err)
		}
	}
	for _, tc := range []struct {
		comps []kadm.DescribeClientQuotaComponent
		want  error
	}{
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 0}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &user, MatchType: 1}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}, {Type: "user", MatchType: 2}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: 2}, {Type: "user", MatchType: 2}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "", MatchType: 2}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "group", MatchType: 2}}, kerr.UnsupportedVersion},
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 7}}, kerr.UnsupportedVersion},
	} {
		if _, err := adm.DescribeClientQuotas(ctx, false, tc.comps); !errors.Is(err, tc.want) {
			t.Errorf("filter %+v: %v, want %v", tc.comps, err, tc.want)
		}
	}
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.SetVersion(0)
	resp := rawRequest[*kmsg.DescribeClientQuotasResponse](t, c.Addr(0), req)
	if resp.ErrorCode != 0 || resp.Entries == nil || len(resp.Entries) != 0 {
		t.Errorf("DescribeClientQuotas v0: %+v, want an empty, non-null list", resp)
	}
}

// TestProducerIDExpiration: producer.id.expiration.ms and
// producer.id.expiration.check.interval.ms, given as settings by name (as `serve --set`
// gives them), reach every replica: an idempotent kgo producer idle past its expiration
// disappears from DescribeProducers on the leader and both followers, and its next record,
// at the sequence it had reached, is accepted as a new producer's (KIP-360).
func TestProducerIDExpiration(t *testing.T) {
	c := clustertest.Start(t, 3, func(c *cluster.Config) {
		for k, v := range map[string]string{
			"producer.id.expiration.ms":                "300",
			"producer.id.expiration.check.interval.ms": "50",
		} {
			if err := c.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err := c.CreateTopic("pe", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	ctx := clustertest.Context(t)
	cl := clustertest.NewClient(t, c, kgo.DefaultProduceTopic("pe"))
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pid, _, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition("pe", 0)
	producers := func(id int32) []kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
		req := kmsg.NewPtrDescribeProducersRequest()
		req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "pe", Partitions: []int32{0}}}
		rp := rawRequest[*kmsg.DescribeProducersResponse](t, c.Addr(id), req).Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			t.Fatalf("DescribeProducers on broker %d: error %d", id, rp.ErrorCode)
		}
		return rp.ActiveProducers
	}
	if ps := producers(st.Leader); len(ps) != 1 || ps[0].ProducerID != pid || ps[0].LastSequence != 2 {
		t.Fatalf("leader %d: %+v, want producer %d at sequence 2", st.Leader, ps, pid)
	}
	for _, id := range st.Replicas {
		waitFor(t, fmt.Sprintf("producer %d to expire on broker %d", pid, id), func() bool { return len(producers(id)) == 0 })
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("the expired producer's next record: %v", err)
	}
	if ps := producers(st.Leader); len(ps) != 1 || ps[0].ProducerID != pid || ps[0].LastSequence != 3 {
		t.Fatalf("leader %d after the next record: %+v, want producer %d at sequence 3", st.Leader, ps, pid)
	}
}
