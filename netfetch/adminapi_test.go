package netfetch_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/internal/kafkatest"
	"github.com/isrbench/isrbench/netfetch"
)

// request sends req to any broker through cl and fails the test on a transport error.
func request[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Request(clustertest.Context(t), req)
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp.(R)
}

// rawRequest sends req at exactly its version to the broker at addr (kgo would pick its own
// version) and returns the response.
func rawRequest[R kmsg.Response](t *testing.T, addr string, req kmsg.Request) R {
	t.Helper()
	resp := req.ResponseKind().(R)
	kafkatest.Dial(t, addr).RoundTrip(req, resp)
	return resp
}

func TestDeleteTopicsAPI(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.AutoCreateTopics = false })
	cl := clustertest.NewClient(t, c)
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	for _, name := range []string{"del-a", "del-b", "keep"} {
		if err := c.CreateTopic(name, 2, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.Produce(t, cl, "del-a", "old", 50)
	rs, err := adm.DeleteTopics(ctx, "del-a", "del-b", "nope")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]error{"del-a": nil, "del-b": nil, "nope": kerr.UnknownTopicOrPartition} {
		if got := rs[name].Err; !errors.Is(got, want) && got != want {
			t.Errorf("delete %s: %v, want %v", name, got, want)
		}
	}
	// The response came after the brokers applied the deletion: no replica, no directory.
	for _, id := range c.BrokerIDs() {
		for p := int32(0); p < 2; p++ {
			if _, ok := c.Broker(id).Replica("del-a", p); ok {
				t.Errorf("broker %d still hosts del-a-%d", id, p)
			}
			if _, err := os.Stat(filepath.Join(c.DataDir(), "broker-"+strconv.Itoa(int(id)), "del-a-"+strconv.Itoa(int(p)))); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("broker %d: del-a-%d directory: %v", id, p, err)
			}
		}
	}
	md, err := adm.Metadata(ctx, "del-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := md.Topics["del-a"].Err; !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("metadata of a deleted topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	// Duplicates, topic ids, both or neither: Kafka's INVALID_REQUEST / UNKNOWN_TOPIC_ID.
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	req.TimeoutMillis = 5000
	keep, id := "keep", [16]byte{1}
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: &keep}, {Topic: &keep}, {TopicID: id}, {Topic: kmsg.StringPtr("x"), TopicID: id}, {}}
	resp := request[*kmsg.DeleteTopicsResponse](t, cl, req)
	want := []int16{kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.UnknownTopicID.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
	for i, rt := range resp.Topics {
		if rt.ErrorCode != want[i] || rt.ErrorMessage == nil {
			t.Errorf("entry %d: error %d (%v), want %d with a message", i, rt.ErrorCode, rt.ErrorMessage, want[i])
		}
	}
	if _, ok := c.Controller().Partitions("keep"); !ok {
		t.Fatal("a refused (duplicate) deletion deleted the topic")
	}
	// v0 (kafka-python, librdkafka) by name.
	req0 := kmsg.NewPtrDeleteTopicsRequest()
	req0.SetVersion(0)
	req0.TopicNames = []string{"keep"}
	req0.TimeoutMillis = 5000
	if resp := rawRequest[*kmsg.DeleteTopicsResponse](t, c.Addr(2), req0); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Errorf("DeleteTopics v0: %+v", resp.Topics)
	}
	// A deleted name can be created again: a new, empty topic.
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "del-a"); err != nil {
		t.Fatal(err)
	}
	acks := clustertest.Produce(t, clustertest.NewClient(t, c), "del-a", "new", 10) // a new client: cl saw 2 partitions
	got := clustertest.ConsumeAll(t, c, "del-a")
	clustertest.CheckNoLoss(t, acks, got)
	if len(got[0]) != 10 {
		t.Errorf("re-created del-a holds %d records, want the 10 new ones", len(got[0]))
	}
}

func TestCreatePartitionsAPI(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	cl := clustertest.NewClient(t, c)
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	if err := c.CreateTopic("cp", 2, 2, nil); err != nil {
		t.Fatal(err)
	}
	if rs, err := adm.ValidateUpdatePartitions(ctx, 6, "cp"); err != nil || rs["cp"].Err != nil {
		t.Fatalf("validate only: %v %v", err, rs["cp"].Err)
	}
	if ps, _ := c.Controller().Partitions("cp"); len(ps) != 2 {
		t.Fatalf("validate only added partitions: %d", len(ps))
	}
	rs, err := adm.UpdatePartitions(ctx, 4, "cp")
	if err != nil || rs["cp"].Err != nil {
		t.Fatalf("update partitions: %v %v", err, rs["cp"].Err)
	}
	for _, tc := range []struct {
		count int
		want  error
	}{{4, kerr.InvalidPartitions}, {3, kerr.InvalidPartitions}} {
		if rs, err := adm.UpdatePartitions(ctx, tc.count, "cp"); err != nil || !errors.Is(rs["cp"].Err, tc.want) {
			t.Errorf("to %d: %v %v, want %v", tc.count, err, rs["cp"].Err, tc.want)
		}
	}
	if rs, _ := adm.UpdatePartitions(ctx, 3, "nope"); !errors.Is(rs["nope"].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", rs["nope"].Err)
	}
	// A manual assignment (v0, as kafka-python sends it) and a bad one.
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(0)
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "cp", 5
	rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{2, 0}}}
	bad := kmsg.NewCreatePartitionsRequestTopic()
	bad.Topic, bad.Count = "bad", 1
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
	if resp := rawRequest[*kmsg.CreatePartitionsResponse](t, c.Addr(0), req); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("manual assignment: %d %v", resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
	}
	if st, _ := c.Controller().Partition("cp", 4); !slices.Equal(st.Replicas, []int32{2, 0}) || st.Leader != 2 {
		t.Errorf("cp-4 %v, want replicas [2 0] led by 2", st)
	}
	rt.Count = 6
	rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{2, 2}}}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
	if resp := request[*kmsg.CreatePartitionsResponse](t, cl, req); resp.Topics[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("duplicate broker in an assignment: %d, want INVALID_REPLICA_ASSIGNMENT", resp.Topics[0].ErrorCode)
	}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{bad, bad}
	if resp := request[*kmsg.CreatePartitionsResponse](t, cl, req); resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("topic named twice: %d, want INVALID_REQUEST", resp.Topics[0].ErrorCode)
	}
	// Every partition, old and new, takes and serves records.
	pcl := clustertest.NewClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	var acks []clustertest.Ack
	for i := 0; i < 50; i++ {
		r := &kgo.Record{Topic: "cp", Partition: int32(i % 5), Value: []byte(fmt.Sprintf("x-%d", i))}
		if err := pcl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		acks = append(acks, clustertest.Ack{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
	}
	got := clustertest.ConsumeAll(t, c, "cp")
	clustertest.CheckNoLoss(t, acks, got)
	if len(got) != 5 {
		t.Errorf("records on %d partitions, want 5", len(got))
	}
	clustertest.CheckReplicasIdentical(t, c, "cp", 5)
}

func TestDescribeConfigsSourcesAndSynonyms(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		if err := cfg.Set("min.insync.replicas", "2"); err != nil {
			t.Fatal(err)
		}
	})
	cl := clustertest.NewClient(t, c)
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	if err := c.CreateTopic("dc", 1, 3, map[string]string{"retention.bytes": "1000"}); err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "dc")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("dc", nil)
	if len(rc.Configs) != len(controller.TopicConfigDefs()) {
		t.Errorf("topic describes %d configs, want every one (%d)", len(rc.Configs), len(controller.TopicConfigDefs()))
	}
	check := func(cfg kadm.Config, value string, source kmsg.ConfigSource, synonyms ...kmsg.ConfigSource) {
		t.Helper()
		var got []kmsg.ConfigSource
		for _, s := range cfg.Synonyms {
			got = append(got, s.Source)
		}
		if cfg.MaybeValue() != value || cfg.Source != source || !slices.Equal(got, synonyms) {
			t.Errorf("%s = %q source %v synonyms %v; want %q %v %v", cfg.Key, cfg.MaybeValue(), cfg.Source, got, value, source, synonyms)
		}
	}
	check(clustertest.ConfigOf(t, rcs, "dc", "retention.bytes"), "1000", kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigSourceDefaultConfig)
	check(clustertest.ConfigOf(t, rcs, "dc", "min.insync.replicas"), "2", kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceDefaultConfig)
	check(clustertest.ConfigOf(t, rcs, "dc", "retention.ms"), "604800000", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigSourceDefaultConfig)
	check(clustertest.ConfigOf(t, rcs, "dc", "cleanup.policy"), "delete", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigSourceDefaultConfig)

	// Dynamic configs: the cluster-wide default, then broker 1's own.
	set := func(v string) *string { return &v }
	if rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: set("5000")}}); err != nil || rs[0].Err != nil {
		t.Fatalf("set the cluster default: %v %+v", err, rs)
	}
	if rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: set("7000")}}, 1); err != nil || rs[0].Err != nil {
		t.Fatalf("set broker 1's: %v %+v", err, rs)
	}
	b1 := kadm.NewClient(clustertest.NewClient(t, c, kgo.SeedBrokers(c.Addr(1))))
	// Topic configs are described by the broker asked: broker 1 sees its own value.
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "dc", []string{"retention.ms"}
	req.Resources = append(req.Resources, rr)
	for id, want := range map[int32]string{0: "5000", 1: "7000"} {
		resp, err := req.RequestWith(ctx, clustertest.NewClient(t, c, kgo.SeedBrokers(c.Addr(id))).Broker(int(id)))
		if err != nil {
			t.Fatal(err)
		}
		r := resp.Resources[0]
		if len(r.Configs) != 1 || r.Configs[0].Value == nil || *r.Configs[0].Value != want {
			t.Errorf("broker %d describes dc retention.ms as %+v, want %s", id, r.Configs, want)
		}
	}
	bcs, err := b1.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	check(clustertest.ConfigOf(t, bcs, "1", "log.retention.ms"), "7000", kmsg.ConfigSourceDynamicBrokerConfig,
		kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDefaultConfig)
	check(clustertest.ConfigOf(t, bcs, "1", "broker.id"), "1", kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceDefaultConfig)
	check(clustertest.ConfigOf(t, bcs, "1", "replica.fetch.wait.max.ms"), "500", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigSourceDefaultConfig)
	// The cluster-wide resource lists the dynamic defaults only.
	dcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := dcs.On("", nil); len(rc.Configs) != 1 || rc.Configs[0].Key != "log.retention.ms" || rc.Configs[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("the cluster-wide resource describes %+v", rc.Configs)
	}
	// read_only follows Kafka's dynamic update modes; v0 answers is_default.
	raw := kmsg.NewPtrDescribeConfigsRequest()
	raw.SetVersion(0)
	rr = kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	rr.ConfigNames = []string{"num.replica.fetchers", "replica.lag.time.max.ms", "log.retention.ms"}
	raw.Resources = append(raw.Resources, rr)
	for _, cfg := range rawRequest[*kmsg.DescribeConfigsResponse](t, c.Addr(1), raw).Resources[0].Configs {
		wantRO := cfg.Name == "replica.lag.time.max.ms"
		wantDefault := cfg.Name != "log.retention.ms"
		if cfg.ReadOnly != wantRO || cfg.IsDefault != wantDefault {
			t.Errorf("v0 %s: read_only %v is_default %v, want %v %v", cfg.Name, cfg.ReadOnly, cfg.IsDefault, wantRO, wantDefault)
		}
	}
	// Another broker's resource is INVALID_REQUEST; unknown topics UNKNOWN_TOPIC_OR_PARTITION.
	rr.ResourceName = "2"
	raw.Resources = []kmsg.DescribeConfigsRequestResource{rr}
	if resp, err := raw.RequestWith(ctx, clustertest.NewClient(t, c).Broker(1)); err != nil || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("broker 1 asked for broker 2's configs: %v %+v", err, resp)
	}
	if rcs, _ := adm.DescribeTopicConfigs(ctx, "nope"); !errors.Is(rcs[0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", rcs[0].Err)
	}
}

func TestAlterConfigsAPI(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	cl := clustertest.NewClient(t, c)
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	if err := c.CreateTopic("ac", 1, 3, map[string]string{"retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	v := func(s string) *string { return &s }
	one := func(rs kadm.AlterConfigsResponses, err error) error {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 {
			t.Fatalf("%d responses", len(rs))
		}
		return rs[0].Err
	}
	// Topic configs: incremental SET/DELETE, validate only, legacy replace.
	if err := one(adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: v("2")}}, "ac")); err != nil {
		t.Fatal(err)
	}
	if got := c.Controller().TopicConfig("ac"); len(got) != 1 {
		t.Fatalf("validate only changed the topic: %v", got)
	}
	if err := one(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: v("2")}, {Op: kadm.DeleteConfig, Name: "retention.ms"}}, "ac")); err != nil {
		t.Fatal(err)
	}
	if got := c.Controller().TopicConfig("ac"); len(got) != 1 || got["min.insync.replicas"] != "2" {
		t.Errorf("after the incremental alter: %v", got)
	}
	for _, b := range c.BrokerIDs() {
		if r, _ := c.Broker(b).Replica("ac", 0); r.Config().MinInsyncReplicas != 2 {
			t.Errorf("broker %d has not applied min.insync.replicas=2 when the response came", b)
		}
	}
	if err := one(adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: v("99")}}, "ac")); err != nil {
		t.Fatal(err)
	}
	if got := c.Controller().TopicConfig("ac"); len(got) != 1 || got["retention.bytes"] != "99" {
		t.Errorf("after the legacy alter (replace): %v", got)
	}
	for _, tc := range []struct {
		name string
		cfg  []kadm.AlterConfig
		want error
	}{
		{"bad value", []kadm.AlterConfig{{Name: "min.insync.replicas", Value: v("9")}}, kerr.InvalidConfig},
		{"unknown key", []kadm.AlterConfig{{Name: "no.such", Value: v("1")}}, kerr.InvalidConfig},
		{"append to a non-list", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: v("1")}}, kerr.InvalidConfig},
		{"append to cleanup.policy", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: v("compact")}}, kerr.InvalidConfig},
		{"null value", []kadm.AlterConfig{{Name: "retention.ms"}}, kerr.InvalidRequest},
		{"key twice", []kadm.AlterConfig{{Name: "retention.ms", Value: v("1")}, {Name: "retention.ms", Value: v("2")}}, kerr.InvalidRequest},
	} {
		if err := one(adm.AlterTopicConfigs(ctx, tc.cfg, "ac")); !errors.Is(err, tc.want) {
			t.Errorf("topic %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := one(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: v("delete")}}, "ac")); err != nil {
		t.Errorf("append delete to cleanup.policy (already delete): %v", err)
	}
	// Broker configs: dynamic ones change, read-only ones are refused as Kafka refuses them.
	for _, tc := range []struct {
		name    string
		cfg     []kadm.AlterConfig
		brokers []int32
		want    error
	}{
		{"read-only", []kadm.AlterConfig{{Name: "replica.fetch.wait.max.ms", Value: v("10")}}, nil, kerr.InvalidRequest},
		{"unknown", []kadm.AlterConfig{{Name: "no.such.config", Value: v("1")}}, nil, kerr.InvalidRequest},
		{"more than double", []kadm.AlterConfig{{Name: "num.replica.fetchers", Value: v("3")}}, nil, kerr.InvalidRequest},
		{"bad value", []kadm.AlterConfig{{Name: "message.max.bytes", Value: v("-5")}}, nil, kerr.InvalidRequest},
		{"unclean per broker", []kadm.AlterConfig{{Name: "unclean.leader.election.enable", Value: v("true")}}, []int32{1}, kerr.InvalidRequest},
		{"append to a non-list", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "message.max.bytes", Value: v("1")}}, nil, kerr.InvalidConfig},
	} {
		if err := one(adm.AlterBrokerConfigs(ctx, tc.cfg, tc.brokers...)); !errors.Is(err, tc.want) {
			t.Errorf("broker %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// A per-broker resource sent to another broker is INVALID_REQUEST (raw request to broker 0).
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "num.replica.fetchers", Value: v("2")}}
	req.Resources = append(req.Resources, rr, rr)
	if resp, err := req.RequestWith(ctx, cl.Broker(0)); err != nil || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("a resource named twice: %v %+v", err, resp)
	}
	req.Resources = req.Resources[:1]
	if resp, err := req.RequestWith(ctx, cl.Broker(0)); err != nil || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("broker 0 asked to change broker 2's configs: %v %+v", err, resp)
	}
	if err := one(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "message.max.bytes", Value: v("2000")}, {Name: "unclean.leader.election.enable", Value: v("true")}})); err != nil {
		t.Fatal(err)
	}
	// message.max.bytes applies to the next produce once the brokers have applied it.
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 3000)
	for i := range payload {
		payload[i] = byte(i*7919>>3) ^ byte(i) // does not compress below 2000 bytes
	}
	big := kgo.SliceRecord(payload)
	big.Topic = "ac"
	pcl := clustertest.NewClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(0), kgo.ProducerBatchMaxBytes(1<<20))
	if perr := pcl.ProduceSync(ctx, big).FirstErr(); !errors.Is(perr, kerr.MessageTooLarge) {
		t.Errorf("a 3000-byte record with message.max.bytes 2000: %v, want MESSAGE_TOO_LARGE", perr)
	}
	// The legacy AlterConfigs replaces the cluster-wide set.
	if err := one(adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "log.retention.bytes", Value: v("12345")}})); err != nil {
		t.Fatal(err)
	}
	if got := c.Controller().BrokerConfigs(""); len(got) != 1 || got["log.retention.bytes"] != "12345" {
		t.Errorf("after a legacy alter the defaults are %v", got)
	}
}

func TestElectLeadersAPI(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	cl := clustertest.NewClient(t, c)
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	if err := c.CreateTopic("el", 3, 3, nil); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition("el", 0)
	pref := st.Replicas[0]
	if _, err := c.Controller().TransferLeader("el", 0, st.Replicas[1]); err != nil {
		t.Fatal(err)
	}
	set := kadm.TopicsSet{}
	set.Add("el", 0, 1)
	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	if rs["el"][0].Err != nil || !errors.Is(rs["el"][1].Err, kerr.ElectionNotNeeded) {
		t.Errorf("preferred election: p0 %v, p1 %v (want ok, ELECTION_NOT_NEEDED)", rs["el"][0].Err, rs["el"][1].Err)
	}
	if st, _ := c.Controller().Partition("el", 0); st.Leader != pref {
		t.Errorf("el-0 led by %d, want its preferred replica %d", st.Leader, pref)
	}
	if r, _ := c.Broker(pref).Replica("el", 0); !r.IsLeader() {
		t.Error("the preferred replica does not lead yet when the response came")
	}
	// Every partition (null topics): the ones needing no election are left out.
	if rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil); err != nil || len(rs["el"]) != 0 {
		t.Errorf("all partitions, all balanced: %v %v", rs, err)
	}
	if rs, _ := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, set); !errors.Is(rs["el"][0].Err, kerr.ElectionNotNeeded) {
		t.Errorf("unclean election of a led partition: %v, want ELECTION_NOT_NEEDED", rs["el"][0].Err)
	}
	unknown := kadm.TopicsSet{}
	unknown.Add("el", 7)
	if rs, _ := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, unknown); !errors.Is(rs["el"][7].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown partition: %v", rs["el"][7].Err)
	}
	// The preferred replica fenced: PREFERRED_LEADER_NOT_AVAILABLE.
	if _, err := c.Controller().TransferLeader("el", 0, st.Replicas[1]); err != nil {
		t.Fatal(err)
	}
	if err := c.KillBroker(pref); err != nil {
		t.Fatal(err)
	}
	one := kadm.TopicsSet{}
	one.Add("el", 0)
	if rs, _ := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, one); !errors.Is(rs["el"][0].Err, kerr.PreferredLeaderNotAvailable) {
		t.Errorf("preferred replica down: %v, want PREFERRED_LEADER_NOT_AVAILABLE", rs["el"][0].Err)
	}
	// An unknown election type is a top-level INVALID_REQUEST.
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = 5
	if resp := request[*kmsg.ElectLeadersResponse](t, cl, req); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("election type 5: %d, want INVALID_REQUEST", resp.ErrorCode)
	}
}

// An UNCLEAN election elects an out-of-sync replica of an offline partition even with
// unclean.leader.election.enable false, as Kafka's ElectLeaders does.
func TestElectLeadersUnclean(t *testing.T) {
	c := clustertest.Start(t, 2, nil)
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	ctx := clustertest.Context(t)
	if err := c.CreateTopic("u", 1, 2, nil); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition("u", 0)
	follower := st.Replicas[1]
	wait := clustertest.WatchPartition(t, c, follower, "u", 0)
	if err := c.KillBroker(follower); err != nil {
		t.Fatal(err)
	}
	wait("follower out of the ISR", func(s controller.PartitionState) bool { return len(s.ISR) == 1 })
	if err := c.KillBroker(st.Leader); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartBroker(follower); err != nil {
		t.Fatal(err)
	}
	one := kadm.TopicsSet{}
	one.Add("u", 0)
	if rs, _ := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, one); !errors.Is(rs["u"][0].Err, kerr.PreferredLeaderNotAvailable) {
		t.Errorf("preferred election of an offline partition: %v", rs["u"][0].Err)
	}
	rs, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, one)
	if err != nil || rs["u"][0].Err != nil {
		t.Fatalf("unclean election: %v %v", err, rs["u"][0].Err)
	}
	if st, _ := c.Controller().Partition("u", 0); st.Leader != follower {
		t.Errorf("u-0 %v, want led by %d", st, follower)
	}
	if s := c.Controller().Stats(); s.UncleanElections != 1 {
		t.Errorf("unclean elections %d, want 1", s.UncleanElections)
	}
}

func TestDescribeClusterAPI(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	cl := clustertest.NewClient(t, c)
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeClusterAuthorizedOperations = true
	resp := request[*kmsg.DescribeClusterResponse](t, cl, req)
	if resp.ErrorCode != 0 || resp.ClusterID != netfetch.ClusterID || resp.ControllerID != 0 || len(resp.Brokers) != 3 || resp.ClusterAuthorizedOperations != netfetch.ClusterOperations {
		t.Fatalf("DescribeCluster: %+v", resp)
	}
	for i, b := range resp.Brokers {
		if b.NodeID != int32(i) || b.Host+":"+strconv.Itoa(int(b.Port)) != c.Addr(int32(i)) || b.IsFenced {
			t.Errorf("broker %d: %+v, want %s", i, b, c.Addr(int32(i)))
		}
	}
	if err := c.KillBroker(0); err != nil {
		t.Fatal(err)
	}
	req.IncludeClusterAuthorizedOperations = false
	if resp := request[*kmsg.DescribeClusterResponse](t, cl, req); len(resp.Brokers) != 2 || resp.ControllerID != 1 {
		t.Errorf("with broker 0 fenced: brokers %+v controller %d", resp.Brokers, resp.ControllerID)
	}
	req.IncludeFencedBrokers = true
	if resp := request[*kmsg.DescribeClusterResponse](t, cl, req); len(resp.Brokers) != 3 || !resp.Brokers[0].IsFenced {
		t.Errorf("include_fenced_brokers: %+v", resp.Brokers)
	}
	req.EndpointType = 2
	if resp := request[*kmsg.DescribeClusterResponse](t, cl, req); resp.ErrorCode != kerr.MismatchedEndpointType.Code {
		t.Errorf("endpoint type CONTROLLER: %d, want MISMATCHED_ENDPOINT_TYPE", resp.ErrorCode)
	}
	req.SetVersion(0)
	if resp := rawRequest[*kmsg.DescribeClusterResponse](t, c.Addr(1), req); resp.ErrorCode != 0 || len(resp.Brokers) != 2 {
		t.Errorf("v0: %+v", resp)
	}
}
