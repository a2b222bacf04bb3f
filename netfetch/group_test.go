package netfetch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// groupCluster is a 3-broker cluster with a small __consumer_offsets and a short initial
// rebalance delay, so that group tests take seconds.
func groupCluster(t *testing.T) *cluster.Cluster {
	return clustertest.Start(t, 3, func(c *cluster.Config) {
		c.Group.OffsetsTopicNumPartitions = 5
		c.Group.InitialRebalanceDelayMs = 100
	})
}

// groupConsume reads with a kgo group consumer until want records arrived (or fails after
// 30 s), commits them, leaves the group and returns the values read.
func groupConsume(t *testing.T, c *cluster.Cluster, groupID, topic string, want int, opts ...kgo.Opt) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(strings.Split(c.Bootstrap(), ",")...),
		kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			cl.Close()
			t.Fatalf("group %s read %d of %d records", groupID, len(got), want)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		cl.Close()
		t.Fatalf("commit: %v", err)
	}
	cl.Close() // LeaveGroup
	return got
}

func TestGroupResumesAtCommittedOffsetsAfterCoordinatorKilled(t *testing.T) {
	c := groupCluster(t)
	if err := c.CreateTopic("gt", 3, 3, nil); err != nil {
		t.Fatal(err)
	}
	pcl := clustertest.NewClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()))
	clustertest.Produce(t, pcl, "gt", "first", 300)
	// The coordinator answers LeaveGroup before the group's now empty metadata is written, as
	// Kafka's classic group coordinator does (storeGroup after the leave's response); when the kill below lands in between, the next coordinator loads the group
	// with the member that left, and the new member's join waits for its session to expire. A
	// 6 s session (group.min.session.timeout.ms) keeps that wait inside the consume's 30 s.
	session := kgo.SessionTimeout(6 * time.Second)
	if got := groupConsume(t, c, "g1", "gt", 300, session); len(got) != 300 {
		t.Fatalf("first run read %d records, want 300", len(got))
	}
	coord, err := group.Locate(c.Controller(), c.Config().Group, "g1")
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before, err := adm.FetchOffsets(ctx, "g1")
	if err != nil || before.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, before.Error())
	}
	if err := c.KillBroker(coord); err != nil {
		t.Fatal(err)
	}
	if next, err := group.Locate(c.Controller(), c.Config().Group, "g1"); err != nil || next == coord {
		t.Fatalf("coordinator after killing broker %d: %d, %v", coord, next, err)
	}
	clustertest.Produce(t, pcl, "gt", "second", 100)
	got := groupConsume(t, c, "g1", "gt", 100, session)
	for _, v := range got {
		if !strings.HasPrefix(v, "second-") {
			t.Fatalf("after the coordinator moved the group read %q again: committed offsets lost", v)
		}
	}
	// A new client (the old one cached the dead coordinator's connection), seeded with the
	// running brokers only: a seed that refuses connections fails an admin request.
	var alive []string
	for _, id := range c.BrokerIDs() {
		if id != coord {
			alive = append(alive, c.Addr(id))
		}
	}
	adm = kadm.NewClient(clustertest.NewClient(t, c, kgo.SeedBrokers(alive...)))
	after, err := adm.FetchOffsets(ctx, "g1")
	if err != nil || after.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, after.Error())
	}
	var sumBefore, sumAfter int64
	before.Each(func(o kadm.OffsetResponse) { sumBefore += o.At })
	after.Each(func(o kadm.OffsetResponse) { sumAfter += o.At })
	if sumBefore != 300 || sumAfter != 400 {
		t.Fatalf("committed offsets sum to %d then %d, want 300 then 400", sumBefore, sumAfter)
	}
}

func TestGroupAdminListDescribeDelete(t *testing.T) {
	c := groupCluster(t)
	if err := c.CreateTopic("ga", 2, 3, nil); err != nil {
		t.Fatal(err)
	}
	clustertest.Produce(t, clustertest.NewClient(t, c), "ga", "v", 20)
	groupConsume(t, c, "ga-group", "ga", 20)
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := listed["ga-group"]; !ok || g.State != "Empty" || g.ProtocolType != "consumer" {
		t.Fatalf("ListGroups: %+v, want ga-group Empty consumer", listed)
	}
	described, err := adm.DescribeGroups(ctx, "ga-group")
	if err != nil || described.Error() != nil {
		t.Fatalf("DescribeGroups: %v %v", err, described.Error())
	}
	if d := described["ga-group"]; d.State != "Empty" {
		t.Fatalf("DescribeGroups state %q, want Empty", d.State)
	}
	deleted, err := adm.DeleteGroups(ctx, "ga-group", "no-such-group")
	if err != nil {
		t.Fatal(err)
	}
	if e := deleted["ga-group"].Err; e != nil {
		t.Fatalf("delete ga-group: %v", e)
	}
	if e := deleted["no-such-group"].Err; !errors.Is(e, kerr.GroupIDNotFound) {
		t.Fatalf("delete an unknown group: %v, want GROUP_ID_NOT_FOUND", e)
	}
	offs, err := adm.FetchOffsets(ctx, "ga-group")
	if err != nil || len(offs) != 0 {
		t.Fatalf("offsets of a deleted group: %v %v", offs, err)
	}
	// Metadata lists __consumer_offsets as internal; kadm hides internal topics.
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := md.Topics[group.OffsetsTopic]; !ok || !d.IsInternal {
		t.Fatalf("metadata of %s: %+v (present %v), want is_internal", group.OffsetsTopic, d, ok)
	}
	if topics, _ := adm.ListTopics(ctx); topics.Has(group.OffsetsTopic) {
		t.Fatalf("kadm ListTopics shows %s, want it hidden as internal", group.OffsetsTopic)
	}
}

func TestProduceLimitsAndOldFormats(t *testing.T) {
	c := groupCluster(t)
	if err := c.CreateTopic("big", 1, 3, map[string]string{"max.message.bytes": "2000"}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic("plain", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	cl := clustertest.NewClient(t, c, kgo.ProducerBatchMaxBytes(8<<20), kgo.BrokerMaxWriteBytes(16<<20), kgo.RecordRetries(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "plain", Value: make([]byte, 3<<20)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("3 MiB record: %v, want MESSAGE_TOO_LARGE (message.max.bytes 1048588)", err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: make([]byte, 3000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("3000-byte record to a topic with max.message.bytes 2000: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: make([]byte, 1000)}).FirstErr(); err != nil {
		t.Fatalf("1000-byte record: %v", err)
	}
	rc := kafkatest.Dial(t, c.Addr(0))
	// Produce v2 with a magic 1 message set: refused with Kafka's error code, connection open.
	old := kafkatest.Batch(0)
	old[16] = 1
	req := kafkatest.NewProduce("plain", 1, old)
	req.SetVersion(2)
	resp := kafkatest.NewProduceResp()
	rc.RoundTrip(req, resp)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnsupportedForMessageFormat.Code {
		t.Fatalf("Produce v2 magic 1: error %d, want UNSUPPORTED_FOR_MESSAGE_FORMAT", code)
	}
	// Produce to the internal topic.
	req = kafkatest.NewProduce(group.OffsetsTopic, 1, kafkatest.Batch(0))
	req.SetVersion(7)
	rc.RoundTrip(req, resp)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Fatalf("Produce to %s: error %d, want INVALID_TOPIC_EXCEPTION", group.OffsetsTopic, code)
	}
	// Metadata v0 (kafka-python's probe): an empty list means every topic.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.SetVersion(0)
	mresp := kmsg.NewPtrMetadataResponse()
	rc.RoundTrip(mreq, mresp)
	if len(mresp.Topics) < 2 || len(mresp.Brokers) != 3 {
		t.Fatalf("Metadata v0: %d topics, %d brokers", len(mresp.Topics), len(mresp.Brokers))
	}
}

func TestCompressedBatchesServedIntact(t *testing.T) {
	c := groupCluster(t)
	codecs := map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for name, codec := range codecs {
		topic := "z-" + name
		if err := c.CreateTopic(topic, 1, 3, nil); err != nil {
			t.Fatal(err)
		}
		cl := clustertest.NewClient(t, c, kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(50*time.Millisecond))
		acks := clustertest.Produce(t, cl, topic, name+strings.Repeat("x", 200), 50)
		got := clustertest.ConsumeAll(t, c, topic)
		clustertest.CheckNoLoss(t, acks, got)
		// The stored batch is the producer's compressed one, CRC intact.
		st, _ := c.Controller().Partition(topic, 0)
		r, ok := c.Broker(st.Leader).Replica(topic, 0)
		if !ok {
			t.Fatalf("broker 0 hosts no %s-0", topic)
		}
		sl, err := r.Read(0, r.HW(), 16<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := sl.ReadAll(nil)
		sl.Release()
		if err != nil || len(raw) == 0 {
			t.Fatalf("%s: read %d bytes: %v", topic, len(raw), err)
		}
		if err := records.Split(raw, func(b []byte, h records.Header) error {
			if h.Compression() == records.CompressionNone {
				return fmt.Errorf("batch at %d stored uncompressed", h.BaseOffset)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestParkedJoinGroup: a JoinGroup waiting for the rebalance parks only its own connection
// (another connection's requests are answered meanwhile), and closing the server releases it.
func TestParkedJoinGroup(t *testing.T) {
	c := clustertest.Start(t, 1, func(cfg *cluster.Config) {
		cfg.Group.OffsetsTopicNumPartitions = 1
		cfg.Group.InitialRebalanceDelayMs = 60000 // the join waits a minute
	})
	addr := c.Addr(0)
	// FindCoordinator creates __consumer_offsets; then wait until broker 0 has loaded it.
	rc := kafkatest.Dial(t, addr)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(2)
	fc.CoordinatorKey = "parked"
	rc.RoundTrip(fc, kmsg.NewPtrFindCoordinatorResponse())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Groups(0).WaitReady(ctx, "parked"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(3) // no MEMBER_ID_REQUIRED: a new member parks at once
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "parked", 10000, 60000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1}}}
	parked := kafkatest.Dial(t, addr)
	parked.Send(join)
	// Another connection is served while the JoinGroup waits.
	other := kafkatest.Dial(t, addr)
	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.SetVersion(5)
	desc.Groups = []string{"parked"}
	dr := kmsg.NewPtrDescribeGroupsResponse()
	for {
		other.RoundTrip(desc, dr)
		if dr.Groups[0].State == "PreparingRebalance" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group state %q, want PreparingRebalance with the JoinGroup parked", dr.Groups[0].State)
		}
	}
	done := make(chan error, 1)
	go func() { _, _, err := parked.Recv(); done <- err }()
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("parked JoinGroup released %v after Close", d)
		}
		t.Logf("parked JoinGroup ended with %v on server close", err)
	case <-time.After(10 * time.Second):
		t.Fatal("parked JoinGroup still waiting 10 s after the server closed")
	}
}
