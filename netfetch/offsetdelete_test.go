package netfetch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/group"
)

// TestOffsetDeleteAPI: kadm's DeleteOffsets against a group with a kgo member subscribed to
// one topic: that topic's partitions are GROUP_SUBSCRIBED_TO_TOPIC, another topic's offsets
// go, an unknown partition is UNKNOWN_TOPIC_OR_PARTITION; once the member left (Empty) the
// subscribed topic's go too, and the group without offsets is gone; an unknown group is
// GROUP_ID_NOT_FOUND.
func TestOffsetDeleteAPI(t *testing.T) {
	c := clustertest.Start(t, 1, func(cfg *cluster.Config) { cfg.Group.InitialRebalanceDelayMs = 0 })
	cl := clustertest.NewClient(t, c)
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	for _, name := range []string{"od-a", "od-b"} {
		if err := c.CreateTopic(name, 2, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := group.EnsureOffsetsTopic(c.Controller(), c.Config().Group); err != nil {
		t.Fatal(err)
	}
	if err := c.Groups(0).WaitReady(ctx, "od"); err != nil { // the coordinator has loaded
		t.Fatal(err)
	}
	clustertest.Produce(t, cl, "od-a", "v", 20)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "od-b", Partition: 0, At: 1, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "od-b", Partition: 1, At: 1, LeaderEpoch: -1})
	if rs, err := adm.CommitOffsets(ctx, "od", os); err != nil || rs.Error() != nil {
		t.Fatalf("commit od-b while the group is empty: %v %v", err, rs.Error())
	}
	member := clustertest.NewClient(t, c, kgo.ConsumerGroup("od"), kgo.ConsumeTopics("od-a"), kgo.FetchMaxWait(100*time.Millisecond))
	for n := 0; n < 20; {
		fs := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		n += len(fs.Records())
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := adm.DeleteOffsets(ctx, "od", kadm.TopicsSet{"od-a": {0: {}}, "od-b": {0: {}}, "od-none": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic string
		want  error
	}{{"od-a", kerr.GroupSubscribedToTopic}, {"od-b", nil}, {"od-none", kerr.UnknownTopicOrPartition}} {
		if got, ok := rs.Lookup(tc.topic, 0); !ok || !errors.Is(got, tc.want) && got != tc.want {
			t.Errorf("delete %s-0 from the stable group: %v (answered %v), want %v", tc.topic, got, ok, tc.want)
		}
	}
	committed := func() map[string]int {
		t.Helper()
		ors, err := adm.FetchOffsets(ctx, "od")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		ors.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				out[o.Topic]++
			}
		})
		return out
	}
	if got := committed(); got["od-a"] != 2 || got["od-b"] != 1 {
		t.Errorf("committed partitions per topic %v, want od-a 2, od-b 1", got)
	}
	member.Close() // leaves: the group is Empty
	rs, err = adm.DeleteOffsets(ctx, "od", kadm.TopicsSet{"od-a": {0: {}, 1: {}}, "od-b": {1: {}}})
	if err != nil || rs.Error() != nil {
		t.Fatalf("delete from the empty group: %v %v", err, rs.Error())
	}
	if got := committed(); len(got) != 0 {
		t.Errorf("committed after deleting every offset: %v", got)
	}
	if dg, err := adm.DescribeGroups(ctx, "od"); err != nil || dg["od"].State != "Dead" {
		t.Errorf("group without members and offsets: %+v %v, want Dead", dg["od"], err)
	}
	if _, err := adm.DeleteOffsets(ctx, "od-nobody", kadm.TopicsSet{"od-a": {0: {}}}); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("unknown group: %v, want GROUP_ID_NOT_FOUND", err)
	}
}
