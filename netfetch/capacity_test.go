package netfetch_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/netfetch"
)

// TestCreateTopicsBeyondFileLimit: CreateTopics and CreatePartitions that would host more
// partition replicas than the process's file limit allows its brokers are answered
// POLICY_VIOLATION with a message naming the limit, the replicas hosted and the replicas
// asked for, and create nothing; a request within it is accepted.
func TestCreateTopicsBeyondFileLimit(t *testing.T) {
	capacity, _ := netfetch.ReplicaCapacity(3)
	tooMany := capacity/3 + 1 // partitions of RF 3
	if tooMany > controller.MaxPartitions {
		t.Skipf("RLIMIT_NOFILE %d lets 3 brokers host %d replicas: no topic of at most %d partitions passes it", netfetch.NoFile(), capacity, controller.MaxPartitions)
	}
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.AutoCreateTopics = false })
	cl := clustertest.NewClient(t, c)
	if err := c.CreateTopic("small", 2, 3, nil); err != nil {
		t.Fatal(err)
	}
	checkRefused := func(what string, code int16, msg *string, asked int64) {
		t.Helper()
		if code != kerr.PolicyViolation.Code {
			t.Fatalf("%s: error code %d (%v), want POLICY_VIOLATION", what, code, kerr.ErrorForCode(code))
		}
		if msg == nil {
			t.Fatalf("%s: no error message", what)
		}
		for _, want := range []string{
			fmt.Sprintf("RLIMIT_NOFILE %d", netfetch.NoFile()), fmt.Sprintf("at most %d", capacity),
			"host 6 already", fmt.Sprintf("%d more partition replicas", asked), "ulimit -n",
		} {
			if !strings.Contains(*msg, want) {
				t.Fatalf("%s: message %q does not say %q", what, *msg, want)
			}
		}
	}
	for _, validateOnly := range []bool{true, false} {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.ValidateOnly = validateOnly
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "big", int32(tooMany), 3
		req.Topics = append(req.Topics, rt)
		resp := request[*kmsg.CreateTopicsResponse](t, cl, req)
		checkRefused(fmt.Sprintf("CreateTopics of %d partitions x RF 3 (validate only %v)", tooMany, validateOnly),
			resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage, tooMany*3)
	}
	if _, ok := c.Controller().Partitions("big"); ok {
		t.Fatal("the refused topic exists")
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "small", int32(tooMany)+2
	cp.Topics = append(cp.Topics, ct)
	cpResp := request[*kmsg.CreatePartitionsResponse](t, cl, cp)
	checkRefused("CreatePartitions", cpResp.Topics[0].ErrorCode, cpResp.Topics[0].ErrorMessage, tooMany*3)
	if sts, _ := c.Controller().Partitions("small"); len(sts) != 2 {
		t.Fatalf("small has %d partitions after a refused CreatePartitions", len(sts))
	}
	// Within the limit.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "fits", 4, 3
	req.Topics = append(req.Topics, rt)
	if resp := request[*kmsg.CreateTopicsResponse](t, cl, req); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics within the limit: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
}
