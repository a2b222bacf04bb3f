package load

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/workloads/spec"
)

// TestRunProbe: the probe writes one untimed record to each of the first ProbeMaxWarmup
// partitions, then its timed records round robin over those only (a never-written partition's
// first batch is not service time), each a zero-filled value of message.size bytes; it times
// every record it sent.
func TestRunProbe(t *testing.T) {
	const parts, n = ProbeMaxWarmup + 20, 150
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, "p"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := spec.DefaultSpec().Producers
	g.MessageSize = 100
	r, err := RunProbe(ctx, conn, g, "p", parts, n, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r.Warmup != ProbeMaxWarmup || r.Sent != n || r.Ack.Count() != n || len(r.Errors) != 0 || r.Stopped {
		t.Fatalf("warm-up %d, sent %d, timed %d, errors %v, stopped %v; want %d, %d, %d, none, false",
			r.Warmup, r.Sent, r.Ack.Count(), r.Errors, r.Stopped, ProbeMaxWarmup, n, n)
	}
	cl, err := kgo.NewClient(conn...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < parts; p++ {
		want := int64(0)
		if p < ProbeMaxWarmup {
			want = 1 + n/ProbeMaxWarmup
			if int(p) < n%ProbeMaxWarmup {
				want++
			}
		}
		if o, ok := ends.Lookup("p", p); !ok || o.Offset != want {
			t.Errorf("partition %d: end offset %d (%v), want %d", p, o.Offset, ok, want)
		}
	}
	// The values: message.size zero bytes, which no consumer of the harness takes for its own.
	rd, err := kgo.NewClient(append(conn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"p": {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var recs []*kgo.Record
	for len(recs) < 2 && ctx.Err() == nil {
		recs = append(recs, rd.PollFetches(ctx).Records()...)
	}
	for _, rec := range recs {
		if len(rec.Value) != g.MessageSize || string(rec.Value) != string(make([]byte, g.MessageSize)) {
			t.Fatalf("value of %d bytes %q, want %d zero bytes", len(rec.Value), rec.Value, g.MessageSize)
		}
		if _, err := ParseHeader(rec.Value); err == nil {
			t.Error("a probe value parses as a load record's header")
		}
	}
	if len(recs) < 2 {
		t.Fatalf("read %d records of partition 0", len(recs))
	}
}
