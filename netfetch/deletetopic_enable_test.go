package netfetch_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
)

// TestDeleteTopicEnable: with delete.topic.enable=false (serve --set), DeleteTopics deletes
// nothing: franz-go's admin client gets TOPIC_DELETION_DISABLED for the topic (INVALID_REQUEST
// before v3, as Kafka answers), the topic stays, and DescribeConfigs reports the setting.
func TestDeleteTopicEnable(t *testing.T) {
	c := clustertest.Start(t, 1, func(cfg *cluster.Config) {
		if err := cfg.Set("delete.topic.enable", "false"); err != nil {
			t.Fatal(err)
		}
	})
	cl := clustertest.NewClient(t, c)
	adm := kadm.NewClient(cl)
	ctx := clustertest.Context(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "keep"); err != nil {
		t.Fatal(err)
	}
	rs, err := adm.DeleteTopics(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if r := rs["keep"]; r.Err != kerr.TopicDeletionDisabled {
		t.Errorf("DeleteTopics with delete.topic.enable=false: %v, want TOPIC_DELETION_DISABLED", r.Err)
	}
	old := kmsg.NewPtrDeleteTopicsRequest()
	old.SetVersion(2)
	old.TopicNames = []string{"keep"}
	resp := rawRequest[*kmsg.DeleteTopicsResponse](t, c.Addr(c.BrokerIDs()[0]), old)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("DeleteTopics v2 with delete.topic.enable=false: %+v, want INVALID_REQUEST", resp.Topics)
	}
	if _, ok := c.Controller().TopicID("keep"); !ok {
		t.Error("the topic was deleted")
	}
	bcs, err := adm.DescribeBrokerConfigs(ctx, c.BrokerIDs()[0])
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rc := range bcs {
		for _, cv := range rc.Configs {
			if cv.Key == "delete.topic.enable" {
				found = cv.MaybeValue() == "false" && cv.Source == kmsg.ConfigSourceStaticBrokerConfig
			}
		}
	}
	if !found {
		t.Errorf("DescribeConfigs does not report delete.topic.enable=false as a static broker config: %+v", bcs)
	}
}
