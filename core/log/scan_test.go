package log

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/isrbench/isrbench/core/records"
)

func scanBases(t *testing.T, l *Log, from int64) []int64 {
	t.Helper()
	var got []int64
	prevNext := int64(-1)
	err := l.ForEachBatchHeader(from, func(h records.Header) error {
		if prevNext >= 0 && h.BaseOffset != prevNext {
			return fmt.Errorf("batch %d after a batch ending at %d", h.BaseOffset, prevNext)
		}
		prevNext = h.NextOffset()
		got = append(got, h.BaseOffset)
		return nil
	})
	if err != nil {
		t.Fatalf("ForEachBatchHeader(%d): %v", from, err)
	}
	return got
}

// TestForEachBatchHeader scans logs of small and large (> one read chunk)
// batches across segments, from every offset.
func TestForEachBatchHeader(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 200 << 10
	l, _ := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	var bases []int64
	for i := 0; i < 40; i++ {
		n, size := 1+i%3, 10
		if i%7 == 3 {
			n, size = 1, 90<<10 // larger than headerScanChunk
		}
		info := mustAppend(t, l, batch(n, size, fmt.Sprint("b", i), int64(i)))
		bases = append(bases, info.FirstOffset)
	}
	if l.Segments() < 3 {
		t.Fatalf("want several segments, have %d", l.Segments())
	}
	leo := l.LEO()
	for from := int64(0); from <= leo; from++ {
		i, _ := slices.BinarySearch(bases, from) // first batch with base >= from
		want := bases[i:]
		if got := scanBases(t, l, from); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("from %d: got %v, want %v", from, got, want)
		}
	}
	// Early stop and errors.
	n := 0
	if err := l.ForEachBatchHeader(0, func(records.Header) error { n++; return ErrStopScan }); err != nil || n != 1 {
		t.Fatalf("ErrStopScan: err %v after %d calls", err, n)
	}
	boom := errors.New("boom")
	if err := l.ForEachBatchHeader(0, func(records.Header) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("callback error: %v", err)
	}
	// After a truncation the scan ends at the new LEO.
	if err := l.TruncateTo(bases[20] + 1); err != nil {
		t.Fatal(err)
	}
	if got := scanBases(t, l, 0); !slices.Equal(got, bases[:20]) {
		t.Fatalf("after truncation: %v, want %v", got, bases[:20])
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.ForEachBatchHeader(0, func(records.Header) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed log: %v", err)
	}
}

// TestForEachBatchHeaderConcurrentAppends: a scan running with appends sees
// a contiguous prefix of the log (run with -race).
func TestForEachBatchHeaderConcurrentAppends(t *testing.T) {
	l, _ := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 300; i++ {
			if _, err := l.Append(batch(2, 20, "c", 0), true, 1); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 30; i++ {
		got := scanBases(t, l, 0)
		if len(got) > 0 && got[0] != 0 {
			t.Fatalf("scan starts at %d", got[0])
		}
	}
	wg.Wait()
	if got := scanBases(t, l, 0); len(got) != 300 {
		t.Fatalf("final scan saw %d batches, want 300", len(got))
	}
}

// BenchmarkForEachBatchHeader: one op scans every batch header of a log of
// 16 MiB (the producer-state rebuild after a truncation); reported per batch.
func BenchmarkForEachBatchHeader(b *testing.B) {
	for _, valueSize := range []int{1 << 10, 16 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("batch=%dKiB", valueSize>>10), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 4 << 20
			l, _ := mustOpen(b, b.TempDir(), cfg)
			defer l.Close()
			blob := batch(1, valueSize, "x", 0)
			n := (16 << 20) / len(blob)
			for i := 0; i < n; i++ {
				if _, err := l.Append(blob, true, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				seen := 0
				if err := l.ForEachBatchHeader(0, func(records.Header) error { seen++; return nil }); err != nil || seen != n {
					b.Fatalf("scan: %v, %d of %d batches", err, seen, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/batch")
		})
	}
}
