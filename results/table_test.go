package results

import (
	"bytes"
	"testing"
)

func TestPrintSummaryGolden(t *testing.T) {
	r := fakeResult("follower-pause", "20261129-r1", cfg("acks", "all"), 48123.4, 52, 640)
	r.Produced.Errors = map[string]int64{"NOT_ENOUGH_REPLICAS": 12, "REQUEST_TIMED_OUT": 3}
	r.ISR = ISR{Shrinks: 1, Expands: 1, UnderReplicatedS: 4.5}
	r.Durability = Durability{DurabilityCounts: DurabilityCounts{Acked: 481234, Verified: 481234}, ReplicasIdentical: true,
		ByAcks: map[string]DurabilityCounts{"all": {Acked: 481234, Verified: 481234}}}
	r.Faults = []Fault{{AtS: 3, EndS: 8, Kind: "pause-broker", Target: "broker=2"}}
	var buf bytes.Buffer
	if err := PrintSummary(&buf, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.txt", buf.Bytes())
}

func TestPrintSweepGolden(t *testing.T) {
	var rows []*Result
	for i, f := range []float64{1, 2, 4} {
		rows = append(rows, fakeResult("default", "r", cfg("acks", "all", "num.replica.fetchers", f, "run.id", float64(i)), 40000+f*5000, 40+f, 300-f*20))
	}
	rows[2].Durability.Lost = 0
	rows[1].Produced.Errors = map[string]int64{"NOT_ENOUGH_REPLICAS": 2}
	var buf bytes.Buffer
	if err := PrintSweep(&buf, rows); err != nil {
		t.Fatal(err)
	}
	golden(t, "sweep.txt", buf.Bytes())
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1.5: "1.500", 52.25: "52.25", 812: "812.0", 9999: "9999", 52130: "52.13k", 1234567: "1.235M", 2.5e9: "2.500G", -15000: "-15.00k"} {
		if got := FormatValue(v); got != want {
			t.Errorf("FormatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestPrintSummaryGroupGolden(t *testing.T) {
	r := fakeResult("group", "20261201-r1", cfg("acks", "all"), 5000, 52, 640)
	r.Durability = Durability{DurabilityCounts: DurabilityCounts{Acked: 100, Verified: 100}, ReplicasIdentical: true}
	r.Group = &ConsumerGroup{ID: "bench", Members: 2, Balancer: "range", Rebalances: 2, Source: "coordinator",
		RebalanceMs: SummarizeValues([]float64{120, 3010}), CommittedLag: SummarizeValues([]float64{0, 4800, 5100, 9000})}
	var buf bytes.Buffer
	if err := PrintSummary(&buf, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary-group.txt", buf.Bytes())
}

func TestSummarizeValues(t *testing.T) {
	s := SummarizeValues([]float64{5, 1, 3, 2, 4})
	if s.Count != 5 || s.Mean != 3 || s.P50 != 3 || s.P99 != 5 || s.Max != 5 {
		t.Fatalf("SummarizeValues: %+v", s)
	}
	if z := SummarizeValues(nil); z.Count != 0 {
		t.Fatalf("SummarizeValues(nil): %+v", z)
	}
}
