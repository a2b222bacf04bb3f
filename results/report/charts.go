package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/isrbench/isrbench/results"
)

// Size bounds of a page: a long run's timelines are reduced to these many points per series.
const (
	// MaxTimelinePoints is the most points a timeline series keeps (buckets of consecutive
	// intervals beyond that).
	MaxTimelinePoints = 1200
	// MaxISREvents is the most ISR events a page lists and marks.
	MaxISREvents = 400
	// MaxPartitionLanes is the most partitions the per-partition ISR chart draws.
	MaxPartitionLanes = 64
	// maxLaneSegments bounds the ISR changes drawn per partition.
	maxLaneSegments = 2000
)

// histDef is one latency histogram of a result; an optional one (a transactional run's) gets
// no table row where the result has none.
type histDef struct {
	Name     string // legend
	Metric   string // results metric suffix
	Field    string // result.json field
	get      func(*results.Result) *results.Summary
	optional bool
}

// hists are the histograms of a result, in table order: the four of every run, a
// transactional run's (results.TxnHists), then the one-at-a-time probe's where the run had
// one (last, so that the others keep their colours).
var hists = append([]histDef{
	{"ack", "ack", "ack_latency_us", func(r *results.Result) *results.Summary { return &r.AckLatencyUs }, false},
	{"hw lag", "hwlag", "hw_lag_us", func(r *results.Result) *results.Summary { return &r.HWLagUs }, false},
	{"e2e", "e2e", "e2e_latency_us", func(r *results.Result) *results.Summary { return &r.E2ELatencyUs }, false},
	{"send delay", "senddelay", "send_delay_us", func(r *results.Result) *results.Summary { return &r.SendDelayUs }, false},
}, append(txnHists(), histDef{"ack, one at a time", "probe", "probe.ack_latency_us", func(r *results.Result) *results.Summary {
	if r.Probe == nil {
		return &results.Summary{}
	}
	return &r.Probe.AckLatencyUs
}, true})...)

func txnHists() []histDef {
	var out []histDef
	for _, h := range results.TxnHists {
		get := h.Get
		out = append(out, histDef{h.Name, h.Metric, h.Field, func(r *results.Result) *results.Summary {
			if s := get(r); s != nil {
				return s
			}
			return &results.Summary{}
		}, true})
	}
	return out
}

// percentileSeries is h's percentile distribution as HdrHistogram's plotter draws it: the
// iteration of 5 ticks per half distance (as the .hgrm files), x in percent; the 100% row
// (1/(1-q) infinite) is left out and the maximum is placed at the percentile of its rank,
// 100*(1-1/count), when that lies beyond the last tick.
func percentileSeries(name string, style int, h *results.Histogram) Series {
	s := Series{Name: name, Style: style, X: []float64{}, Y: []float64{}}
	if h == nil || h.Count() == 0 {
		return s
	}
	for _, b := range h.Hdr().CumulativeDistributionWithTicks(5) {
		if b.Quantile >= 100 {
			break
		}
		s.X = append(s.X, b.Quantile)
		s.Y = append(s.Y, float64(b.ValueAt))
	}
	n := float64(h.Count())
	if q := 100 * (1 - 1/n); len(s.X) == 0 || q > s.X[len(s.X)-1] {
		s.X = append(s.X, q) // 0 for a single value
		s.Y = append(s.Y, float64(h.Max()))
	}
	return s
}

// hgrmSeries is the same from an .hgrm file's rows (a result without an hdr encoding).
func hgrmSeries(name string, style int, g *results.Hgrm) Series {
	s := Series{Name: name, Style: style, X: []float64{}, Y: []float64{}}
	for _, r := range g.Rows {
		if r.Percentile >= 1 {
			break
		}
		s.X = append(s.X, r.Percentile*100)
		s.Y = append(s.Y, r.Value)
	}
	return s
}

// summarySeries is the coarse fallback: the summary's percentiles only.
func summarySeries(name string, style int, sum results.Summary) Series {
	s := Series{Name: name, Style: style, X: []float64{}, Y: []float64{}}
	if sum.Count == 0 {
		return s
	}
	for _, p := range []struct{ q, v float64 }{{50, sum.P50}, {90, sum.P90}, {99, sum.P99}, {99.9, sum.P999}, {99.99, sum.P9999}} {
		s.X = append(s.X, p.q)
		s.Y = append(s.Y, p.v)
	}
	return s
}

// percentileChart is a latency chart on the percentile axis (log y, µs).
func percentileChart(id, section, title string, series []Series) Chart {
	return Chart{ID: id, Section: section, Title: title, Kind: "line",
		X:      ChartAx{Label: "percentile", Scale: "percentile"},
		Y:      ChartAx{Label: "latency", Scale: "log", Unit: "µs", Min: ptr(1.0)},
		Series: series}
}

// bucketRow is one plotted timeline point: a bucket of consecutive intervals.
type bucketRow struct {
	T, RecordsPerS, AckP99, HWLagP99 float64
	ISRMin, ISRMax                   int
	UnderReplicated, UnderMinISR     int
	Errors                           int64
}

// bucketSize is the number of intervals per plotted point for n rows.
func bucketSize(n, max int) int {
	if n <= max {
		return 1
	}
	return (n + max - 1) / max
}

// downsample reduces rows to buckets of k consecutive intervals: the rate is averaged, the
// p99s, ISR max and partition counts keep their maximum, ISR min its minimum, errors are
// summed; a bucket is stamped with its last interval's end.
func downsample(rows []results.TimelineRow, k int) []bucketRow {
	out := make([]bucketRow, 0, (len(rows)+k-1)/k)
	for i := 0; i < len(rows); i += k {
		end := min(i+k, len(rows))
		b := bucketRow{ISRMin: math.MaxInt}
		for _, r := range rows[i:end] {
			b.T = r.T
			b.RecordsPerS += r.RecordsPerS
			b.AckP99 = math.Max(b.AckP99, r.AckP99Us)
			b.HWLagP99 = math.Max(b.HWLagP99, r.HWLagP99Us)
			b.ISRMin = min(b.ISRMin, r.ISRMin)
			b.ISRMax = max(b.ISRMax, r.ISRMax)
			b.UnderReplicated = max(b.UnderReplicated, r.UnderReplicated)
			b.UnderMinISR = max(b.UnderMinISR, r.UnderMinISR)
			b.Errors += r.Errors
		}
		b.RecordsPerS /= float64(end - i)
		out = append(out, b)
	}
	return out
}

// interval is the timeline's period: the median spacing of its rows (the first row's time
// when it has one row).
func interval(rows []results.TimelineRow) float64 {
	if len(rows) == 0 {
		return 0
	}
	if len(rows) == 1 {
		return round(rows[0].T, 3)
	}
	d := make([]float64, len(rows)-1)
	for i := 1; i < len(rows); i++ {
		d[i-1] = rows[i].T - rows[i-1].T
	}
	sort.Float64s(d)
	return round(d[len(d)/2], 3)
}

// faultOverlay turns the run's faults into shaded windows and instants of the timeline.
func faultOverlay(faults []FaultRow) (bands []Band, marks []Mark) {
	for _, f := range faults {
		label := f.Kind
		if f.Target != "" {
			label += " " + f.Target
		}
		if f.Error != "" {
			label += " (failed)"
		}
		if f.EndS > f.AtS {
			bands = append(bands, Band{From: round(math.Max(f.AtS, 0), 3), To: round(f.EndS, 3), Label: label})
		} else {
			marks = append(marks, Mark{At: round(math.Max(f.AtS, 0), 3), Kind: "fault", Label: label})
		}
	}
	return bands, marks
}

// isrMarks are the ISR events as instants of the ISR charts.
func isrMarks(ev []ISREvent) []Mark {
	out := make([]Mark, 0, len(ev))
	for _, e := range ev {
		out = append(out, Mark{At: round(e.T, 3), Kind: e.Kind,
			Label: fmt.Sprintf("partition %d %s [%s] → [%s]", e.Partition, e.Kind, ids(e.From), ids(e.To))})
	}
	return out
}

func ids(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " ")
}

// timelineCharts are the run's timeline charts from timeline.csv rows.
func timelineCharts(rows []results.TimelineRow, k int, durationS float64, faults []FaultRow, ev []ISREvent) []Chart {
	bs := downsample(rows, k)
	bands, marks := faultOverlay(faults)
	t := make([]float64, len(bs))
	for i, b := range bs {
		t[i] = round(b.T, 3)
	}
	col := func(f func(bucketRow) float64) []float64 {
		v := make([]float64, len(bs))
		for i, b := range bs {
			v[i] = f(b)
		}
		return v
	}
	xs := timeAxis(durationS, t)
	note := ""
	if k > 1 {
		note = fmt.Sprintf("each point covers %d intervals: the mean rate, the highest p99 and partition counts, the lowest ISR, the summed errors", k)
	}
	mk := func(id, title string, y ChartAx, series ...Series) Chart {
		return Chart{ID: id, Section: "timeline", Title: title, Kind: "line", X: xs, Y: y, Series: series,
			Bands: bands, Marks: marks, Note: note}
	}
	lat := []Series{{Name: "ack p99", Style: 0, X: t, Y: col(func(b bucketRow) float64 { return b.AckP99 })}}
	if hw := col(func(b bucketRow) float64 { return b.HWLagP99 }); anyNonZero(hw) {
		lat = append(lat, Series{Name: "hw lag p99", Style: 1, X: t, Y: hw})
	}
	isr := mk("timeline-isr", "ISR size (over partitions)", ChartAx{Label: "replicas in the ISR", Scale: "linear", Min: ptr(0.0)},
		Series{Name: "ISR min", Style: 0, Step: true, X: t, Y: col(func(b bucketRow) float64 { return float64(b.ISRMin) })},
		Series{Name: "ISR max", Style: 1, Step: true, X: t, Y: col(func(b bucketRow) float64 { return float64(b.ISRMax) })})
	isr.Marks = append(append([]Mark(nil), marks...), isrMarks(ev)...)
	errs := mk("timeline-errors", "Produce errors per interval", ChartAx{Label: "failed records", Scale: "linear", Min: ptr(0.0)},
		Series{Name: "errors", Style: 5, Step: true, X: t, Y: col(func(b bucketRow) float64 { return float64(b.Errors) })})
	if !anyNonZero(errs.Series[0].Y) {
		errs.Note = strings.TrimPrefix(note+"; no produce errors in the measured window", "; ")
	}
	return []Chart{
		mk("timeline-throughput", "Throughput", ChartAx{Label: "records/s", Scale: "linear", Unit: "rec/s", Min: ptr(0.0)},
			Series{Name: "records/s", Style: 0, X: t, Y: col(func(b bucketRow) float64 { return round(b.RecordsPerS, 1) })}),
		mk("timeline-latency", "Interval p99: ack latency and HW lag", ChartAx{Label: "p99 per interval", Scale: "log", Unit: "µs", Min: ptr(1.0)}, lat...),
		isr,
		mk("timeline-replication", "Under-replicated and under-min-ISR partitions", ChartAx{Label: "partitions", Scale: "linear", Min: ptr(0.0)},
			Series{Name: "under-replicated", Style: 0, Step: true, X: t, Y: col(func(b bucketRow) float64 { return float64(b.UnderReplicated) })},
			Series{Name: "under min ISR", Style: 1, Step: true, X: t, Y: col(func(b bucketRow) float64 { return float64(b.UnderMinISR) })}),
		errs,
	}
}

// timeAxis is the timeline's x axis: 0 to the measured duration (or the last sample, when
// later).
func timeAxis(durationS float64, t []float64) ChartAx {
	end := durationS
	if n := len(t); n > 0 && t[n-1] > end {
		end = t[n-1]
	}
	ax := ChartAx{Label: "time since the start of measurement", Scale: "linear", Unit: "s", Min: ptr(0.0)}
	if end > 0 {
		ax.Max = ptr(round(end, 3))
	}
	return ax
}

func anyNonZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return true
		}
	}
	return false
}

// partitionChart is the per-partition ISR chart of partitions.csv: one lane per partition,
// each a step series of its ISR size holding from one change to the next (X are the change
// times, the last X the end of the samples). ok=false when there is nothing to draw or too
// many partitions.
func partitionChart(rows []partRow, durationS float64, faults []FaultRow, ev []ISREvent) (c Chart, bucket int, note string, ok bool) {
	if len(rows) == 0 {
		return Chart{}, 0, "", false
	}
	byP := map[int32][]partRow{}
	var parts []int32
	maxRep, end := 0, 0.0
	for _, r := range rows {
		if _, seen := byP[r.Partition]; !seen {
			parts = append(parts, r.Partition)
		}
		byP[r.Partition] = append(byP[r.Partition], r)
		maxRep = max(maxRep, r.Replicas)
		end = math.Max(end, r.T)
	}
	sort.Slice(parts, func(a, b int) bool { return parts[a] < parts[b] })
	if len(parts) > MaxPartitionLanes {
		return Chart{}, 0, fmt.Sprintf("%d partitions: more than %d, so the per-partition ISR is left to partitions.csv", len(parts), MaxPartitionLanes), false
	}
	bucket = 1
	cats := make([]string, len(parts))
	var series []Series
	for i, p := range parts {
		cats[i] = fmt.Sprintf("p%d", p)
		pr := byP[p]
		// Run-length: a point at every change, keeping the lowest size within a bucket when
		// a partition flaps more often than maxLaneSegments allows.
		k := bucketSize(len(pr), maxLaneSegments)
		bucket = max(bucket, k)
		s := Series{Name: cats[i], Style: i, Step: true, X: []float64{}, Y: []float64{}}
		for j := 0; j < len(pr); j += k {
			v := math.MaxInt
			for _, r := range pr[j:min(j+k, len(pr))] {
				v = min(v, r.ISR)
			}
			if n := len(s.Y); n == 0 || s.Y[n-1] != float64(v) {
				s.X = append(s.X, round(pr[j].T, 3))
				s.Y = append(s.Y, float64(v))
			}
		}
		s.X = append(s.X, round(end, 3))
		s.Y = append(s.Y, s.Y[len(s.Y)-1])
		series = append(series, s)
	}
	bands, marks := faultOverlay(faults)
	c = Chart{ID: "timeline-partitions", Section: "timeline", Title: "ISR size per partition (100 ms samples)", Kind: "lanes",
		X:      timeAxis(durationS, []float64{round(end, 3)}),
		Y:      ChartAx{Label: "partition", Scale: "category", Categories: cats, Max: ptr(float64(maxRep))},
		Series: series, Bands: bands, Marks: append(marks, isrMarks(ev)...)}
	if bucket > 1 {
		c.Note = fmt.Sprintf("partitions changing more often than %d times are drawn with the lowest ISR of every %d samples", maxLaneSegments, bucket)
	}
	return c, bucket, "", true
}
