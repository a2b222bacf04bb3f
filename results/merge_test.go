package results

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// workerDir writes a worker's run dir: result.json with histograms of the given values and a
// timeline of rows 0.1 s apart.
func workerDir(t *testing.T, k, n int, start time.Time, measureShift time.Duration, peers map[string]float64, acks []int64, rps float64) string {
	t.Helper()
	dir := t.TempDir()
	h := NewHistogram()
	for _, v := range acks {
		h.Record(v)
	}
	r := &Result{Schema: SchemaVersion, ID: "w", Name: "workers", Target: "kafka://h:1", StartedAt: start, DurationS: 2,
		Config: map[string]any{"acks": "all", "producers.rate": 600.0}, AckLatencyUs: Summarize(h), HWLagUs: Summarize(NewHistogram()),
		E2ELatencyUs: Summarize(h), SendDelayUs: Summarize(NewHistogram()),
		Produced:   Produced{Records: int64(len(acks)), Bytes: int64(len(acks)) * 100, Errors: map[string]int64{"REQUEST_TIMED_OUT": int64(k)}},
		Durability: Durability{DurabilityCounts: DurabilityCounts{Acked: int64(len(acks)), Verified: int64(len(acks))}},
		Worker:     &WorkerInfo{Index: k, Count: n, StartAt: start, MeasureStart: start.Add(time.Second + measureShift), PeerDelayMinUs: peers}}
	if err := WriteResult(filepath.Join(dir, "result.json"), r); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "timeline.csv"))
	if err != nil {
		t.Fatal(err)
	}
	tl, _ := NewTimeline(f, "leaders")
	for i := 1; i <= 3; i++ {
		tl.Write(TimelineRow{T: float64(i) / 10, RecordsPerS: rps, AckP99Us: float64(100 * k), ISRMin: 3, ISRMax: 3, Extra: []any{"[0 1 2]"}})
	}
	tl.Flush()
	f.Close()
	return dir
}

// TestMergeRuns: the merged histogram is exactly the merge of the workers', counts are summed,
// the clock offset of worker 2 is half the difference of the two directions within half their
// sum, timelines align by wall time; bad sets of runs are refused naming what is wrong.
func TestMergeRuns(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	// Worker 2's clock is 3 ms ahead: 1's records look 3 ms slower at 2 (+ 1 ms transit), 2's
	// records look 3 ms faster at 1 (+ 1 ms transit).
	d1 := workerDir(t, 1, 2, start, 0, map[string]float64{"1": 800, "2": -2000}, []int64{100, 200, 300}, 300)
	d2 := workerDir(t, 2, 2, start, 3*time.Millisecond, map[string]float64{"1": 4000, "2": 900}, []int64{150, 250, 5000, 7}, 301)
	out := t.TempDir()
	m, err := MergeRuns([]string{d2, d1}, out)
	if err != nil {
		t.Fatal(err)
	}
	want := NewHistogram()
	for _, v := range []int64{100, 200, 300, 150, 250, 5000, 7} {
		want.Record(v)
	}
	if m.AckLatencyUs.Hdr != Summarize(want).Hdr || m.AckLatencyUs.Count != 7 || m.E2ELatencyUs.Count != 7 {
		t.Errorf("merged ack %+v, want the merge of both", m.AckLatencyUs)
	}
	if m.Produced.Records != 7 || m.Produced.RecordsPerSec != 3.5 || m.Produced.Errors["REQUEST_TIMED_OUT"] != 3 || m.Durability.Acked != 7 || m.Durability.Verified != 7 {
		t.Errorf("merged produced %+v durability %+v", m.Produced, m.Durability)
	}
	w2 := m.Merged.Workers[1]
	if w2.Index != 2 || w2.ClockOffsetUs == nil || *w2.ClockOffsetUs != 3000 || *w2.ClockBoundUs != 1000 {
		t.Errorf("worker 2 clock %+v", w2)
	}
	back, err := ReadResult(filepath.Join(out, "result.json"))
	if err != nil || back.AckLatencyUs.Hdr != m.AckLatencyUs.Hdr {
		t.Fatalf("merged result.json: %v", err)
	}
	f, err := os.Open(filepath.Join(out, "timeline.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, extra, err := ReadTimeline(f)
	f.Close()
	if err != nil || len(rows) != 3 || len(extra) != 1 || extra[0] != "workers" {
		t.Fatalf("merged timeline: %v rows %+v extra %v", err, rows, extra)
	}
	// Worker 2 measured from 3 ms later on a clock 3 ms ahead: the same wall time.
	if rows[0].T != 0.1 || rows[0].RecordsPerS != 601 || rows[0].AckP99Us != 200 || rows[0].Extra[0] != "2" {
		t.Errorf("merged row %+v", rows[0])
	}
	for _, f := range []string{"ack_latency.hgrm", "bench.txt"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}

	d3 := workerDir(t, 2, 3, start, 0, nil, []int64{1}, 1)
	other := workerDir(t, 2, 2, start.Add(time.Second), 0, nil, []int64{1}, 1)
	for _, tc := range []struct {
		dirs []string
		want string
	}{
		{[]string{d1}, "1 of 2 workers given; missing worker 2"},
		{[]string{d1, d1}, "worker 1 given twice"},
		{[]string{d1, d3}, "is worker 2/3"},
		{[]string{d1, other}, "started at 2026-05-01T12:00:01Z"},
		{[]string{t.TempDir()}, "no such file"},
	} {
		if _, err := MergeRuns(tc.dirs, t.TempDir()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("merge %v: %v, want %q", tc.dirs, err, tc.want)
		}
	}
	cfgDiff := workerDir(t, 2, 2, start, 0, nil, []int64{1}, 1)
	r, _ := ReadResult(filepath.Join(cfgDiff, "result.json"))
	r.Config["producers.rate"] = 900.0
	WriteResult(filepath.Join(cfgDiff, "result.json"), r)
	if _, err := MergeRuns([]string{d1, cfgDiff}, t.TempDir()); err == nil || !strings.Contains(err.Error(), "producers.rate=900") {
		t.Errorf("merge of different configs: %v", err)
	}
}

// TestPrintSummaryExternalGolden: the lines a kafka:// run adds (client HW lag, the observer's
// resolution, the target's settings, exec fault statuses).
func TestPrintSummaryExternalGolden(t *testing.T) {
	r := fakeResult("exec-stop", "20261201-r1", cfg("acks", "1"), 5000, 52, 640)
	h := NewHistogram()
	h.RecordN(900, 90)
	h.RecordN(4000, 10)
	ha, hs := Summarize(h), Summarize(h)
	r.HWLagClientUs, r.HWLagClientSendUs = &ha, &hs
	r.HWObserver = &HWObserver{FetchMaxWaitMs: 5, Responses: 1200, Advances: 1100, ResolutionUs: 2400, WindowP50Us: 800, SeenBeforeAck: 3}
	r.TargetConfig = []TargetSetting{
		{Key: "num.replica.fetchers", Config: "num.replica.fetchers", Resource: "brokers", Value: "4", How: "incremental-alter-configs", Reported: map[string]string{"1": "4", "2": "4", "3": "4"}},
		{Key: "topic.min.insync.replicas", Config: "min.insync.replicas", Resource: "topic isrbench", Value: "2", How: "create-topic"},
		{Key: "replica.fetch.max.bytes", Config: "replica.fetch.max.bytes", Resource: "brokers", Value: "4194304", How: "assumed"},
	}
	r.Faults = []Fault{{AtS: 2, EndS: 5, Kind: "exec", Target: "broker=2", Exec: &ExecRun{ExitCode: 0}, Undo: &ExecRun{ExitCode: 1}, Error: "undo: exit status 1"}}
	var buf bytes.Buffer
	if err := PrintSummary(&buf, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary-external.txt", buf.Bytes())
}
