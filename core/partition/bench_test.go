package partition

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

// benchLog is a log whose appends only move the LEO, so the benchmarks
// measure the replica's own work.
type benchLog struct{ leo atomic.Int64 }

func (b *benchLog) Append(blob []byte, _ bool, _ int32) (log.AppendInfo, error) {
	n := b.leo.Add(1)
	return log.AppendInfo{FirstOffset: n - 1, LastOffset: n - 1, Records: 1, Batches: 1, Bytes: int64(len(blob))}, nil
}
func (b *benchLog) LEO() int64                               { return b.leo.Load() }
func (b *benchLog) LogStart() int64                          { return 0 }
func (b *benchLog) TruncateTo(int64) error                   { return nil }
func (b *benchLog) TruncateFullyAndStartAt(int64) error      { return nil }
func (b *benchLog) ApplyRetention(int64, int64) (int, error) { return 0, nil }
func (b *benchLog) IncrementLogStart(int64) (int, error)     { return 0, nil }
func (b *benchLog) Close() error                             { return nil }
func (b *benchLog) EpochStartsAtOpen() []log.EpochStart      { return nil }
func (b *benchLog) ForEachBatchHeader(int64, func(records.Header) error) error {
	return nil
}
func (b *benchLog) Read(int64, int64, int, bool) (log.Slice, error) {
	return log.Slice{}, nil
}
func (b *benchLog) AppendAbortedTxn(log.AbortedTxn) error { return nil }
func (b *benchLog) AppendAbortedTxns(dst []log.AbortedTxn, _, _ int64) ([]log.AbortedTxn, error) {
	return dst, nil
}

func benchLeader(b *testing.B, rf int, mode string) (*Replica, *benchLog) {
	l := &benchLog{}
	r, err := newReplica("t", 0, 0, l, "", Config{HWUpdate: mode, Now: func() int64 { return 0 }})
	if err != nil {
		b.Fatal(err)
	}
	var reps []int32
	for i := 0; i < rf; i++ {
		reps = append(reps, int32(i))
	}
	if err := r.MakeLeader(controller.PartitionState{Topic: "t", Leader: 0, Replicas: reps, ISR: slices.Clone(reps)}); err != nil {
		b.Fatal(err)
	}
	return r, l
}

// BenchmarkUpdateFollower: one op is one follower fetch recorded by the
// leader (follower LEO, caught-up time, HW recomputation); every rf-1 ops
// the HW advances.
func BenchmarkUpdateFollower(b *testing.B) {
	for _, rf := range []int{3, 5} {
		for _, mode := range []string{HWUpdateAtomic, HWUpdateMutex} {
			b.Run(fmt.Sprintf("rf=%d/%s", rf, mode), func(b *testing.B) {
				r, l := benchLeader(b, rf, mode)
				l.leo.Store(1 << 62)
				b.ReportAllocs()
				var off int64
				for i := 0; b.Loop(); i++ {
					f := int32(1 + i%(rf-1))
					if f == 1 {
						off++
					}
					r.UpdateFollower(f, -1, off, 0)
				}
				if r.HW() < off-1 {
					b.Fatalf("HW %d did not follow %d", r.HW(), off)
				}
			})
			b.Run(fmt.Sprintf("rf=%d/%s/parallel", rf, mode), func(b *testing.B) {
				r, l := benchLeader(b, rf, mode)
				l.leo.Store(1 << 62)
				b.ReportAllocs()
				var next atomic.Int32
				b.RunParallel(func(pb *testing.PB) {
					f := 1 + (next.Add(1)-1)%int32(rf-1)
					var off int64
					for pb.Next() {
						off++
						r.UpdateFollower(f, -1, off, 0)
					}
				})
			})
		}
	}
}

// BenchmarkAckPath: one op is an acks=all produce on a 3-replica leader:
// append, both followers' fetches, HW advance, WaitForHW.
func BenchmarkAckPath(b *testing.B) {
	for _, mode := range []string{HWUpdateAtomic, HWUpdateMutex} {
		b.Run(mode, func(b *testing.B) {
			r, _ := benchLeader(b, 3, mode)
			blob := oneBatch(1)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				info, err := r.AppendAsLeader(blob, -1)
				if err != nil {
					b.Fatal(err)
				}
				r.UpdateFollower(1, -1, info.LastOffset+1, 0)
				r.UpdateFollower(2, -1, info.LastOffset+1, 0)
				if err := r.WaitForHW(ctx, info.LastOffset, r.LeaderEpoch()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
