package netfetch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/controller"
)

// consumeGroup reads n records of topic as a member of group, commits them and leaves.
func consumeGroup(t *testing.T, c *cluster.Cluster, group, topic string, n int) []*kgo.Record {
	t.Helper()
	// A short session: the LeaveGroup of the previous member may not be committed before
	// the cluster stops (its record is then truncated at the restart, as in Kafka), and that
	// member is then waited for until its session expires.
	cl := clustertest.NewClient(t, c, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(time.Second))
	ctx := clustertest.Context(t)
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("group %s: %d of %d records: %v", group, len(got), n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d: %v", tp, p, err) })
		got = append(got, fs.Records()...)
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group %s: commit: %v", group, err)
	}
	cl.Close()
	return got
}

// TestTopicIDs (KIP-516) over the wire with franz-go: CreateTopics and Metadata (ListTopics)
// hand out each topic's id, the same from every broker; Metadata and DeleteTopics resolve a
// topic by id (UNKNOWN_TOPIC_ID for an id no topic has); a kgo group consumer works; and the
// ids are the same after the whole cluster restarts on its data directory.
func TestTopicIDs(t *testing.T) {
	dir := t.TempDir()
	start := func() *cluster.Cluster {
		return clustertest.Start(t, 3, func(cfg *cluster.Config) {
			cfg.DataDir = dir
			cfg.AutoCreateTopics = false
			cfg.Controller.BrokerSessionTimeoutMs = 60000
		})
	}
	c := start()
	cl := clustertest.NewClient(t, c)
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	created := map[string]kadm.TopicID{}
	for _, name := range []string{"tid", "tid-other", "tid-gone"} {
		resp, err := adm.CreateTopic(ctx, 2, 3, nil, name)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ID == (kadm.TopicID{}) {
			t.Fatalf("CreateTopics %s: zero topic id", name)
		}
		want, _ := c.Controller().TopicID(name)
		if resp.ID != kadm.TopicID(want) {
			t.Errorf("CreateTopics %s: id %v, the controller's %v", name, resp.ID, want)
		}
		created[name] = resp.ID
	}
	if created["tid"] == created["tid-other"] {
		t.Fatal("two topics share an id")
	}
	// Every broker answers Metadata with the same ids.
	for _, id := range c.BrokerIDs() {
		bcl := clustertest.NewClient(t, c, kgo.SeedBrokers(c.Addr(id)))
		details, err := kadm.NewClient(bcl).ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range created {
			if got := details[name].ID; got != want {
				t.Errorf("broker %d: Metadata %s id %v, want %v", id, name, got, want)
			}
		}
	}
	// Metadata v12 by id, and an unknown id.
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	unknown := [16]byte{0x40, 15: 9}
	md.Topics = []kmsg.MetadataRequestTopic{{TopicID: created["tid-other"]}, {TopicID: unknown}}
	mresp := request[*kmsg.MetadataResponse](t, cl, md)
	var byID, unknownAnswered bool
	for _, mt := range mresp.Topics {
		switch mt.TopicID {
		case created["tid-other"]:
			byID = mt.ErrorCode == 0 && mt.Topic != nil && *mt.Topic == "tid-other" && len(mt.Partitions) == 2
		case unknown:
			unknownAnswered = mt.ErrorCode == kerr.UnknownTopicID.Code && mt.Topic == nil
		}
	}
	if len(mresp.Topics) != 2 || !byID || !unknownAnswered {
		t.Errorf("Metadata by a known and an unknown id: %+v", mresp.Topics)
	}
	// DeleteTopics by id.
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(6)
	dt.TimeoutMillis = 5000
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: created["tid-gone"]}}
	dresp := request[*kmsg.DeleteTopicsResponse](t, cl, dt)
	if len(dresp.Topics) != 1 || dresp.Topics[0].ErrorCode != 0 || dresp.Topics[0].Topic == nil || *dresp.Topics[0].Topic != "tid-gone" {
		t.Errorf("DeleteTopics by id: %+v", dresp.Topics)
	}
	if _, ok := c.Controller().Partitions("tid-gone"); ok {
		t.Error("tid-gone still exists after its deletion by id")
	}
	dresp = request[*kmsg.DeleteTopicsResponse](t, cl, dt)
	if len(dresp.Topics) != 1 || dresp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("DeleteTopics by the id of a deleted topic: %+v", dresp.Topics)
	}
	delete(created, "tid-gone")

	// A group consumer (kgo) reads and commits.
	if err := c.Sync(ctx); err != nil { // the brokers serve the new partitions
		t.Fatal(err)
	}
	clustertest.Produce(t, cl, "tid", "a", 30)
	if got := consumeGroup(t, c, "tid-group", "tid", 30); len(got) != 30 {
		t.Fatalf("group read %d records, want 30", len(got))
	}
	cl.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// The whole cluster restarts on its directory: the same ids, and the group goes on
	// from its commits.
	c = start()
	cl = clustertest.NewClient(t, c)
	adm = kadm.NewClient(cl)
	ctx2, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	details, err := adm.ListTopics(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range created {
		if got := details[name].ID; got != want {
			t.Errorf("after the restart: %s id %v, want %v", name, got, want)
		}
		if got, _ := c.Controller().TopicID(name); got != controller.TopicID(want) {
			t.Errorf("after the restart: controller id of %s %v, want %v", name, got, want)
		}
	}
	clustertest.Produce(t, cl, "tid", "b", 5)
	got := consumeGroup(t, c, "tid-group", "tid", 5)
	for _, r := range got {
		if string(r.Value[:1]) != "b" {
			t.Errorf("after the restart the group read %s-%d@%d %q, want only the 5 new records", r.Topic, r.Partition, r.Offset, r.Value)
		}
	}
	if _, err := adm.DeleteTopic(ctx2, "tid-none"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("delete of an unknown name: %v", err)
	}
}

// TestFetchByTopicID: Fetch v13 names topics by id: a known id is served (records, HW), an id
// no topic has is UNKNOWN_TOPIC_ID with the id echoed, a deleted topic's id too (even once
// the name is taken again); an incremental fetch session (KIP-227) works by id; and a kgo
// consumer, which picks v13, reads every record.
func TestFetchByTopicID(t *testing.T) {
	c := clustertest.Start(t, 1, nil)
	cl := clustertest.NewClient(t, c)
	if err := c.CreateTopic("fid", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	acks := clustertest.Produce(t, cl, "fid", "v", 40)
	id, _ := c.Controller().TopicID("fid")
	unknown := [16]byte{0x40, 15: 0x77}
	fetch := func(sessionID, epoch int32, topics ...[16]byte) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(13)
		req.ReplicaID, req.MaxBytes, req.SessionID, req.SessionEpoch = -1, 1<<20, sessionID, epoch
		for _, tid := range topics {
			ft := kmsg.NewFetchRequestTopic()
			ft.TopicID = tid
			for p := int32(0); p < 2; p++ {
				fp := kmsg.NewFetchRequestTopicPartition()
				fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = p, 1<<20, -1, -1
				ft.Partitions = append(ft.Partitions, fp)
			}
			req.Topics = append(req.Topics, ft)
		}
		return rawRequest[*kmsg.FetchResponse](t, c.Addr(0), req)
	}
	resp := fetch(0, 0, id, unknown)
	if resp.ErrorCode != 0 || len(resp.Topics) != 2 {
		t.Fatalf("Fetch v13: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			switch rt.TopicID {
			case id:
				if rp.ErrorCode != 0 || rp.HighWatermark <= 0 || len(rp.RecordBatches) == 0 {
					t.Errorf("fid-%d by id: error %d HW %d, %d bytes", rp.Partition, rp.ErrorCode, rp.HighWatermark, len(rp.RecordBatches))
				}
			case unknown:
				if rp.ErrorCode != kerr.UnknownTopicID.Code {
					t.Errorf("unknown id, partition %d: error %d, want UNKNOWN_TOPIC_ID", rp.Partition, rp.ErrorCode)
				}
			default:
				t.Errorf("response names topic id %v, asked for %v and %v", rt.TopicID, id, unknown)
			}
		}
	}
	// An incremental session by id: the next request names only the unknown id again; the
	// session's partitions (fetch offsets unchanged, so their records again) come by id, the
	// unknown id is answered again.
	if resp.SessionID == 0 {
		t.Fatal("no fetch session created")
	}
	inc := fetch(resp.SessionID, 1, unknown)
	answered := map[[16]byte]int16{}
	for _, rt := range inc.Topics {
		answered[rt.TopicID] = rt.Partitions[0].ErrorCode
	}
	if inc.ErrorCode != 0 || len(answered) != 2 || answered[id] != 0 || answered[unknown] != kerr.UnknownTopicID.Code {
		t.Errorf("incremental fetch: error %d, topics %v", inc.ErrorCode, answered)
	}
	// kgo consumes by id.
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "fid"))
	// Deleted and created again: the old id is unknown, the new one served.
	if err := c.Controller().DeleteTopic("fid"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic("fid", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	resp = fetch(0, -1, id)
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("the deleted topic's id: %+v", resp.Topics)
	}
	newID, _ := c.Controller().TopicID("fid")
	if resp = fetch(0, -1, newID); len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[0].TopicID != newID {
		t.Errorf("the new topic's id: %+v", resp.Topics)
	}
}
