package results

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
)

func ptrf(v float64) *float64 { return &v }

// fakeCost is an embedded run's cost object (the figures of a gate run on a 2-core machine).
func fakeCost() *Cost {
	return &Cost{Scope: CostScopeProcess, Records: 9000, WindowS: 3, CPUUsPerRecord: 312.5, CPUUserUsPerRecord: 180.25,
		CPUSystemUsPerRecord: 132.25, CPUCores: 0.9375, CPUUsPerRequest: 91.9, AllocsPerRequest: 31.9, SyscallsPerRequest: 8.24, CPUClusterUsPerRecord: ptrf(181.2), CPUClientsUsPerRecord: ptrf(52.1),
		CPUOtherUsPerRecord: ptrf(79.2), CPUSplitSamples: 281, CPUSplitSource: "cost profile", CPUProfileCoverage: 0.9,
		AllocsPerRecord: 108.5, AllocBytesPerRecord: 11345.5, GCCycles: 3, GCCPUUsPerRecord: 1.25,
		SyscallsPerRecord: map[string]float64{"read": 10.5, "write": 7.75, "sendfile": 2.5, "sendmsg": 5, "pread": 0,
			"pwrite": 0, "pwritev": 2.25, "fsync": 0.001, "io_uring_enter": 0, "total": 28.001},
		ProduceRequestsPerRecord: 0.9, FetchRequestsPerRecord: 2.5, ReplicaFetchRequestsPerRecord: 1.75, FetchResponsesPerRecord: 2.5,
		FollowerFetchRequestsPerRecord: 1.75, FollowerFetchResponsesPerRecord: 1.75,
		BytesCopiedPerRecord: 7800, BytesCopiedByPath: map[string]float64{"socket_read": 3900, "socket_write": 650, "file_read": 0, "file_write": 3250},
		BytesZeroCopyPerRecord: 3250, VoluntaryCtxSwitchesPerRecord: 0.45, InvoluntaryCtxSwitchesPerRecord: 0.5,
		LocalUsPerRecord: 80.5, FollowerApplyUsPerRecord: 23.5, RunQueueWait: &RunQueueWait{UsPerRecord: 96.25, Threads: 0.289, UsPerSlice: 41.5},
		RequestTimePerRecord: map[string]RequestTime{"produce": {Requests: 0.9, LocalUs: 27, RemoteUs: 253.25, SendUs: 12},
			"replica_fetch": {Requests: 1.75, LocalUs: 20.5, RemoteUs: 900, SendUs: 9}, "consumer_fetch": {Requests: 0.75, LocalUs: 9.5, RemoteUs: 300, SendUs: 3},
			"other": {}}}
}

func TestPrintSummaryCostGolden(t *testing.T) {
	r := fakeResult("gate", "20261201-r1", cfg("acks", "all"), 3000, 410, 4100)
	r.Cost = fakeCost()
	var buf bytes.Buffer
	if err := PrintSummary(&buf, r); err != nil {
		t.Fatal(err)
	}
	// A kafka:// run: the clients' side only, said in the table's note.
	k := fakeResult("gate", "20261201-r2", cfg("acks", "all"), 3000, 410, 4100)
	k.Target = "kafka://127.0.0.1:9092"
	k.Cost = &Cost{Scope: CostScopeClients, Records: 9000, WindowS: 3, CPUUsPerRecord: 95.5, CPUUserUsPerRecord: 70, CPUSystemUsPerRecord: 25.5,
		CPUCores: 0.287, AllocsPerRecord: 40, AllocBytesPerRecord: 4100, GCCycles: 1, GCCPUUsPerRecord: 0.5,
		Note: "the cluster is not in this process: only the clients' side is known"}
	if err := PrintSummary(&buf, k); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary-cost.txt", buf.Bytes())
	if strings.Contains(buf.String()[strings.Index(buf.String(), "20261201-r2"):], "cluster syscalls") {
		t.Error("the kafka:// run shows cluster-side rows")
	}
}

func TestCostJSONKeys(t *testing.T) {
	r := fakeResult("gate", "r1", cfg("acks", "all"), 3000, 410, 4100)
	r.Cost = fakeCost()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Cost map[string]any `json:"cost"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cpu_us_per_record", "allocs_per_record", "fetch_requests_per_record", "cpu_cluster_us_per_record",
		"local_us_per_record", "follower_apply_us_per_record"} {
		if v, ok := m.Cost[k].(float64); !ok || v <= 0 {
			t.Errorf("cost.%s = %v", k, m.Cost[k])
		}
	}
	rt, ok := m.Cost["request_time_per_record"].(map[string]any)
	if p, _ := rt["produce"].(map[string]any); !ok || len(rt) != len(RequestKinds) || p["local_us"] != 27.0 || p["remote_us"] != 253.25 {
		t.Errorf("cost.request_time_per_record = %v", m.Cost["request_time_per_record"])
	}
	if q, ok := m.Cost["run_queue_wait"].(map[string]any); !ok || q["us_per_record"] != 96.25 || q["threads"] != 0.289 || q["us_per_slice"] != 41.5 {
		t.Errorf("cost.run_queue_wait = %v", m.Cost["run_queue_wait"])
	}
	sys, ok := m.Cost["syscalls_per_record"].(map[string]any)
	if !ok || len(sys) != len(SyscallKinds)+1 || sys["sendfile"] != 2.5 {
		t.Errorf("cost.syscalls_per_record = %v", m.Cost["syscalls_per_record"])
	}
	back, err := DecodeResult(b)
	if err != nil || back.Cost == nil || *back.Cost.CPUClusterUsPerRecord != 181.2 {
		t.Fatalf("read back: %v, %+v", err, back.Cost)
	}
	// Without cost (older result.json files) the key is absent and the metrics have no sample.
	r.Cost = nil
	if b, _ := json.Marshal(r); bytes.Contains(b, []byte(`"cost"`)) {
		t.Error("a result without cost writes a cost key")
	}
	if _, ok := Metrics()["cpu/rec"].Get(r); ok {
		t.Error("cpu/rec has a sample without cost")
	}
}

func TestCostMetrics(t *testing.T) {
	r := fakeResult("gate", "r1", cfg("acks", "all"), 3000, 410, 4100)
	r.Cost = fakeCost()
	ms := Metrics()
	for name, want := range map[string]float64{"cpu/rec": 312.5, "cpu-cluster/rec": 181.2, "cpu-clients/rec": 52.1, "allocs/rec": 108.5,
		"alloc-bytes/rec": 11345.5, "syscalls/rec": 28.001, "produce-reqs/rec": 0.9, "fetch-reqs/rec": 2.5, "ctxsw/rec": 0.95,
		"copied-bytes/rec": 7800, "gc-cpu/rec": 1.25, "runq-wait/rec": 96.25, "cpu/req": 91.9, "allocs/req": 31.9, "syscalls/req": 8.24, "cpu-user/rec": 180.25, "cpu-sys/rec": 132.25} {
		m, ok := ms[name]
		if !ok {
			t.Errorf("metric %s unknown", name)
			continue
		}
		if got, ok := m.Get(r); !ok || got != want || m.HigherBetter {
			t.Errorf("%s = %v (%v), want %v, lower is better", name, got, ok, want)
		}
	}
	// The clients' scope has no cluster-side samples; no split, no split samples.
	r.Cost.Scope = CostScopeClients
	r.Cost.CPUClusterUsPerRecord = nil
	for _, name := range []string{"syscalls/rec", "fetch-reqs/rec", "cpu-cluster/rec", "cpu/req"} {
		if _, ok := ms[name].Get(r); ok {
			t.Errorf("%s has a sample for the clients' scope", name)
		}
	}
	if _, ok := ms["cpu/rec"].Get(r); !ok {
		t.Error("cpu/rec has no sample for the clients' scope")
	}
	// Where the kernel keeps no scheduler statistics, runq-wait/rec has no sample.
	r.Cost.RunQueueWait = nil
	if _, ok := ms["runq-wait/rec"].Get(r); ok {
		t.Error("runq-wait/rec has a sample without run_queue_wait")
	}
}

func TestWriteBenchCost(t *testing.T) {
	r := fakeResult("gate", "r1", cfg("acks", "all"), 3000, 410, 4100)
	r.Cost = fakeCost()
	r.Cost.CPUUsPerRecord = 312.123456789
	var buf bytes.Buffer
	if err := WriteBench(&buf, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "bench-cost.txt", buf.Bytes())
	rd := benchfmt.NewReader(bytes.NewReader(buf.Bytes()), "bench.txt")
	vals := map[string]float64{}
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.Result:
			for _, v := range rec.Values {
				u, x := v.Unit, v.Value
				if v.OrigUnit != "" {
					u, x = v.OrigUnit, v.OrigValue
				}
				vals[u] = x
			}
		case *benchfmt.SyntaxError:
			t.Fatalf("benchfmt: %v", rec)
		}
	}
	for u, want := range map[string]float64{"cpu-µs/record": 312.123, "allocs/record": 108.5, "syscalls/record": 28.001,
		"sys-sendfile/record": 2.5, "fetch-reqs/record": 2.5, "cpu-µs/request": 91.9, "cpu-cluster-µs/record": 181.2, "zerocopy-B/record": 3250} {
		if got, ok := vals[u]; !ok || got != want {
			t.Errorf("bench unit %s = %v (present %v), want %v", u, got, ok, want)
		}
	}
}

func TestPrintSweepCost(t *testing.T) {
	a := fakeResult("default", "r", cfg("num.replica.fetchers", 1.0), 5000, 40, 300)
	b := fakeResult("default", "r", cfg("num.replica.fetchers", 2.0), 5000, 40, 300)
	a.Cost = fakeCost()
	var buf bytes.Buffer
	if err := PrintSweep(&buf, []*Result{a, b}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "µs/rec") || !strings.Contains(buf.String(), "312.5") || !strings.Contains(buf.String(), "28.00") {
		t.Fatalf("sweep table without cost columns:\n%s", buf.String())
	}
}

// A per-metric alpha: the same partly overlapping samples (p ~ 0.015) regress at 0.05, not at
// the global 0.01.
func TestComparePerMetricAlpha(t *testing.T) {
	var base, nw []*Result
	for _, v := range []struct{ b, n float64 }{{300, 331}, {302, 333}, {305, 304}, {301, 336}, {299, 302.5}, {303, 330}} {
		b := fakeResult("gate", "b", cfg("acks", "all"), 3000, 400, 4000)
		b.Cost = &Cost{Scope: CostScopeProcess, Records: 9000, CPUUsPerRecord: v.b, CPUUsPerRequest: v.b / 4}
		n := fakeResult("gate", "n", cfg("acks", "all"), 3000, 400, 4000)
		n.Cost = &Cost{Scope: CostScopeProcess, Records: 9000, CPUUsPerRecord: v.n, CPUUsPerRequest: v.n / 4}
		base, nw = append(base, b), append(nw, n)
	}
	opts := CompareOptions{Alpha: 0.01, Metrics: []string{"cpu/rec", "cpu/req"}, Alphas: map[string]float64{"cpu/req": 0.05}}
	rep, err := Compare(base, nw, opts)
	if err != nil {
		t.Fatal(err)
	}
	rows := rep.Groups[0].Rows
	if rows[0].Regression || !rows[1].Regression || rows[0].Alpha != 0.01 || rows[1].Alpha != 0.05 || rows[0].P != rows[1].P {
		t.Fatalf("rows %+v", rows)
	}
	if len(rep.Regressions) != 1 || !strings.HasPrefix(rep.Regressions[0], "cpu/req: +") {
		t.Fatalf("regressions %v", rep.Regressions)
	}
	for _, bad := range []map[string]float64{{"p42": 0.05}, {"cpu/req": 1.5}} {
		if _, err := Compare(base, nw, CompareOptions{Alphas: bad}); err == nil {
			t.Errorf("alphas %v: no error", bad)
		}
	}
}
