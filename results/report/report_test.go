package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/results"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Fixtures: real outputs of isrbench run / sweep / gate (files paths as a run with the default
// --out results/runs writes them), trimmed to what the pages read.
const (
	runFixture   = "testdata/runs/20261201-100134-follower-pause-7d4463"
	sweepFixture = "testdata/sweep/20261201-100202-sweep-default"
	gateFixture  = "testdata/gate/20261201-102124-gate-gate"
)

// testDefaults stand in for workloads.ReportDefaults (results must not import workloads):
// a few keys with isrbench's default, one where Kafka's differs.
var testDefaults = map[string]Default{
	"replica.lag.time.max.ms":   {Value: int64(30000)},
	"num.replica.fetchers":      {Value: 1},
	"replica.fetch.wait.max.ms": {Value: 500},
	"producers.rate":            {Value: 5000.0},
	"producers.acks":            {Value: "all"},
	"duration":                  {Value: "20s"},
	"isrbench.zero.copy":        {Value: true},
	"log.segment.bytes":         {Value: int64(67108864), Kafka: int64(1073741824)},
	"flush.messages":            {Value: int64(9223372036854775807)},
}

// pageData renders d as a page and returns its data block, indented, as the golden files hold it.
func pageData(t *testing.T, d *Data) []byte {
	t.Helper()
	page, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ExtractData(page)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("the page's data block is not JSON: %v", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from the page's data block at line %d:\n got: %s\nwant: %s\n(go test -run %s -update rewrites it)", p, i+1, g, w, t.Name())
			}
		}
	}
}

// TestGoldenData pins the data block of a run, a sweep and a gate page built from real run
// directories.
func TestGoldenData(t *testing.T) {
	for _, tc := range []struct {
		name, dir string
		build     func(string, Options) (*Data, error)
	}{
		{"run", runFixture, BuildRun},
		{"sweep", sweepFixture, BuildSweep},
		{"gate", gateFixture, BuildGate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.build(tc.dir, Options{Defaults: testDefaults, Out: filepath.Join(tc.dir, FileName)})
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".golden.json", pageData(t, d))
		})
	}
}

func chartByID(d *Data, id string) *Chart {
	for i := range d.Charts {
		if d.Charts[i].ID == id {
			return &d.Charts[i]
		}
	}
	return nil
}

// TestRunPage checks what a reader relies on in the run page beyond the golden bytes.
func TestRunPage(t *testing.T) {
	d, err := BuildRun(runFixture, Options{Defaults: testDefaults})
	if err != nil {
		t.Fatal(err)
	}
	lat := chartByID(d, "latency")
	if lat == nil || len(lat.Series) != 4 {
		t.Fatalf("latency chart: %+v", lat)
	}
	for _, s := range lat.Series {
		if len(s.X) < 20 {
			t.Errorf("%s: %d points: not the full-resolution distribution", s.Name, len(s.X))
		}
		for i := 1; i < len(s.X); i++ {
			if s.X[i] <= s.X[i-1] || s.Y[i] < s.Y[i-1] {
				t.Fatalf("%s: not monotonic at %d: (%v,%v) after (%v,%v)", s.Name, i, s.X[i], s.Y[i], s.X[i-1], s.Y[i-1])
			}
		}
		if last := s.X[len(s.X)-1]; last >= 100 {
			t.Errorf("%s: last percentile %v: 100%% cannot be drawn on 1/(1-q)", s.Name, last)
		}
	}
	// The maximum is the last point (at the percentile of its rank).
	if ack := lat.Series[0]; ack.Y[len(ack.Y)-1] != d.Run.Latency[0].Max {
		t.Errorf("ack: last value %v, want max %v", ack.Y[len(ack.Y)-1], d.Run.Latency[0].Max)
	}
	tp := chartByID(d, "timeline-throughput")
	if tp == nil || len(tp.Bands) != 1 || tp.Bands[0].From != 2 || tp.Bands[0].To != 7 || !strings.Contains(tp.Bands[0].Label, "pause-broker") {
		t.Fatalf("throughput chart: fault window %+v", tp)
	}
	isr := chartByID(d, "timeline-isr")
	var shrinks, expands int
	for _, m := range isr.Marks {
		switch m.Kind {
		case "shrink":
			shrinks++
		case "expand":
			expands++
		}
	}
	if shrinks != 4 || expands != 4 || len(d.Run.ISR.Events) != 8 {
		t.Errorf("ISR marks: %d shrinks, %d expands, %d events; want 4, 4, 8", shrinks, expands, len(d.Run.ISR.Events))
	}
	lanes := chartByID(d, "timeline-partitions")
	if lanes == nil || len(lanes.Series) != 6 {
		t.Fatalf("partition lanes: %+v", lanes)
	}
	if p0 := lanes.Series[0]; len(p0.Y) < 3 || p0.Y[0] != 3 || p0.Y[1] != 2 {
		t.Errorf("partition 0's ISR sizes %v, want 3 then 2 (paused follower) then 3", p0.Y)
	}
	rows := map[string]ConfigRow{}
	for _, r := range d.Run.Config {
		rows[r.Key] = r
	}
	if r := rows["replica.lag.time.max.ms"]; !r.Differs || r.Value != "2000" || r.Default != "30000" {
		t.Errorf("replica.lag.time.max.ms: %+v, want 2000 differing from 30000", r)
	}
	if r := rows["log.segment.bytes"]; r.Differs || !r.DiffersKafka || r.Kafka != "1073741824" {
		t.Errorf("log.segment.bytes: %+v, want isrbench's default, not Kafka's", r)
	}
	if r := rows["flush.messages"]; r.Differs || r.Value != "9223372036854775807" {
		t.Errorf("flush.messages: %+v, want the exact default, not a float", r)
	}
	if r := rows["target"]; r.Differs || r.Default != "" {
		t.Errorf("target: %+v: has no default", r)
	}
	if d.Run.Cost != nil {
		t.Errorf("cost %+v from a result without one", d.Run.Cost)
	}
	var kinds []string
	for _, f := range d.Run.Files {
		kinds = append(kinds, f.Kind+":"+f.Href)
	}
	want := "result:result.json histogram:ack_latency.hgrm histogram:hw_lag.hgrm histogram:e2e_latency.hgrm histogram:send_delay.hgrm timeline:timeline.csv partitions:partitions.csv faults:faults.json bench:bench.txt"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("files:\n got %s\nwant %s", got, want)
	}
}

// TestCost renders result.json's cost object generically, whatever its keys.
func TestCost(t *testing.T) {
	dir := copyRun(t)
	p := filepath.Join(dir, resultFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["cost"] = json.RawMessage(`{"cpu_us_per_record": 41.5, "syscalls_per_record": {"write": 0.25, "sendfile": 0.5}, "scope": "cluster and clients", "note": null}`)
	b, _ = json.Marshal(m)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := BuildRun(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Run.Cost
	if c == nil || len(c.Numbers) != 3 || c.Numbers[0] != (KVNum{"cpu_us_per_record", 41.5}) ||
		c.Numbers[1] != (KVNum{"syscalls_per_record.sendfile", 0.5}) || len(c.Texts) != 1 || c.Texts[0].Value != "cluster and clients" {
		t.Fatalf("cost %+v", c)
	}
	page, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("syscalls_per_record.sendfile")) || bytes.Contains(page, []byte("has no <code>cost</code>")) {
		t.Error("the page does not show the cost table")
	}

	m["cost"] = json.RawMessage(`[1, 2]`)
	b, _ = json.Marshal(m)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// result.json's reader (results.Cost) rejects it before the page's generic reader would.
	if _, err := BuildRun(dir, Options{}); err == nil || !strings.Contains(err.Error(), `field "cost"`) {
		t.Errorf("a cost array: err %v, want one naming the field", err)
	}
}

// copyRun copies the run fixture into a temporary directory named like the run.
func copyRun(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(runFixture))
	if err := os.CopyFS(dst, os.DirFS(runFixture)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestBuildDispatch: Build picks the page kind from what the directory holds, and a comparison
// of several directories labels its points by directory.
func TestBuildDispatch(t *testing.T) {
	for _, tc := range []struct{ dir, kind string }{
		{runFixture, "run"}, {filepath.Join(runFixture, resultFile), "run"}, {sweepFixture, "sweep"}, {gateFixture, "comparison"},
	} {
		d, err := Build([]string{tc.dir}, Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.dir, err)
		}
		if d.Kind != tc.kind {
			t.Errorf("%s: kind %s, want %s", tc.dir, d.Kind, tc.kind)
		}
	}
	base, nw := filepath.Join(gateFixture, "base"), filepath.Join(gateFixture, "new")
	if _, err := Build([]string{base, nw}, Options{}); err == nil {
		t.Error("several directories without an output path: no error")
	}
	d, err := Build([]string{base, nw}, Options{Out: filepath.Join(t.TempDir(), "cmp.html")})
	if err != nil {
		t.Fatal(err)
	}
	m := d.Multi
	if len(m.Points) != 2 || m.Points[0].Label != base || len(m.Points[0].Runs) != 5 || m.Gate != nil {
		t.Fatalf("points %+v", m.Points)
	}
	// The new side ran with isrbench.produce.delay=300µs: that is the axis.
	if len(m.Axes) != 1 || m.Axes[0].Key != "isrbench.produce.delay" || strings.Join(m.Axes[0].Values, ",") != "0s,5ms" {
		t.Errorf("axes %+v", m.Axes)
	}
	if _, err := Build([]string{t.TempDir()}, Options{}); err == nil {
		t.Error("an empty directory: no error")
	}
}

// TestGatePage: the verdict of gate.json is on the page, per metric.
func TestGatePage(t *testing.T) {
	d, err := BuildGate(gateFixture, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := d.Multi.Gate
	if v == nil || len(v.Rows) == 0 {
		t.Fatal("no verdict")
	}
	verdicts := map[string]string{}
	for _, r := range v.Rows {
		verdicts[r.Metric] = r.Verdict
	}
	if v.Passed || verdicts["p50-ack"] != "regression" || verdicts["records/s"] != "no significant change" {
		t.Errorf("passed %v, verdicts %v", v.Passed, verdicts)
	}
	page, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"✗ failed", "✗ regression", "✓ improvement", "REGRESSION p50-ack"} {
		if !bytes.Contains(page, []byte(s)) {
			t.Errorf("page lacks %q", s)
		}
	}
}

func TestWriteAtomicMode(t *testing.T) {
	dir := copyRun(t)
	p, err := WriteRun(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 || filepath.Base(p) != FileName {
		t.Errorf("%s mode %v", p, st.Mode())
	}
	// A directory that cannot be written reports the failure.
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	if os.Geteuid() != 0 { // root writes anyway
		if _, err := WriteRun(dir, Options{}); err == nil || !strings.Contains(err.Error(), "report.html") {
			t.Errorf("read-only dir: err %v", err)
		}
	}
	if _, err := WriteRun(filepath.Join(dir, "missing"), Options{}); err == nil {
		t.Error("missing dir: no error")
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{272, "272\u00a0µs"}, {4743167, "4.743\u00a0s"}, {2897, "2.897\u00a0ms"}, {0, "0\u00a0µs"}} {
		if got := fmtUs(tc.v); got != tc.want {
			t.Errorf("fmtUs(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v    float64
		want string
	}{{9, "9"}, {2.048, "2.048"}, {52130, "52.13k"}, {3000, "3000"}, {2.5e6, "2.5M"}} {
		if got := fmtShort(tc.v); got != tc.want {
			t.Errorf("fmtShort(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	if got := fmtInt(18432000); got != "18,432,000" {
		t.Errorf("fmtInt = %q", got)
	}
}

// TestRunProbeRow: a run with a one-at-a-time probe shows it as a latency row and as a curve
// of the latency chart, after the others (whose colours stay); one without shows neither.
func TestRunProbeRow(t *testing.T) {
	dir := copyRun(t)
	res, err := results.ReadResult(filepath.Join(dir, resultFile))
	if err != nil {
		t.Fatal(err)
	}
	h := results.NewHistogram()
	h.RecordN(70, 900)
	h.RecordN(210, 100)
	res.Probe = &results.Probe{Records: 1000, Warmup: 6, Acks: "all", AckLatencyUs: results.Summarize(h)}
	res.Probe.Queueing = results.NewQueueing(res.AckLatencyUs, res.Probe.AckLatencyUs)
	if err := results.WriteResult(filepath.Join(dir, resultFile), res); err != nil {
		t.Fatal(err)
	}
	for _, withProbe := range []bool{true, false} {
		d, err := BuildRun(map[bool]string{true: dir, false: runFixture}[withProbe], Options{})
		if err != nil {
			t.Fatal(err)
		}
		var row *LatencyRow
		for i, r := range d.Run.Latency {
			if r.Name == "ack, one at a time" {
				row = &d.Run.Latency[i]
			}
		}
		var styles []string
		for _, c := range d.Charts {
			if c.ID == "latency" {
				for _, s := range c.Series {
					styles = append(styles, fmt.Sprintf("%s:%d", s.Name, s.Style))
				}
			}
		}
		got := strings.Join(styles, ",")
		if !withProbe {
			if row != nil || strings.Contains(got, "one at a time") || d.Run.Queueing != nil {
				t.Errorf("no probe: row %+v, series %s", row, got)
			}
			continue
		}
		if q := d.Run.Queueing; q == nil || *q != *res.Probe.Queueing {
			t.Errorf("page queueing %+v, want %+v", q, res.Probe.Queueing)
		}
		if row == nil || row.Count != 1000 || row.P50 != 70 || row.Field != "probe.ack_latency_us" {
			t.Fatalf("probe row %+v in %+v", row, d.Run.Latency)
		}
		if want := "ack:0,hw lag:1,e2e:2,send delay:3,ack, one at a time:"; !strings.HasPrefix(got, want) {
			t.Errorf("latency series %s, want them to begin %s", got, want)
		}
	}
}

// TestRunPageEnv: the page's header names the host's cpuidle setting and the threads'
// scheduling policy, the two host-side settings that move its latencies and CPU.
func TestRunPageEnv(t *testing.T) {
	dir := copyRun(t)
	res, err := results.ReadResult(filepath.Join(dir, resultFile))
	if err != nil {
		t.Fatal(err)
	}
	res.Env.CPUIdle, res.Env.Sched = "haltpoll guest_halt_poll_ns=0", "batch"
	if err := results.WriteResult(filepath.Join(dir, resultFile), res); err != nil {
		t.Fatal(err)
	}
	d, err := BuildRun(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	page, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cpuidle haltpoll guest_halt_poll_ns=0", "threads batch"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page header without %q", want)
		}
	}
}
