package results

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestResultRoundTrip(t *testing.T) {
	r := fakeResult("default", "r1", cfg("acks", "all", "num.replica.fetchers", 2.0, "isrbench.zero.copy", true), 50000, 40, 200)
	r.Durability = Durability{DurabilityCounts: DurabilityCounts{Acked: 10, Verified: 10}, ReplicasIdentical: true,
		ByAcks: map[string]DurabilityCounts{"all": {Acked: 10, Verified: 10}}}
	r.Faults = []Fault{{AtS: 1.5, EndS: 3, Time: r.StartedAt, Kind: "pause-broker", Target: "broker=2"}}
	r.Files = Files{Hgrm: []string{"ack.hgrm"}, Timeline: "timeline.csv", Bench: "bench.txt", Profiles: []string{"cpu.pprof"}, Plots: []string{"latency.png"}}
	path := filepath.Join(t.TempDir(), "result.json")
	if err := WriteResult(path, r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResult(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", got, r)
	}
	// The JSON keys are the contract: spot-check a few.
	b, _ := os.ReadFile(path)
	for _, k := range []string{`"schema": 1`, `"started_at": "2026-11-29T16:00:00Z"`, `"records_per_sec"`, `"ack_latency_us"`, `"p999"`, `"p9999"`,
		`"hdr"`, `"under_replicated_s"`, `"replicas_identical"`, `"out_of_order"`, `"by_acks"`, `"num.replica.fetchers": 2`, `"profiles"`, `"cpus": 2`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("result.json lacks %s", k)
		}
	}
}

func TestReadResultErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body string
		want       []string
	}{
		{"syntax", "{\n\"schema\": 1,\n\"id\": }", []string{"line 3", "invalid JSON"}},
		{"type", `{"schema": 1, "produced": {"records": "many"}}`, []string{`"produced.records"`, "string"}},
		{"schema2", `{"schema": 2}`, []string{`"schema"`, "got 2, want 1"}},
		{"noschema", `{"id": "x"}`, []string{`"schema"`, "got 0"}},
		{"negcount", `{"schema": 1, "hw_lag_us": {"count": -1}}`, []string{"hw_lag_us.count"}},
		{"empty", ``, []string{"invalid JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name+".json")
			os.WriteFile(p, []byte(tt.body), 0o644)
			_, err := ReadResult(p)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append(tt.want, p) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if _, err := ReadResult(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCurrentEnv(t *testing.T) {
	e := CurrentEnv("deadbeef")
	if e.Go == "" || e.GOOS == "" || e.GOARCH == "" || e.CPUs < 1 || e.Commit != "deadbeef" {
		t.Errorf("CurrentEnv = %+v", e)
	}
}

func FuzzDecodeResult(f *testing.F) {
	f.Add([]byte(`{"schema":1,"ack_latency_us":{"count":3,"hdr":"x"}}`))
	f.Add([]byte(`{"schema":2}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeResult(b)
		if err == nil && r.Schema != SchemaVersion {
			t.Fatalf("accepted schema %d", r.Schema)
		}
	})
}

// TestCPUIdle: the driver, the governor when it differs, and haltpoll's guest_halt_poll_ns;
// nothing without a cpuidle driver.
func TestCPUIdle(t *testing.T) {
	sys := t.TempDir()
	put := func(p, v string) {
		t.Helper()
		p = filepath.Join(sys, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := cpuIdle(sys); got != "" {
		t.Errorf("no driver: %q", got)
	}
	put("devices/system/cpu/cpuidle/current_driver", "haltpoll")
	put("devices/system/cpu/cpuidle/current_governor_ro", "haltpoll")
	put("module/haltpoll/parameters/guest_halt_poll_ns", "0")
	if got, want := cpuIdle(sys), "haltpoll guest_halt_poll_ns=0"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	put("devices/system/cpu/cpuidle/current_driver", "intel_idle")
	put("devices/system/cpu/cpuidle/current_governor", "menu")
	if got, want := cpuIdle(sys), "intel_idle/menu"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
