package gate

import (
	"bytes"
	"strings"
	"testing"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/results/report"
)

func TestNoise(t *testing.T) {
	opts := results.CompareOptions{Alpha: 0.01, Metrics: []string{"p50-ack", "cpu/rec"}}
	var vs []*report.Verdict
	for g := 0; g < 3; g++ {
		var base, nw []*results.Result
		for i := 0; i < 6; i++ {
			base = append(base, result(400+float64(10*i), 300+float64(i)))
			nw = append(nw, result(400+float64(10*i+g*5), 300+float64(i)+float64(g)*6)) // cpu +2% per g
		}
		_, v, err := Judge(base, nw, opts, "d", "d/base", "d/new")
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	ns := Noise(vs)
	if len(ns) != 2 || ns[0].Metric != "p50-ack" || ns[1].Metric != "cpu/rec" || ns[1].Gates != 3 {
		t.Fatalf("noise %+v", ns)
	}
	cpu := ns[1]
	if len(cpu.Changes) != 3 || cpu.Changes[0] != 0 || cpu.Changes[2] < 3.9 || cpu.Changes[2] > 4.1 || len(cpu.Spreads) != 6 || cpu.Thresholds[0] != 5 {
		t.Fatalf("cpu/rec noise %+v", cpu)
	}
	var out bytes.Buffer
	if err := PrintNoise(&out, ns); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "cpu/rec") || !strings.Contains(out.String(), "│           4% │") {
		t.Fatalf("noise table:\n%s", out.String())
	}
	if _, err := ReadVerdicts([]string{t.TempDir()}); err == nil {
		t.Fatal("a directory without gate.json: no error")
	}
}
