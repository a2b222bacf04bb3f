package broker

import (
	"context"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/records"
)

// BenchmarkProduce produces 1 KiB records (10 per batch) through the local
// transport to a 3-broker cluster, RF 3, one partition; reports records/s. The
// changed.only=false runs are the isrbench.housekeeping.changed.only ablation (no change-set
// registration on the append and HW paths).
func BenchmarkProduce(b *testing.B) {
	for _, bc := range []struct {
		name        string
		acks        int16
		changedOnly bool
	}{{"acks=1", 1, true}, {"acks=all", -1, true}, {"acks=all/changed.only=false", -1, false}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := testConfig()
			cfg.HousekeepingChangedOnly = bc.changedOnly
			cfg.ReplicaFetchWaitMaxMs = 500
			// Keep the disk bounded however long -benchtime is.
			cfg.Log.SegmentBytes = 16 << 20
			cfg.Log.RetentionBytes = 32 << 20
			cfg.LogRetentionCheckIntervalMs = 200
			c := newTestCluster(b, 3, cfg)
			c.createTopic("bench", 1, 3, nil)
			l := c.leader("bench", 0)
			const perBatch = 10
			recs := make([]records.Record, perBatch)
			for i := range recs {
				recs[i].Value = make([]byte, 1024)
			}
			tmpl := records.AppendBatch(nil, 0, 0, time.Now().UnixMilli(), recs)
			blob := make([]byte, len(tmpl))
			parts := []ProducePartition{{Topic: "bench", Partition: 0}}
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(int64(len(tmpl)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				copy(blob, tmpl)
				parts[0].Records = blob
				l.Produce(ctx, bc.acks, 10*time.Second, parts)
				if parts[0].Err != nil {
					b.Fatal(parts[0].Err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
