package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestRunSweepUsage(t *testing.T) {
	tmp := t.TempDir() // a failing run may leave its run directory behind
	spec := func(name, yaml string) string {
		p := filepath.Join(tmp, name+".yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	otherTopic := spec("other-topic", "name: other-topic\nfaults: [{at: 1s, duration: 1s, kind: pause-broker, target: \"leader-of:orders-0\"}]\n")
	dupKey := spec("dup-key", "name: dup\nproducers:\n  rate: 100\n  count: 1\n  rate: 200\n")
	laughs := spec("laughs", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n")
	base := filepath.Join(tmp, "baseline")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"run", "--set", "fetchers=2"}, 2, `unknown key "fetchers"`},
		{[]string{"run", "--set", "num.replica.fetchers=0"}, 2, "allowed 1..64"},
		{[]string{"run", "-w", "nosuch"}, 2, "no embedded spec"},
		{[]string{"run", "--profile", "cpu,disk"}, 2, `unknown profile kind "disk"`},
		{[]string{"run", "--target", "redis://x", "--out", tmp}, 2, "allowed embedded, kfake or kafka://"},
		{[]string{"run", "--target", "bogus://x", "--out", tmp}, 2, `--target: target "bogus://x": allowed embedded, kfake or kafka://host:port[,host:port]`},
		{[]string{"run", "--target", "kafka://", "--out", tmp}, 2, "want kafka://host:port"},
		{[]string{"run", "--target", "kafka://h:0", "--out", tmp}, 2, `port "0" is not a number in 1..65535`},
		{[]string{"run", "--target", "kafka://:9092", "--out", tmp}, 2, `":9092" is not host:port`},
		{[]string{"run", "-w", "leader-kill", "--target", "kafka://127.0.0.1:9092", "--out", tmp}, 2, "has 3 faults of kinds that need the embedded target"},
		{[]string{"run", "--duration", "0s"}, 2, "--duration: duration: 0s is out of range; allowed 100ms..24h0m0s"},
		{[]string{"run", "--duration", "-1s"}, 2, "duration: -1s is out of range"},
		{[]string{"run", "--warmup", "-5s"}, 2, "--warmup: warmup: -5s is out of range; allowed 0s..1h0m0s"},
		{[]string{"run", "--duration", "5"}, 2, `"5" is not a duration`},
		{[]string{"run", "--set", "duration=0"}, 2, "--set duration=0: duration: 0s is out of range; allowed 100ms..24h0m0s"},
		{[]string{"run", "--duration", "2s", "--set", "duration=3s"}, 2, "--duration 2s and --set duration=3s both set duration; give one"},
		{[]string{"run", "-w", otherTopic}, 2, `names topic "orders", which the spec does not have (its topic is isrbench`},
		{[]string{"run", "-w", dupKey}, 2, `line 5: duplicate key "producers.rate" (first at line 3)`},
		{[]string{"run", "-w", laughs}, 2, "more than 100000 YAML nodes"},
		{[]string{"run", "-w", tmp}, 2, "is a directory"},
		{[]string{"run", "--set", "producers.count=0", "--set", "consumers.count=0"}, 2, "nothing to run or measure"},
		{[]string{"run", "--set", "queued.max.request.bytes=1000"}, 2, "is less than socket.request.max.bytes"},
		{[]string{"sweep", "--vary", "acks=all,1,all"}, 2, "value all given twice; use --repeat N"},
		{[]string{"run", "--assume", "replica.fetch.max.bytes=4194304"}, 2, "--assume applies to a kafka:// target"},
		{[]string{"run", "--assume", "producers.rate=5", "--target", "kafka://127.0.0.1:1"}, 2, "producers.rate is not a broker setting; allowed"},
		{[]string{"run", "--assume", "num.replica.fetchers=2", "--set", "num.replica.fetchers=3", "--target", "kafka://127.0.0.1:1"}, 2, "the spec sets num.replica.fetchers=3; give one value"},
		{[]string{"run", "--assume", "replica.fetch.max.bytes", "--target", "kafka://127.0.0.1:1"}, 2, "want key=value"},
		{[]string{"run", "--worker", "2/3", "--target", "kafka://127.0.0.1:1"}, 2, "--worker K/N and --start-at TIME go together"},
		{[]string{"run", "--worker", "4/3", "--start-at", "2026-05-01T12:00:00Z", "--target", "kafka://127.0.0.1:1"}, 2, "want K/N with 1 <= K <= N"},
		{[]string{"run", "--worker", "1/3", "--start-at", "noon", "--target", "kafka://127.0.0.1:1"}, 2, "want an RFC 3339 time"},
		{[]string{"run", "--worker", "1/3", "--start-at", "2026-05-01T12:00:00Z"}, 2, "give --target kafka://"},
		{[]string{"run", "--worker", "3/3", "--start-at", "2026-05-01T12:00:00Z", "--set", "producers.count=2", "--target", "kafka://127.0.0.1:1"}, 2, "worker 3 has none; set producers.count >= 3"},
		{[]string{"run", "--set", "group.id=g", "--worker", "1/2", "--start-at", "2026-05-01T12:00:00Z", "--target", "kafka://127.0.0.1:1"}, 2, "with consumers.group.id"},
		{[]string{"sweep", "--vary", "replica.fetch.max.bytes=1048576,4194304", "--target", "kafka://127.0.0.1:1"}, 2, "read-only broker config (Kafka changes it only with a restart)"},
		{[]string{"merge", "x"}, 2, "--out DIR is required"},
		{[]string{"merge", "--out", tmp}, 2, "no run directories"},
		{[]string{"merge", "--out", tmp, tmp}, 2, "no such file"},
		{[]string{"link", "slow", "1"}, 2, "slow needs latency or bandwidth"},
		{[]string{"link", "down", "1", "--latency", "5ms"}, 2, "--latency apply only with link slow"},
		{[]string{"link", "cut", "1"}, 2, `unknown action "cut"`},
		{[]string{"link", "slow", "x", "--latency", "5ms"}, 2, "want an integer >= 0"},
		{[]string{"sweep", "--duration", "0s"}, 2, "duration: 0s is out of range"},
		{[]string{"gate", "--baseline", base, "--duration", "0s"}, 2, "duration: 0s is out of range"},
		{[]string{"gate", "--baseline", base, "--warmup", "-1s"}, 2, "warmup: -1s is out of range"},
		{[]string{"gate", "--binary", "/bin/true", "--target", "bogus://"}, 2, `target "bogus://": allowed embedded`},
		{[]string{"run", "extra"}, 2, "unexpected arguments"},
		{[]string{"run", "--help"}, 0, "num.replica.fetchers (broker.num.replica.fetchers)"},
		{[]string{"serve", "--help"}, 0, "replica.lag.time.max.ms                        long ms, default 30000, allowed 2..9223372036854, read-only"},
		{[]string{"serve", "--set", "replica.lag.time.max.ms=1"}, 2, "replica.lag.time.max.ms: 1 is out of range; allowed 2..9223372036854"},
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
