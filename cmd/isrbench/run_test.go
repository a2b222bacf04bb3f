package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestRunSweepUsage(t *testing.T) {
	tmp := t.TempDir() // a failing run may leave its run directory behind
	for _, tc := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"run", "--set", "fetchers=2"}, 2, `unknown key "fetchers"`},
		{[]string{"run", "--set", "num.replica.fetchers=0"}, 2, "allowed 1..64"},
		{[]string{"run", "-w", "nosuch"}, 2, "no embedded spec"},
		{[]string{"run", "--profile", "cpu,disk"}, 2, `unknown profile kind "disk"`},
		{[]string{"run", "--target", "redis://x", "--out", tmp}, 1, "allowed embedded or kafka://"},
		{[]string{"run", "extra"}, 2, "unexpected arguments"},
		{[]string{"run", "--help"}, 0, "num.replica.fetchers (broker.num.replica.fetchers)"},
		{[]string{"sweep", "--vary", "acks"}, 2, "want key=v1,v2"},
		{[]string{"sweep", "--repeat", "0"}, 2, "--repeat 0"},
		{[]string{"sweep", "--vary", "acks=all,2"}, 2, "all|-1|1|0"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := exitCode(run(context.Background(), tc.args, &out, &errb), &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, errb.String(), tc.want)
			}
		})
	}
}

func TestRunAndSweepKafkaTarget(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	target := "kafka://" + strings.Join(c.ListenAddrs(), ",")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var so, se bytes.Buffer
	err = run(ctx, []string{"run", "--target", target, "--duration", "500ms", "--warmup", "0s",
		"--set", "rate=400", "--set", "partitions=2", "--out", out}, &so, &se)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, se.String())
	}
	if !strings.Contains(so.String(), "latency (µs)") {
		t.Fatalf("no summary table:\n%s", so.String())
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*", "result.json")); len(m) != 1 {
		t.Fatalf("result.json files %v", m)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*", "report.html")); len(m) != 1 {
		t.Fatalf("report.html files %v", m)
	}
	so.Reset()
	err = run(ctx, []string{"sweep", "--target", target, "--duration", "300ms", "--warmup", "0s",
		"--set", "rate=400", "--set", "partitions=2", "--vary", "acks=all,1", "--out", out}, &so, &se)
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, se.String())
	}
	if !strings.Contains(so.String(), "sweep.json") {
		t.Fatalf("sweep output:\n%s", so.String())
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*-sweep-default", "*", "result.json")); len(m) != 2 {
		t.Fatalf("sweep result.json files %v", m)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*-sweep-default", "report.html")); len(m) != 1 || !strings.Contains(so.String(), m[0]) {
		t.Fatalf("sweep report.html %v not named in the output:\n%s", m, so.String())
	}
}
