package netfetch_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// TestProduceAnswerInline: acks=all produces through 3 brokers with a real client, both ways
// of answering (isrbench.produce.answer.inline): every record is acknowledged once, in order,
// and nothing is lost; inline, every acks=all produce is answered by the goroutine that
// completed it, with the ablation none is.
func TestProduceAnswerInline(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) {
			c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.AnswerInline = inline })
			if err := c.CreateTopic("pi", 2, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
				t.Fatal(err)
			}
			cl := clustertest.NewClient(t, c, kgo.DefaultProduceTopic("pi"), kgo.ProducerLinger(0))
			before, reqs := c.Stats().ProducesAnsweredInline, c.Cost().Net.ProduceRequests
			var acks []clustertest.Ack
			for i := 0; i < 100; i++ {
				acks = append(acks, clustertest.Produce(t, cl, "pi", fmt.Sprintf("r%d-", i), 1)...)
			}
			n, produces := c.Stats().ProducesAnsweredInline-before, c.Cost().Net.ProduceRequests-reqs
			clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "pi"))
			t.Logf("%d of %d produce requests answered inline", n, produces)
			if inline && (n != produces || n < 100) {
				t.Errorf("%d of %d produce requests answered inline, want all (at least 100)", n, produces)
			}
			if !inline && n != 0 {
				t.Errorf("%d produce requests answered inline with the ablation", n)
			}
		})
	}
}

// TestProduceAnswerInlineTimeout: with the followers' fetchers paused an acks=all produce times
// out with REQUEST_TIMED_OUT, and a request pipelined behind it on the same connection is
// answered after it (responses in request order); once the followers resume, the next acks=all
// produce is answered inline.
func TestProduceAnswerInlineTimeout(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		cfg.Broker.ReplicaLagTimeMaxMs = 60000 // the paused followers stay in the ISR
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
	})
	st, _ := clustertest.FollowedTopic(t, c, "pt")
	rc := kafkatest.Dial(t, c.Addr(st.Leader))
	warm := kafkatest.NewProduceResp()
	rc.RoundTrip(kafkatest.NewProduce("pt", -1, kafkatest.Batch(0)), warm)
	if p := warm.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first produce: error %d base %d", p.ErrorCode, p.BaseOffset)
	}
	for _, id := range st.Replicas {
		if id != st.Leader {
			c.Broker(id).Pause()
		}
	}
	before := c.Stats().ProducesAnsweredInline
	req := kafkatest.NewProduce("pt", -1, kafkatest.Batch(0))
	req.TimeoutMillis = 200
	pc := rc.Send(req)
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	mc := rc.Send(meta)
	corr, body, err := rc.Recv()
	if err != nil || corr != pc {
		t.Fatalf("first response: correlation id %d (want the produce's, %d), %v", corr, pc, err)
	}
	resp := kafkatest.NewProduceResp()
	resp.SetVersion(9)
	rd := kbin.Reader{Src: body}
	kmsg.SkipTags(&rd) // response header v1
	if err := resp.ReadFrom(rd.Src); err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("produce with the followers paused: error %d, want REQUEST_TIMED_OUT (%d)", p.ErrorCode, kerr.RequestTimedOut.Code)
	}
	if corr, _, err := rc.Recv(); err != nil || corr != mc {
		t.Fatalf("second response: correlation id %d (want the metadata's, %d), %v", corr, mc, err)
	}
	if n := c.Stats().ProducesAnsweredInline - before; n != 0 {
		t.Fatalf("a timed-out produce counted as answered inline (%d)", n)
	}
	for _, id := range st.Replicas {
		if id != st.Leader {
			c.Broker(id).Resume()
		}
	}
	after := kafkatest.NewProduceResp()
	rc.RoundTrip(kafkatest.NewProduce("pt", -1, kafkatest.Batch(0)), after)
	if p := after.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("after resume: error %d base %d, want offset 2 (the timed-out record is at 1)", p.ErrorCode, p.BaseOffset)
	}
	if n := c.Stats().ProducesAnsweredInline - before; n != 1 {
		t.Fatalf("%d produces answered inline after resume, want 1", n)
	}
}

// TestProduceAnswerInlinePausedServer: an acks=all produce that completes while its server is
// paused (here on the leader's ISR expiration, which drops the paused followers and lets the HW
// pass the batch with min.insync.replicas 1) is not answered by the completing goroutine; its
// connection's goroutine answers it after Resume, with success.
func TestProduceAnswerInlinePausedServer(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		cfg.Broker.ReplicaLagTimeMaxMs = 1000
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
	})
	if err := c.CreateTopic("pp", 1, 3, map[string]string{"min.insync.replicas": "1"}); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Controller().Partition("pp", 0)
	rc := kafkatest.Dial(t, c.Addr(st.Leader))
	warm := kafkatest.NewProduceResp()
	rc.RoundTrip(kafkatest.NewProduce("pp", -1, kafkatest.Batch(0)), warm)
	if p := warm.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first produce: error %d base %d", p.ErrorCode, p.BaseOffset)
	}
	for _, id := range st.Replicas {
		if id != st.Leader {
			c.Broker(id).Pause()
		}
	}
	leader := c.Broker(st.Leader)
	r, ok := leader.Replica("pp", 0)
	if !ok {
		t.Fatal("the leader hosts no replica of pp-0")
	}
	before := c.Stats().ProducesAnsweredInline
	pc := rc.Send(kafkatest.NewProduce("pp", -1, kafkatest.Batch(0)))
	kafkatest.WaitFor(t, 20*time.Second, "the leader to append the produce", func() bool { return r.LEO() == 2 })
	c.Server(st.Leader).Pause()
	if r.HW() == 2 {
		t.Skip("the ISR shrank before the server was paused (a stall of replica.lag.time.max.ms on a loaded machine)")
	}
	kafkatest.WaitFor(t, 30*time.Second, "the ISR to shrink and the HW to pass the batch", func() bool { return r.HW() == 2 })
	if n := c.Stats().ProducesAnsweredInline - before; n != 0 {
		t.Fatalf("answered inline while the server was paused (%d)", n)
	}
	c.Server(st.Leader).Resume()
	corr, body, err := rc.Recv()
	if err != nil || corr != pc {
		t.Fatalf("after Resume: correlation id %d (want %d), %v", corr, pc, err)
	}
	resp := kafkatest.NewProduceResp()
	resp.SetVersion(9)
	rd := kbin.Reader{Src: body}
	kmsg.SkipTags(&rd)
	if err := resp.ReadFrom(rd.Src); err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("produce completed while paused: error %d base %d, want success at offset 1", p.ErrorCode, p.BaseOffset)
	}
}
