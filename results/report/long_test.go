package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/isrbench/isrbench/results"
)

// longRun writes the run directory of an hour-long run with a 100 ms timeline: 36,000
// timeline rows, 6 partitions sampled every 100 ms (216,000 rows), a fault every 3 minutes
// and an ISR that flaps (thousands of events). Values are deterministic.
func longRun(t testing.TB, parent string) string {
	t.Helper()
	const (
		secs  = 3600
		step  = 0.1
		parts = 6
	)
	dir := filepath.Join(parent, "20261201-120000-long-0a0b0c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ack, hw := results.NewHistogram(), results.NewHistogram()
	for i := 0; i < 200000; i++ {
		ack.Record(200 + int64(rng.ExpFloat64()*300))
		hw.Record(80 + int64(rng.ExpFloat64()*150))
	}
	ack.Record(4_000_000)
	var faults []results.Fault
	for at := 60.0; at < secs; at += 180 {
		faults = append(faults, results.Fault{AtS: at, EndS: at + 20, Kind: "pause-broker", Target: "broker=1"})
	}
	inFault := func(ts float64) bool {
		for _, f := range faults {
			if ts >= f.AtS && ts < f.EndS {
				return true
			}
		}
		return false
	}
	f, err := os.Create(filepath.Join(dir, timelineFile))
	if err != nil {
		t.Fatal(err)
	}
	tl, err := results.NewTimeline(f)
	if err != nil {
		t.Fatal(err)
	}
	n := int(secs / step)
	for i := 1; i <= n; i++ {
		ts := math.Round(float64(i)*step*1000) / 1000
		row := results.TimelineRow{T: ts, RecordsPerS: 5000 + rng.NormFloat64()*100, AckP99Us: 400 + rng.Float64()*100,
			HWLagP99Us: 200 + rng.Float64()*50, ISRMin: 3, ISRMax: 3}
		if inFault(ts) {
			row.ISRMin, row.UnderReplicated = 2, 4
		}
		if i == n/2+7 { // one spike, inside a bucket
			row.AckP99Us = 987654
		}
		if err := tl.Write(row); err != nil {
			t.Fatal(err)
		}
	}
	if err := tl.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	pf, err := os.Create(filepath.Join(dir, partitionsFile))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(pf)
	fmt.Fprintln(w, "t_s,partition,leader,leader_epoch,replicas,isr,hw,leo,under_replicated,under_min_isr,produce_errors")
	var events []ISREvent
	prev := make([]int, parts)
	for i := 0; i <= n; i++ {
		ts := float64(i) * step
		for p := 0; p < parts; p++ {
			isr := "0 1 2"
			size := 3
			// partition 0 flaps every 2 s for the whole hour; the others follow the faults
			if (p == 0 && (i/20)%2 == 1) || (p%2 == 1 && inFault(ts)) {
				isr, size = "0 2", 2
			}
			if i > 0 && size != prev[p] {
				kind := "shrink"
				if size > prev[p] {
					kind = "expand"
				}
				events = append(events, ISREvent{T: ts, Partition: int32(p), Kind: kind, From: []int32{0, 1, 2}, To: []int32{0, 2}})
			}
			prev[p] = size
			fmt.Fprintf(w, "%.3f,%d,0,0,0 1 2,%s,%d,0:1 1:1 2:1,0,0,\n", ts, p, isr, i)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	pf.Close()
	fr := map[string]any{"partitions_csv": partitionsFile, "isr_events": events, "isr_shrinks": len(events) / 2,
		"isr_expands": len(events) / 2, "faults": []any{}}
	b, _ := json.Marshal(fr)
	if err := os.WriteFile(filepath.Join(dir, faultsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	res := &results.Result{ID: filepath.Base(dir), Name: "long", Target: "embedded", StartedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		DurationS: secs, Config: map[string]any{"duration": "1h0m0s", "replica.lag.time.max.ms": 2000},
		AckLatencyUs: results.Summarize(ack), HWLagUs: results.Summarize(hw), Faults: faults,
		Produced: results.Produced{Records: 200000, RecordsPerSec: 5000},
		Files:    results.Files{Timeline: filepath.Join(dir, timelineFile), Partitions: partitionsFile, Faults: faultsFile}}
	if err := results.WriteResult(filepath.Join(dir, resultFile), res); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLongRun: an hour of 100 ms samples makes a page of bounded size whose timelines keep the
// extremes, and whose percentile distributions keep full resolution.
func TestLongRun(t *testing.T) {
	dir := longRun(t, t.TempDir())
	path, err := WriteRun(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("page of an hour-long run: %d bytes", st.Size())
	if st.Size() > 1<<20 {
		t.Errorf("page is %d bytes, want at most 1 MiB", st.Size())
	}
	d, err := BuildRun(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Run.Timeline.Rows != 36000 || d.Run.Timeline.Bucket != 30 || d.Run.Timeline.IntervalS != 0.1 {
		t.Errorf("timeline info %+v", d.Run.Timeline)
	}
	for _, c := range d.Charts {
		for _, s := range c.Series {
			if c.Section == "timeline" && c.Kind == "line" && len(s.X) > MaxTimelinePoints {
				t.Errorf("%s/%s: %d points, want <= %d", c.ID, s.Name, len(s.X), MaxTimelinePoints)
			}
		}
	}
	lat := chartByID(d, "timeline-latency")
	if m := maxOf(lat.Series[0].Y); m != 987654 {
		t.Errorf("interval p99 spike lost in the buckets: max %v", m)
	}
	isr := chartByID(d, "timeline-isr")
	if m := minOf(isr.Series[0].Y); m != 2 {
		t.Errorf("ISR shrink lost in the buckets: min %v", m)
	}
	if len(d.Run.ISR.Events) != MaxISREvents || d.Run.ISR.EventsTotal <= MaxISREvents {
		t.Errorf("events: %d listed of %d", len(d.Run.ISR.Events), d.Run.ISR.EventsTotal)
	}
	lanes := chartByID(d, "timeline-partitions")
	if lanes == nil || d.Run.Timeline.PartitionBucket < 2 {
		t.Fatalf("partition lanes %v, bucket %d", lanes != nil, d.Run.Timeline.PartitionBucket)
	}
	for _, s := range lanes.Series {
		if len(s.X) > maxLaneSegments+1 {
			t.Errorf("lane %s: %d changes, want <= %d", s.Name, len(s.X), maxLaneSegments+1)
		}
	}
	if p0 := lanes.Series[0]; minOf(p0.Y) != 2 {
		t.Errorf("partition 0 flaps but never shows ISR 2")
	}
	if ack := chartByID(d, "latency").Series[0]; len(ack.X) < 40 {
		t.Errorf("ack distribution: %d points", len(ack.X))
	}
	if got := len(chartByID(d, "timeline-throughput").Bands); got != 20 {
		t.Errorf("%d fault windows, want 20", got)
	}
}

func maxOf(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

func minOf(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = math.Min(m, x)
	}
	return m
}

// TestPercentileSeriesEdges: a histogram of one value still gives a point; the maximum closes
// the series at the percentile of its rank.
func TestPercentileSeriesEdges(t *testing.T) {
	h := results.NewHistogram()
	h.Record(250)
	s := percentileSeries("one", 0, h)
	if len(s.X) != 1 || s.X[0] != 0 || s.Y[0] != 250 {
		t.Errorf("one value: %v %v", s.X, s.Y)
	}
	for i := 0; i < 999; i++ {
		h.Record(100)
	}
	h.Record(50000)
	s = percentileSeries("tail", 0, h)
	if n := len(s.X); s.Y[n-1] != float64(h.Max()) || s.X[n-1] >= 100 {
		t.Errorf("last point (%v, %v), want the max below 100%%", s.X[n-1], s.Y[n-1])
	}
	h2 := results.NewHistogram()
	h2.RecordN(100, 1_000_000)
	h2.Record(7000)
	s = percentileSeries("rare max", 0, h2)
	if n := len(s.X); s.Y[n-1] != float64(h2.Max()) || s.X[n-1] >= 100 || s.X[n-1] < 99.9999 {
		t.Errorf("last point (%v, %v), want the max just below 100%%", s.X[n-1], s.Y[n-1])
	}
	if e := percentileSeries("empty", 0, results.NewHistogram()); len(e.X) != 0 {
		t.Errorf("empty histogram: %v", e.X)
	}
}

// TestManyPartitions: past MaxPartitionLanes partitions the page says where the per-partition
// ISR is instead of drawing unreadable lanes.
func TestManyPartitions(t *testing.T) {
	var rows []partRow
	for p := 0; p <= MaxPartitionLanes; p++ {
		rows = append(rows, partRow{T: 0, Partition: int32(p), ISR: 3, Replicas: 3})
	}
	if _, _, note, ok := partitionChart(rows, 1, nil, nil); ok || note == "" {
		t.Errorf("%d partitions: chart %v, note %q", len(rows), ok, note)
	}
	if _, _, _, ok := partitionChart(rows[:MaxPartitionLanes], 1, nil, nil); !ok {
		t.Errorf("%d partitions: no chart", MaxPartitionLanes)
	}
}
