package results

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range and precision: values are MICROSECONDS, 1 µs .. 60 s, 3 significant digits.
const (
	HistMinUs   = 1
	HistMaxUs   = 60_000_000
	HistSigFigs = 3
)

// Histogram is an HdrHistogram of microsecond values (1 µs .. 60 s, 3 significant digits) that
// counts values it had to clamp into range. It has no lock: one owner records into it (one per
// producer goroutine), and owners' histograms are merged at the end with Merge. Use Recorder
// when many goroutines record into one histogram.
type Histogram struct {
	h       *hdrhistogram.Histogram
	clamped int64
}

// NewHistogram returns an empty histogram of µs values, 1 µs .. 60 s, 3 significant digits.
func NewHistogram() *Histogram {
	return &Histogram{h: hdrhistogram.New(HistMinUs, HistMaxUs, HistSigFigs)}
}

// Record records one value in µs; negative values are recorded as 0 and values above 60 s as
// 60 s, and both are counted in Clamped.
func (h *Histogram) Record(us int64) { h.RecordN(us, 1) }

// RecordN records n occurrences of us (n <= 0 records nothing), e.g. an HW lag weighted by the
// batch's record count.
func (h *Histogram) RecordN(us, n int64) {
	if n <= 0 {
		return
	}
	if us < 0 {
		us = 0
		h.clamped += n
	} else if us > HistMaxUs {
		us = HistMaxUs
		h.clamped += n
	}
	// In range by construction: RecordValues cannot fail.
	_ = h.h.RecordValues(us, n)
}

// RecordNs records a nanosecond duration, rounded to the nearest µs and clamped like Record.
func (h *Histogram) RecordNs(ns int64) { h.RecordN(nsToUs(ns), 1) }

// RecordNsN records n occurrences of a nanosecond duration.
func (h *Histogram) RecordNsN(ns, n int64) { h.RecordN(nsToUs(ns), n) }

func nsToUs(ns int64) int64 {
	if ns < 0 {
		return -1 // clamped to 0 and counted
	}
	return (ns + 500) / 1000
}

// Merge adds every value of o into h (o is unchanged); o must not be recorded into concurrently.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil {
		return
	}
	h.h.Merge(o.h) // same range: nothing is dropped
	h.clamped += o.clamped
}

// Count is the number of recorded values.
func (h *Histogram) Count() int64 { return h.h.TotalCount() }

// Clamped is the number of recorded values that were outside [0 µs, 60 s] and were clamped.
func (h *Histogram) Clamped() int64 { return h.clamped }

// Quantile returns the value at quantile q in [0,100] (percent), in µs.
func (h *Histogram) Quantile(pct float64) int64 { return h.h.ValueAtQuantile(pct) }

// Max returns the highest recorded value (µs, highest equivalent value).
func (h *Histogram) Max() int64 { return h.h.Max() }

// Mean returns the mean in µs.
func (h *Histogram) Mean() float64 { return h.h.Mean() }

// Reset empties h.
func (h *Histogram) Reset() { h.h.Reset(); h.clamped = 0 }

// Clone returns an independent copy.
func (h *Histogram) Clone() *Histogram {
	return &Histogram{h: hdrhistogram.Import(h.h.Export()), clamped: h.clamped}
}

// Hdr exposes the underlying HdrHistogram (read-only use; do not record into it directly).
func (h *Histogram) Hdr() *hdrhistogram.Histogram { return h.h }

// Summarize computes the result.json summary of h, including the base64 V2 encoding.
func Summarize(h *Histogram) Summary {
	if h == nil {
		h = NewHistogram()
	}
	s := Summary{Count: h.Count()}
	if s.Count > 0 {
		v := h.h.ValueAtPercentiles([]float64{50, 90, 99, 99.9, 99.99})
		s.Mean = math.Round(h.Mean()*1000) / 1000
		s.P50, s.P90, s.P99, s.P999, s.P9999 = float64(v[50]), float64(v[90]), float64(v[99]), float64(v[99.9]), float64(v[99.99])
		s.Max = float64(h.Max())
	}
	enc, err := h.h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		panic("BUG: encoding an in-memory histogram failed: " + err.Error())
	}
	s.Hdr = string(enc)
	return s
}

// DecodeSummaryHdr decodes a Summary's hdr field back into a Histogram.
func DecodeSummaryHdr(s Summary) (*Histogram, error) { return DecodeHdr(s.Hdr) }

// DecodeHdr decodes a base64 HdrHistogram V2 compressed encoding. A histogram of another range
// is re-recorded into the standard range (values above 60 s clamped and counted).
func DecodeHdr(b64 string) (*Histogram, error) {
	if b64 == "" {
		return nil, fmt.Errorf("results: empty hdr histogram encoding")
	}
	dh, err := hdrhistogram.Decode([]byte(b64))
	if err != nil {
		return nil, fmt.Errorf("results: decode hdr histogram: %w", err)
	}
	h := NewHistogram()
	if dh.LowestTrackableValue() == HistMinUs && dh.HighestTrackableValue() == HistMaxUs && dh.SignificantFigures() == HistSigFigs {
		h.h = dh
		return h, nil
	}
	for _, b := range dh.Distribution() {
		if b.Count > 0 {
			h.RecordN(b.To, b.Count)
		}
	}
	return h, nil
}

// WriteHgrm writes h in HdrHistogram's percentile-distribution text format, exactly as Java's
// HistogramLogProcessor / outputPercentileDistribution prints it with 5 ticks per half distance
// and an output value unit scaling ratio of 1: values in µs. HdrHistogram's plotter reads it.
func WriteHgrm(w io.Writer, h *Histogram) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)")
	if h.Count() > 0 {
		dist := h.h.CumulativeDistributionWithTicks(5)
		for i, b := range dist {
			p := b.Quantile / 100
			if i == len(dist)-1 || p >= 1 {
				fmt.Fprintf(bw, "%12.3f %1.12f %10d\n", float64(b.ValueAt), p, b.Count)
				break
			}
			fmt.Fprintf(bw, "%12.3f %1.12f %10d %14.2f\n", float64(b.ValueAt), p, b.Count, 1/(1-p))
		}
	}
	fmt.Fprintf(bw, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", h.Mean(), h.h.StdDev())
	fmt.Fprintf(bw, "#[Max     = %12.3f, Total count    = %12d]\n", float64(h.Max()), h.Count())
	fmt.Fprintf(bw, "#[Buckets = %12d, SubBuckets     = %12d]\n", bucketCount(), subBucketCount())
	return bw.Flush()
}

// Geometry of a 1..60e6, 3-significant-digit histogram, as Java prints it in the footer.
func subBucketCount() int64 {
	largest := 2 * int64(math.Pow10(HistSigFigs))
	magnitude := int64(math.Ceil(math.Log2(float64(largest))))
	return int64(1) << magnitude
}

func bucketCount() int64 {
	smallestUntrackable := subBucketCount() // * lowest (1)
	n := int64(1)
	for smallestUntrackable <= HistMaxUs {
		if smallestUntrackable > math.MaxInt64/2 {
			return n + 1
		}
		smallestUntrackable <<= 1
		n++
	}
	return n
}

// HgrmRow is one percentile row of an .hgrm file.
type HgrmRow struct {
	Value      float64 // µs
	Percentile float64 // 0..1
	TotalCount int64
}

// Hgrm is a parsed percentile-distribution file.
type Hgrm struct {
	Rows       []HgrmRow
	Mean, Max  float64
	TotalCount int64
}

// ValueAt returns the value at percentile p (0..1): the value of the first row whose
// TotalCount reaches p of the total count (the rows are at tick percentiles, so this is what
// the histogram itself answers, within its precision); ok=false when the file has no rows.
func (g *Hgrm) ValueAt(p float64) (v float64, ok bool) {
	if len(g.Rows) == 0 {
		return 0, false
	}
	total := g.Rows[len(g.Rows)-1].TotalCount
	need := int64(math.Ceil(p * float64(total)))
	if need < 1 {
		need = 1
	}
	for _, r := range g.Rows {
		if r.TotalCount >= need {
			return r.Value, true
		}
	}
	return g.Rows[len(g.Rows)-1].Value, true
}

// ParseHgrm reads an .hgrm percentile-distribution file (the format WriteHgrm writes, and
// Java/Go HdrHistogram's PercentilesPrint). Errors name the line.
func ParseHgrm(r io.Reader) (*Hgrm, error) {
	g := &Hgrm{}
	sc := bufio.NewScanner(r)
	ln := 0
	sawHeader := false
	for sc.Scan() {
		ln++
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "#["):
			parseFooter(line, g)
			continue
		case strings.HasPrefix(line, "Value"):
			sawHeader = true
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("results: hgrm line %d: want Value Percentile TotalCount [1/(1-Percentile)], got %q", ln, line)
		}
		v, err1 := strconv.ParseFloat(f[0], 64)
		p, err2 := strconv.ParseFloat(f[1], 64)
		c, err3 := strconv.ParseInt(f[2], 10, 64)
		if err := firstErr(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("results: hgrm line %d: %q: %v", ln, line, err)
		}
		if p < 0 || p > 1 {
			return nil, fmt.Errorf("results: hgrm line %d: percentile %v outside [0,1]", ln, p)
		}
		g.Rows = append(g.Rows, HgrmRow{Value: v, Percentile: p, TotalCount: c})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("results: hgrm: %w", err)
	}
	if !sawHeader {
		return nil, fmt.Errorf("results: hgrm: no \"Value Percentile TotalCount 1/(1-Percentile)\" header line")
	}
	return g, nil
}

func parseFooter(line string, g *Hgrm) {
	body := strings.TrimSuffix(strings.TrimPrefix(line, "#["), "]")
	for _, kv := range strings.Split(body, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "Mean":
			g.Mean, _ = strconv.ParseFloat(v, 64)
		case "Max":
			g.Max, _ = strconv.ParseFloat(v, 64)
		case "Total count":
			g.TotalCount, _ = strconv.ParseInt(v, 10, 64)
		}
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Recorder is a Histogram behind one small mutex, for values recorded from many goroutines
// (HW-lag callbacks from the core). It keeps the run's total and the current interval, so a
// timeline can take interval percentiles (Interval) while the total keeps growing.
// All methods are safe for concurrent use.
//
// A value is recorded into the current interval only, one histogram write instead of two (the
// counts of a 1 µs .. 60 s histogram span about 300 KB: each write is likely a cache miss).
// Interval folds the interval it hands out into the total outside the recording lock, so that
// recording goroutines (promise callbacks that stamp later acknowledgements) never wait for a
// merge; Snapshot adds the current interval to a copy of the total under it.
type Recorder struct {
	mu       sync.Mutex // guards interval; taken after totalMu
	interval *Histogram
	totalMu  sync.Mutex
	total    *Histogram // the intervals Interval handed out
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{total: NewHistogram(), interval: NewHistogram()}
}

// Record records a µs value into the current interval (and so into the total).
func (r *Recorder) Record(us int64) { r.RecordN(us, 1) }

// RecordN records n occurrences of a µs value.
func (r *Recorder) RecordN(us, n int64) {
	r.mu.Lock()
	r.interval.RecordN(us, n)
	r.mu.Unlock()
}

// RecordNs records a ns duration (rounded to µs).
func (r *Recorder) RecordNs(ns int64) { r.RecordN(nsToUs(ns), 1) }

// RecordNsN records n occurrences of a ns duration (e.g. HW lag weighted by records).
func (r *Recorder) RecordNsN(ns, n int64) { r.RecordN(nsToUs(ns), n) }

// Snapshot returns a copy of the total so far, the current interval included. It holds the
// recording lock while it adds the interval: for the end of a run, not for a hot path.
func (r *Recorder) Snapshot() *Histogram {
	r.totalMu.Lock()
	defer r.totalMu.Unlock()
	c := r.total.Clone()
	r.mu.Lock()
	c.Merge(r.interval)
	r.mu.Unlock()
	return c
}

// Interval returns the values recorded since the previous Interval (or Reset) and starts a new
// interval; the total keeps them.
func (r *Recorder) Interval() *Histogram {
	fresh := NewHistogram()
	r.totalMu.Lock()
	defer r.totalMu.Unlock()
	r.mu.Lock()
	iv := r.interval
	r.interval = fresh
	r.mu.Unlock()
	r.total.Merge(iv)
	return iv
}

// Reset empties the total and the interval (e.g. at the end of the warmup).
func (r *Recorder) Reset() {
	r.totalMu.Lock()
	r.mu.Lock()
	r.total.Reset()
	r.interval.Reset()
	r.mu.Unlock()
	r.totalMu.Unlock()
}
