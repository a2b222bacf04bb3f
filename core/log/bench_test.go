package log

import (
	"math/rand/v2"
	"testing"
)

func benchAppend(b *testing.B, nrec, valueSize int, writer string, rollFlush func(func())) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	cfg.RollFlush = rollFlush
	w, err := NewWriter(writer)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Writer = w
	l, _ := mustOpen(b, b.TempDir(), cfg)
	defer l.Close()
	src := batch(nrec, valueSize, "bench", 1)
	blob := make([]byte, len(src))
	copy(blob, src)
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	for b.Loop() {
		if l.Size() > 256<<20 { // keep the disk footprint bounded
			b.StopTimer()
			if err := l.TruncateFullyAndStartAt(l.LEO()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if _, err := l.Append(blob, true, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend: leader-mode appends of one batch (page cache, no fsync but the flush of
// each rolled 64 MiB segment, as Kafka: by the append that rolls, the log's default, and
// with "bg" on the background flushers, as brokers do).
func BenchmarkAppend(b *testing.B) {
	for _, writer := range []string{"pwritev", "write", "uring"} {
		if writer == "uring" && WriterFallbackReason("uring") != "" {
			continue
		}
		b.Run("1KiB/"+writer, func(b *testing.B) { benchAppend(b, 1, 1000-80, writer, nil) })
		b.Run("16KiB/"+writer, func(b *testing.B) { benchAppend(b, 16, 1000, writer, nil) })
	}
	b.Run("1KiB/pwritev/bg", func(b *testing.B) { benchAppend(b, 1, 1000-80, "pwritev", FlushInBackground) })
	b.Run("16KiB/pwritev/bg", func(b *testing.B) { benchAppend(b, 16, 1000, "pwritev", FlushInBackground) })
}

// BenchmarkAppendParallel: concurrent appenders sharing the group commit.
func BenchmarkAppendParallel(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	cfg.RetentionBytes = 128 << 20
	l, _ := mustOpen(b, b.TempDir(), cfg)
	defer l.Close()
	src := batch(1, 1000-80, "bench", 1)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		blob := append([]byte(nil), src...)
		for i := 0; pb.Next(); i++ {
			if _, err := l.Append(blob, true, 1); err != nil {
				b.Error(err)
				return
			}
			if i%4096 == 0 {
				if _, err := l.ApplyRetention(0, l.LEO()); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
}

func benchReadLog(b *testing.B) *Log {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	l, _ := mustOpen(b, b.TempDir(), cfg)
	src := batch(1, 1000-80, "r", 1)
	blob := make([]byte, len(src))
	for i := 0; i < 40000; i++ { // ~40 MB, 10 segments
		copy(blob, src)
		mustAppend(b, l, blob)
	}
	return l
}

// BenchmarkRead: slice lookup (no data copy), as a fetch does before sendfile.
func BenchmarkRead(b *testing.B) {
	l := benchReadLog(b)
	defer l.Close()
	leo := l.LEO()
	b.Run("tail", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := l.Read(leo-1, leo, 1<<20, true)
			if err != nil {
				b.Fatal(err)
			}
			s.Release()
		}
	})
	b.Run("random", func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 2))
		b.ReportAllocs()
		for b.Loop() {
			s, err := l.Read(r.Int64N(leo), leo, 1<<20, true)
			if err != nil {
				b.Fatal(err)
			}
			s.Release()
		}
	})
}
