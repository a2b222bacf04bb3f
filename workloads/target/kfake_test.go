package target

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/workloads/spec"
)

// TestKfakeRetention: the kfake target keeps a partition within the spec's log.retention.bytes
// (and rolls at its log.segment.bytes), as the embedded cluster's disk is kept, so a run as
// fast as possible does not keep every record in memory; Inspection.Retention settles it.
func TestKfakeRetention(t *testing.T) {
	s, err := spec.Load("default")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"log.segment.bytes", "1048576"}, {"log.retention.bytes", "2097152"}, {"brokers", "1"}} {
		if err := s.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	tgt, err := OpenTarget(ctx, "kfake", s, TargetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tgt.Seeds()...), kgo.DefaultProduceTopic("r"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "r"); err != nil {
		t.Fatal(err)
	}
	const n = 8 << 10 // 8 MiB of 1 KiB records: 8 segments
	for i := 0; i < n; i++ {
		v := make([]byte, 1024)
		_, _ = rand.Read(v)
		cl.Produce(ctx, &kgo.Record{Value: v}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ret := Inspect(tgt).Retention
	if ret == nil {
		t.Fatal("the kfake target has no Retention part")
	}
	ret.ApplyRetention()
	starts, err := ListOffsets(ctx, adm, "r", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := ListOffsets(ctx, adm, "r", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if ends[0] != n {
		t.Fatalf("end offset %d, want %d", ends[0], n)
	}
	// At most retention (2 MiB) + the active segment (1 MiB) left: 3,000-odd records.
	if kept := ends[0] - starts[0]; kept > 3<<10 || kept < 1<<10 {
		t.Fatalf("after retention the partition holds %d of %d records (log start %d), want about 2-3 MiB of them", kept, n, starts[0])
	}
}
