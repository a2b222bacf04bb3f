package netfetch_test

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster/clustertest"
)

// TestCreateTopicsManualAssignment: CreateTopics with replica assignments (franz-go's
// kmsg request through a kgo client, as kafka-topics.sh --replica-assignment sends it) places
// the replicas as asked, answers the topic id, partition count and replication factor, and
// the topic takes and serves records; Kafka's refusals.
func TestCreateTopicsManualAssignment(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	cl := clustertest.NewClient(t, c)
	ctx := clustertest.Context(t)
	create := func(validateOnly bool, np int32, rf int16, as ...[]int32) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis, req.ValidateOnly = 5000, validateOnly
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "man", np, rf
		for p, rs := range as {
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(p), Replicas: rs})
		}
		req.Topics = append(req.Topics, rt)
		resp := request[*kmsg.CreateTopicsResponse](t, cl, req)
		return resp.Topics[0]
	}
	for _, tc := range []struct {
		what   string
		np     int32
		rf     int16
		as     [][]int32
		want   int16
		hasMsg bool
	}{
		{"num_partitions set", 2, -1, [][]int32{{0}, {1}}, kerr.InvalidPartitions.Code, true},
		{"replication_factor set", -1, 1, [][]int32{{0}, {1}}, kerr.InvalidReplicationFactor.Code, true},
		{"unregistered broker", -1, -1, [][]int32{{0, 7}}, kerr.InvalidReplicaAssignment.Code, true},
		{"broker twice", -1, -1, [][]int32{{1, 1}}, kerr.InvalidReplicaAssignment.Code, true},
		{"inconsistent replication factor", -1, -1, [][]int32{{0, 1}, {2}}, kerr.InvalidReplicaAssignment.Code, true},
	} {
		if rt := create(false, tc.np, tc.rf, tc.as...); rt.ErrorCode != tc.want || (rt.ErrorMessage == nil) == tc.hasMsg {
			t.Errorf("%s: error %d (%v), want %d", tc.what, rt.ErrorCode, rt.ErrorMessage, tc.want)
		}
	}
	if rt := create(true, -1, -1, []int32{2, 0}, []int32{0, 1}, []int32{1, 2}); rt.ErrorCode != 0 || rt.NumPartitions != 3 || rt.ReplicationFactor != 2 || rt.TopicID != [16]byte{} {
		t.Errorf("validate only: %+v", rt)
	}
	if _, ok := c.Controller().Partitions("man"); ok {
		t.Fatal("validate only created the topic")
	}
	rt := create(false, -1, -1, []int32{2, 0}, []int32{0, 1}, []int32{1, 2})
	id, _ := c.Controller().TopicID("man")
	if rt.ErrorCode != 0 || rt.NumPartitions != 3 || rt.ReplicationFactor != 2 || rt.TopicID != id {
		t.Fatalf("create: %+v (error message %v)", rt, rt.ErrorMessage)
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, "man")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range [][]int32{{2, 0}, {0, 1}, {1, 2}} {
		pd := md.Topics["man"].Partitions[int32(p)]
		if !slices.Equal(pd.Replicas, want) || pd.Leader != want[0] {
			t.Errorf("man-%d: replicas %v leader %d, want %v led by %d", p, pd.Replicas, pd.Leader, want, want[0])
		}
	}
	if err := c.Sync(ctx); err != nil { // the brokers serve the new partitions
		t.Fatal(err)
	}
	if rt := create(false, -1, -1, []int32{0}); rt.ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Errorf("again: %d, want TOPIC_ALREADY_EXISTS", rt.ErrorCode)
	}
	pcl := clustertest.NewClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var acks []clustertest.Ack
	for i := 0; i < 30; i++ {
		r := &kgo.Record{Topic: "man", Partition: int32(i % 3), Value: []byte{byte(i)}}
		if err := pcl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		acks = append(acks, clustertest.Ack{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
	}
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "man"))
	clustertest.CheckReplicasIdentical(t, c, "man", 3)
}
