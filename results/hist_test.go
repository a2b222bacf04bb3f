package results

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"testing"
)

func TestRecordNsConvertsAndClamps(t *testing.T) {
	tests := []struct {
		ns      int64
		wantUs  int64
		clamped int64
	}{
		{0, 0, 0},
		{499, 0, 0},
		{500, 1, 0},
		{1_499, 1, 0},
		{250_000, 250, 0},
		{-5, 0, 1},
		{61 * 1e9, HistMaxUs, 1},
	}
	for _, tt := range tests {
		h := NewHistogram()
		h.RecordNs(tt.ns)
		if got := h.Max(); !h.Hdr().ValuesAreEquivalent(got, tt.wantUs) {
			t.Errorf("RecordNs(%d): max %d µs, want %d", tt.ns, got, tt.wantUs)
		}
		if h.Clamped() != tt.clamped || h.Count() != 1 {
			t.Errorf("RecordNs(%d): clamped %d count %d, want %d 1", tt.ns, h.Clamped(), h.Count(), tt.clamped)
		}
	}
}

func TestMergeAndSummarize(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	for i := int64(1); i <= 5000; i++ {
		a.Record(i) // 1..5000 µs
	}
	for i := int64(5001); i <= 10000; i++ {
		b.Record(i)
	}
	b.Record(-1) // clamped
	a.Merge(b)
	if a.Count() != 10001 || a.Clamped() != 1 {
		t.Fatalf("merged count %d clamped %d", a.Count(), a.Clamped())
	}
	s := Summarize(a)
	check := func(name string, got, want float64) {
		if math.Abs(got-want) > want*0.002+1 {
			t.Errorf("%s = %v, want ~%v", name, got, want)
		}
	}
	check("p50", s.P50, 5000)
	check("p90", s.P90, 9000)
	check("p99", s.P99, 9900)
	check("p999", s.P999, 9990)
	check("max", s.Max, 10000)
	check("mean", s.Mean, 5000)
	if s.Count != 10001 {
		t.Errorf("count %d", s.Count)
	}
	d, err := DecodeSummaryHdr(s)
	if err != nil {
		t.Fatal(err)
	}
	if d.Count() != a.Count() || d.Quantile(99) != a.Quantile(99) || d.Max() != a.Max() {
		t.Errorf("decoded histogram differs: count %d p99 %d max %d", d.Count(), d.Quantile(99), d.Max())
	}
}

func TestSummarizeEmpty(t *testing.T) {
	s := Summarize(NewHistogram())
	if s.Count != 0 || s.P99 != 0 || s.Hdr == "" {
		t.Errorf("empty summary %+v", s)
	}
	if h, err := DecodeSummaryHdr(s); err != nil || h.Count() != 0 {
		t.Errorf("decode empty: %v %v", h, err)
	}
}

func TestDecodeHdrErrors(t *testing.T) {
	for _, in := range []string{"", "!!!", "AAAA", "HISTFAAAACXicY2BgYGZgYGRgYGBgYGRgYGBgYGRgYAAAAP//"} {
		if _, err := DecodeHdr(in); err == nil {
			t.Errorf("DecodeHdr(%q): no error", in)
		}
	}
}

func FuzzDecodeHdr(f *testing.F) {
	h := NewHistogram()
	h.Record(100)
	f.Add(Summarize(h).Hdr)
	f.Add("HISTFAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		_, _ = DecodeHdr(s) // must not panic
	})
}

func TestHgrmRoundTrip(t *testing.T) {
	h := NewHistogram()
	// A latency-like shape: body around 50 µs, tail up to 20 ms.
	for i := int64(0); i < 20000; i++ {
		h.Record(30 + i%50)
	}
	for i := int64(0); i < 200; i++ {
		h.Record(1000 + i*100)
	}
	var buf bytes.Buffer
	if err := WriteHgrm(&buf, h); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	if !strings.HasPrefix(text, "       Value     Percentile TotalCount 1/(1-Percentile)\n\n") {
		t.Errorf("header: %q", text[:60])
	}
	for _, w := range []string{"#[Mean    = ", "#[Max     = ", "Total count    =        20200]", "#[Buckets =           16, SubBuckets     =         2048]"} {
		if !strings.Contains(text, w) {
			t.Errorf("hgrm lacks %q", w)
		}
	}
	g, err := ParseHgrm(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if g.TotalCount != h.Count() || g.Max != float64(h.Max()) || math.Abs(g.Mean-h.Mean()) > 0.001 {
		t.Errorf("footer: count %d max %v mean %v", g.TotalCount, g.Max, g.Mean)
	}
	last := g.Rows[len(g.Rows)-1]
	if last.Percentile != 1 || last.TotalCount != h.Count() {
		t.Errorf("last row %+v", last)
	}
	// Every row's value is what the histogram answers at the row's cumulative count.
	for _, row := range g.Rows[:len(g.Rows)-1] {
		if want := h.Quantile(float64(row.TotalCount) / float64(h.Count()) * 100); !h.Hdr().ValuesAreEquivalent(int64(row.Value), want) {
			t.Errorf("row %+v: histogram says %d", row, want)
		}
	}
	// Percentiles read back from the rows' counts match where a row reaches them (the tail
	// between ticks is only as precise as the ticks).
	for _, p := range []float64{0.5, 0.9, 0.99} {
		v, ok := g.ValueAt(p)
		want := float64(h.Quantile(p * 100))
		if !ok || math.Abs(v-want) > want*0.001+1 {
			t.Errorf("p%v: hgrm %v, histogram %v", p*100, v, want)
		}
	}
	// Rows: percentiles ascending, 5 ticks per half distance -> first steps are 10% apart.
	if g.Rows[1].Percentile != 0.1 {
		t.Errorf("second row percentile %v, want 0.1 (5 ticks per half)", g.Rows[1].Percentile)
	}
	for i := 1; i < len(g.Rows); i++ {
		if g.Rows[i].Percentile < g.Rows[i-1].Percentile || g.Rows[i].Value < g.Rows[i-1].Value {
			t.Fatalf("rows not ascending at %d: %+v %+v", i, g.Rows[i-1], g.Rows[i])
		}
	}
}

func TestHgrmGolden(t *testing.T) {
	h := NewHistogram()
	for i := int64(1); i <= 100; i++ {
		h.Record(i * 10)
	}
	var buf bytes.Buffer
	if err := WriteHgrm(&buf, h); err != nil {
		t.Fatal(err)
	}
	golden(t, "small.hgrm", buf.Bytes())
}

func TestParseHgrmErrors(t *testing.T) {
	for name, in := range map[string]string{
		"noheader": "1.0 0.5 3\n",
		"short":    "Value Percentile TotalCount\n1.0 0.5\n",
		"nan":      "Value Percentile TotalCount\nabc 0.5 3 2.0\n",
		"pct":      "Value Percentile TotalCount\n1.0 1.5 3 2.0\n",
	} {
		if _, err := ParseHgrm(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzParseHgrm(f *testing.F) {
	f.Add("       Value     Percentile TotalCount 1/(1-Percentile)\n\n      10.000 0.000000000000          1           1.00\n#[Mean    =       10.000, StdDeviation   =        0.000]\n")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseHgrm(strings.NewReader(s))
		if err == nil {
			g.ValueAt(0.99)
		}
	})
}

func TestRecorderConcurrentAndInterval(t *testing.T) {
	r := NewRecorder()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				r.RecordNsN(int64(g*1000+i)*1000, 2)
			}
		}(g)
	}
	wg.Wait()
	iv := r.Interval()
	if iv.Count() != 8000 {
		t.Fatalf("interval count %d", iv.Count())
	}
	r.Record(5)
	if tot := r.Snapshot(); tot.Count() != 8001 {
		t.Errorf("total before the next interval: %d values, want 8001 (the value just recorded included)", tot.Count())
	}
	if iv2 := r.Interval(); iv2.Count() != 1 {
		t.Errorf("second interval count %d, want 1", iv2.Count())
	}
	if tot := r.Snapshot(); tot.Count() != 8001 {
		t.Errorf("total %d, want 8001", tot.Count())
	}
	r.Reset()
	if r.Snapshot().Count() != 0 || r.Interval().Count() != 0 {
		t.Error("reset left values")
	}
}

// TestRecorderIntervalsWhileRecording: intervals taken while goroutines record add up to the
// total, and every Snapshot counts what was recorded before it.
func TestRecorderIntervalsWhileRecording(t *testing.T) {
	r := NewRecorder()
	var wg sync.WaitGroup
	const writers, each = 4, 5000
	for g := 0; g < writers; g++ {
		wg.Go(func() {
			for i := 0; i < each; i++ {
				r.RecordNs(int64(i) * 1000)
			}
		})
	}
	done := make(chan struct{})
	var inIntervals, lastSnap int64
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			inIntervals += r.Interval().Count()
			s := r.Snapshot().Count()
			if s < lastSnap || s < inIntervals {
				t.Errorf("snapshot %d after one of %d and intervals of %d", s, lastSnap, inIntervals)
				return
			}
			lastSnap = s
		}
	}()
	wg.Wait()
	<-done
	inIntervals += r.Interval().Count()
	if inIntervals != writers*each || r.Snapshot().Count() != writers*each {
		t.Fatalf("intervals %d, snapshot %d; want %d", inIntervals, r.Snapshot().Count(), writers*each)
	}
}

func BenchmarkHistogramRecordNs(b *testing.B) {
	h := NewHistogram()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.RecordNs(int64(i%1_000_000) * 100)
	}
}

func BenchmarkRecorderRecordNsParallel(b *testing.B) {
	r := NewRecorder()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int64(0)
		for pb.Next() {
			i++
			r.RecordNsN(i%100000*1000, 4)
		}
	})
}
