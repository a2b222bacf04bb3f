package results

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
)

// probeResult is fakeResult with a one-at-a-time probe of p50 probeP50 (1000 records) and its
// queueing factors.
func probeResult(ackP50, ackP99, probeP50 float64) *Result {
	r := fakeResult("default", "20261203-r1", cfg("acks", "all"), 5000, ackP50, ackP99)
	h := NewHistogram()
	h.RecordN(int64(probeP50), 600)
	h.RecordN(int64(probeP50*3), 400)
	p := &Probe{Records: 1000, Warmup: 6, Acks: "all", AckLatencyUs: Summarize(h)}
	p.Queueing = NewQueueing(r.AckLatencyUs, p.AckLatencyUs)
	r.Probe = p
	return r
}

// TestQueueing: the factors are the load's ack p50 and p99 over the probe's p50, rounded to 3
// decimals, and there are none without samples on either side.
func TestQueueing(t *testing.T) {
	r := probeResult(150, 2000, 60)
	q := r.Probe.Queueing
	if q == nil || q.AckP50X != 2.5 || q.AckP99X != 33.333 {
		t.Fatalf("queueing %+v, want p50 150/60 = 2.5x, p99 2000/60 = 33.333x (probe p50 %v)", q, r.Probe.AckLatencyUs.P50)
	}
	if q := NewQueueing(Summary{}, r.Probe.AckLatencyUs); q != nil {
		t.Errorf("no load samples: %+v", q)
	}
	if q := NewQueueing(r.AckLatencyUs, Summary{}); q != nil {
		t.Errorf("no probe samples: %+v", q)
	}
	// The metrics compare and gate read.
	m := Metrics()
	for name, want := range map[string]float64{"p50-probe": 60, "queue-p50": 2.5, "queue-p99": 33.333} {
		mt, ok := m[name]
		if !ok {
			t.Errorf("metric %s missing", name)
			continue
		}
		if v, ok := mt.Get(r); !ok || v != want {
			t.Errorf("%s = %v, %v; want %v", name, v, ok, want)
		}
		if _, ok := mt.Get(fakeResult("default", "r2", cfg(), 5000, 150, 2000)); ok {
			t.Errorf("%s of a run without a probe is a sample", name)
		}
	}
	// result.json round trip.
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Probe == nil || back.Probe.Queueing == nil || *back.Probe.Queueing != *q || back.Probe.Records != 1000 || back.Probe.Warmup != 6 {
		t.Errorf("decoded probe %+v", back.Probe)
	}
	if !strings.Contains(string(b), `"probe":{"records":1000,"warmup":6,"acks":"all"`) || !strings.Contains(string(b), `"queueing":{"ack_p50_x":2.5,"ack_p99_x":33.333}`) {
		t.Errorf("result.json probe keys: %s", b[strings.Index(string(b), `"probe"`):][:200])
	}
}

// TestPrintSummaryProbe: the latency table's one-at-a-time row, the queueing line, and the
// lines when the factors could not be computed or probe records failed; bench.txt's units.
func TestPrintSummaryProbe(t *testing.T) {
	var buf bytes.Buffer
	r := probeResult(150, 2000, 60)
	if err := PrintSummary(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"│ ack, one at a time │  1000 │  60 │ 180 │  180 │   180 │    180 │  180 │  108 │",
		"queueing: ack p50 2.5x, p99 33.3x the one-at-a-time ack p50 (60 µs over 1000 records, acks=all, before the load)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	r.Probe.Errors = map[string]int64{"NOT_ENOUGH_REPLICAS": 3, "REQUEST_TIMED_OUT": 1}
	r.AckLatencyUs = Summarize(NewHistogram())
	r.Probe.Queueing = NewQueueing(r.AckLatencyUs, r.Probe.AckLatencyUs)
	if err := PrintSummary(&buf, r); err != nil {
		t.Fatal(err)
	}
	if want := "queueing: not measured: the load acknowledged no record (one at a time: ack p50 60 µs over 1000 records); probe records failed: NOT_ENOUGH_REPLICAS=3 REQUEST_TIMED_OUT=1\n"; !strings.Contains(buf.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, buf.String())
	}
	buf.Reset()
	if err := PrintSummary(&buf, fakeResult("default", "r3", cfg(), 5000, 150, 2000)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "one at a time") || strings.Contains(buf.String(), "queueing") {
		t.Errorf("a run without a probe shows one:\n%s", buf.String())
	}

	buf.Reset()
	if err := WriteBench(&buf, probeResult(150, 2000, 60)); err != nil {
		t.Fatal(err)
	}
	rd := benchfmt.NewReader(&buf, "bench.txt")
	var units map[string]float64
	for rd.Scan() {
		if res, ok := rd.Result().(*benchfmt.Result); ok {
			units = map[string]float64{}
			for _, v := range res.Values {
				units[v.Unit] = v.Value
			}
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	for unit, want := range map[string]float64{"p50-probe-µs": 60, "queue-p50-x": 2.5, "queue-p99-x": 33.333} {
		if units[unit] != want {
			t.Errorf("bench.txt %s = %v, want %v (units %v)", unit, units[unit], want, units)
		}
	}
}

// TestPrintSweepQueueing: a sweep whose runs had a probe shows their queueing factors, and a
// run without one a dash; a sweep without any has no such columns.
func TestPrintSweepQueueing(t *testing.T) {
	a := probeResult(150, 2000, 60)
	a.Config = cfg("producers.rate", 5000)
	b := fakeResult("default", "r2", cfg("producers.rate", 1000), 1000, 250, 500)
	var buf bytes.Buffer
	if err := PrintSweep(&buf, []*Result{a, b}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"│  ack  │ queue │ queue │ hw-lag │", "│  3000 │  2.5x │ 33.3x │     75 │", "│   750 │     - │     - │    125 │"} {
		if !strings.Contains(out, want) {
			t.Errorf("sweep table lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	if err := PrintSweep(&buf, []*Result{b}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "queue") {
		t.Errorf("a sweep without probes has queueing columns:\n%s", buf.String())
	}
}
