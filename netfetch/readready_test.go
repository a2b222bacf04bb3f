package netfetch_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/records"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

// TestReadWhenReady: with isrbench.socket.read.when.ready (the default) a plaintext connection
// reads each request once, with no read finding the socket empty before the wait: a client
// sending one request at a time costs the broker about one read(2) per request, where the
// ablation (false) reads twice. The requests still get their answers when one arrives in two
// pieces (the wait inside the read callback resumes the request), when one is larger than the
// read buffer (read outside the callback) and across replication (the fetchers' round trips).
func TestReadWhenReady(t *testing.T) {
	for _, ready := range []bool{true, false} {
		t.Run(fmt.Sprintf("read.when.ready=%v", ready), func(t *testing.T) {
			c := clustertest.Start(t, 1, func(cfg *cluster.Config) { cfg.ReadWhenReady = ready })
			if err := c.CreateTopic("rr", 1, 1, nil); err != nil {
				t.Fatal(err)
			}
			rc := kafkatest.Dial(t, c.Addr(0))
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(9)
			rc.RoundTrip(req, kmsg.NewPtrMetadataResponse()) // warm: the connection is served
			const n = 200
			before := c.Cost().Net
			for i := 0; i < n; i++ {
				rc.RoundTrip(req, kmsg.NewPtrMetadataResponse())
			}
			d := c.Cost().Net.Sub(before)
			perReq := float64(d.Read) / n
			t.Logf("%d requests: %d reads (%.2f per request)", n, d.Read, perReq)
			if ready && perReq > 1.5 {
				t.Errorf("%.2f reads per request with read.when.ready, want about 1 (at most 1.5)", perReq)
			}
			if !ready && perReq < 1 {
				t.Errorf("%.2f reads per request, want at least 1", perReq)
			}

			// A request in two pieces: the broker reads the first, waits, then reads the rest.
			frame := metadataFrame(t, 1000)
			reads := c.Cost().Net.Read
			if _, err := rc.Conn.Write(frame[:7]); err != nil {
				t.Fatal(err)
			}
			kafkatest.WaitFor(t, 20*time.Second, "the broker to read the first piece", func() bool { return c.Cost().Net.Read > reads })
			if _, err := rc.Conn.Write(frame[7:]); err != nil {
				t.Fatal(err)
			}
			corr, _, err := rc.Recv()
			if err != nil || corr != 1000 {
				t.Fatalf("the split request: correlation id %d, %v", corr, err)
			}

			// A produce larger than the 64 KiB read buffer, then small requests again.
			recs := []records.Record{{Value: bytes.Repeat([]byte("x"), 200<<10)}}
			batch := records.AppendBatch(nil, 0, 0, time.Now().UnixMilli(), recs)
			presp := kafkatest.NewProduceResp()
			rc.RoundTrip(kafkatest.NewProduce("rr", 1, batch), presp)
			if ec := presp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
				t.Fatalf("large produce: error code %d", ec)
			}
			rc.RoundTrip(req, kmsg.NewPtrMetadataResponse())
		})
	}
}

// TestReadWhenReadyReplication: acks=all produces through 3 brokers, both ways of reading: every
// record is acknowledged (the followers' fetch round trips read their responses), and with
// read.when.ready the followers' fetch responses cost fewer reads than the ablation's.
func TestReadWhenReadyReplication(t *testing.T) {
	perResp := map[bool]float64{}
	for _, ready := range []bool{true, false} {
		t.Run(fmt.Sprintf("read.when.ready=%v", ready), func(t *testing.T) {
			c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.ReadWhenReady = ready })
			if err := c.CreateTopic("rr", 2, 3, map[string]string{"min.insync.replicas": "3"}); err != nil {
				t.Fatal(err)
			}
			cl := clustertest.NewClient(t, c, kgo.DefaultProduceTopic("rr"), kgo.ProducerLinger(0))
			var acks []clustertest.Ack
			before := c.Cost().Net
			for i := 0; i < 100; i++ { // one at a time: every record is its own round of messages
				acks = append(acks, clustertest.Produce(t, cl, "rr", fmt.Sprintf("r%d-", i), 1)...)
			}
			d := c.Cost().Net.Sub(before)
			clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, "rr"))
			if d.FollowerFetchResponses == 0 {
				t.Fatal("no replica fetch responses counted")
			}
			msgs := d.Produce.Requests + d.ReplicaFetch.Requests + d.ConsumerFetch.Requests + d.Other.Requests + d.FollowerFetchResponses
			perResp[ready] = float64(d.Read) / float64(msgs)
			t.Logf("%d reads for %d requests and %d replica fetch responses (%.2f per message)",
				d.Read, msgs-d.FollowerFetchResponses, d.FollowerFetchResponses, perResp[ready])
		})
	}
	if perResp[true] > 1.5 {
		t.Errorf("%.2f reads per message with read.when.ready, want about 1 (at most 1.5)", perResp[true])
	}
}

// metadataFrame is a size-prefixed Metadata v9 request (all topics) with correlation id corr.
func metadataFrame(t *testing.T, corr int32) []byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	b := []byte{0, 0, 0, 0}
	b = append(b, 0, 3, 0, 9) // key 3, version 9
	b = append(b, byte(corr>>24), byte(corr>>16), byte(corr>>8), byte(corr))
	b = append(b, 0, 2, 'r', 'r') // client id
	b = append(b, 0)              // header tagged fields (flexible)
	b = req.AppendTo(b)
	n := len(b) - 4
	b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return b
}
