package results

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
)

func TestWriteBenchParsesWithBenchfmt(t *testing.T) {
	r1 := fakeResult("default", "r1", cfg("acks", "all", "num.replica.fetchers", 1.0, "message.size", 1024.0, "run.id", "x1"), 52000, 45, 210)
	r2 := fakeResult("default", "r2", cfg("acks", "all", "num.replica.fetchers", 4.0, "message.size", 1024.0, "run.id", "x2"), 61000.5, 41, 190)
	r2.E2ELatencyUs = r2.AckLatencyUs
	r1.Name = "my spec/with slash"
	var buf bytes.Buffer
	if err := WriteBench(&buf, r1, r2); err != nil {
		t.Fatal(err)
	}
	golden(t, "bench.txt", buf.Bytes())

	rd := benchfmt.NewReader(bytes.NewReader(buf.Bytes()), "bench.txt")
	var got []*benchfmt.Result
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.Result:
			got = append(got, rec.Clone())
		case *benchfmt.SyntaxError:
			t.Fatalf("benchfmt: %v", rec)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("parsed %d results, want 2", len(got))
	}
	if g := got[0].GetConfig("goos"); g != "linux" {
		t.Errorf("goos config %q", g)
	}
	if g := got[0].GetConfig("cpu"); g != "Test CPU @ 2.0GHz" {
		t.Errorf("cpu config %q", g)
	}
	base, parts := got[1].Name.Parts()
	if string(base) != "Replication" {
		t.Errorf("base name %q", base)
	}
	joined := string(bytes.Join(parts, nil))
	if joined != "/default/acks=all/num.replica.fetchers=4-2" {
		t.Errorf("name parts %q", joined)
	}
	if strings.Contains(string(got[0].Name), " ") || !strings.Contains(string(got[0].Name), "my_spec_with_slash") {
		t.Errorf("unsafe name kept: %q", got[0].Name)
	}
	if got[1].Iters != 610005 {
		t.Errorf("N = %d, want records 610005", got[1].Iters)
	}
	want := map[string]float64{"records/s": 61000.5, "MB/s": 61000.5 * 1024 / 1e6, "p50-ack-µs": 41, "p99-ack-µs": 190, "p999-ack-µs": 285, "p99-hwlag-µs": 20, "p99-e2e-µs": 190}
	vals := map[string]float64{}
	for _, v := range got[1].Values {
		if v.OrigUnit != "" { // benchfmt tidies MB/s into B/s and keeps the original
			vals[v.OrigUnit] = v.OrigValue
		} else {
			vals[v.Unit] = v.Value
		}
	}
	for u, w := range want {
		if g, ok := vals[u]; !ok || g != w {
			t.Errorf("unit %s: got %v (present %v), want %v", u, g, ok, w)
		}
	}
	for _, v := range got[0].Values {
		if v.Unit == "p99-e2e-µs" {
			t.Errorf("r1 has no e2e histogram but bench.txt reports %v", v)
		}
	}
}

func TestWriteBenchNoResults(t *testing.T) {
	if err := WriteBench(&bytes.Buffer{}); err == nil {
		t.Error("no error for zero results")
	}
}
