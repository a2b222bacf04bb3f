package workloads

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/load"
	"github.com/isrbench/isrbench/workloads/target"
)

// TestRunEmbedded runs the default workload briefly on the embedded cluster and checks the
// outputs a run must write (the contract checks read them).
func TestRunEmbedded(t *testing.T) {
	s := shortSpec(t, "duration=2s", "warmup=500ms", "producers.rate=2000")
	out := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the run's data dir goes here; it must be gone afterwards
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Run(ctx, s, Options{OutDir: out, Quiet: true, Profile: []string{"cpu"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, sum := range map[string]results.Summary{"ack": res.AckLatencyUs, "hw lag": res.HWLagUs, "e2e": res.E2ELatencyUs, "send delay": res.SendDelayUs} {
		if sum.Count == 0 || len(sum.Hdr) < 10 {
			t.Errorf("%s histogram: count %d, hdr %d bytes", name, sum.Count, len(sum.Hdr))
		}
	}
	if res.Target != "embedded" || res.Durability.Acked == 0 || res.Durability.Lost != 0 || !res.Durability.ReplicasIdentical {
		t.Errorf("target %s durability %+v notes %v", res.Target, res.Durability, res.Notes)
	}
	// The replicas were compared over the wire (replicaverify), not assumed.
	if c := res.Notes["durability.replicas_checked"]; !strings.HasPrefix(c, fmt.Sprintf("replicaverify: %d of %d partitions", s.Topic.Partitions, s.Topic.Partitions)) {
		t.Errorf("replica check note %q", c)
	}
	// ack, hw lag, e2e and send delay; the client-observed HW lag's two are not measured on
	// the embedded target by default (hw.lag.client=auto).
	if len(res.Files.Hgrm) != 4 || res.Files.Timeline == "" || res.Files.Bench == "" || res.HWLagClientUs != nil {
		t.Errorf("files %+v", res.Files)
	}
	if len(res.Files.Profiles) == 0 || !strings.Contains(res.Files.Profiles[0], "cpu") {
		t.Errorf("profiles %v", res.Files.Profiles)
	}
	b, err := os.ReadFile(res.Files.Bench)
	if err != nil || !strings.Contains(string(b), "\nBenchmark") {
		t.Errorf("bench.txt: %v %q", err, b)
	}
	// The temp data dir is gone.
	if left, _ := filepath.Glob(filepath.Join(tmp, "isrbench-run-*")); len(left) > 0 {
		t.Errorf("data dirs left behind: %v", left)
	}
}

// TestRunEmbeddedCancel: cancelling a run (ctrl-C) mid-measurement returns promptly with the
// context's error and removes the embedded cluster's data dir.
func TestRunEmbeddedCancel(t *testing.T) {
	s := shortSpec(t, "duration=30s", "warmup=0s", "producers.rate=1000")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the run's data dir goes here; it must be gone afterwards
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(1500*time.Millisecond, cancel) // the user presses ctrl-C
	defer stop.Stop()
	began := time.Now()
	_, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true})
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("err %v, want context canceled", err)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Fatalf("cancelled run took %v", took)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "isrbench-run-*")); len(left) > 0 {
		t.Errorf("data dirs left behind: %v", left)
	}
}

// TestRunStartsAfterFollowersFetch: a follower whose first fetch races its leader's own
// metadata update backs off replica.fetch.backoff.ms (as in Kafka); the load must start only
// once every follower is fetching, so that this stall of topic creation does not land in the
// first acks=all produces. With a 5 s backoff such a stall would be >= 5 s; without one the
// slowest ack of the run is milliseconds (the bound leaves room for a loaded machine).
func TestRunStartsAfterFollowersFetch(t *testing.T) {
	s := shortSpec(t, "duration=1s", "warmup=0s", "producers.rate=600", "partitions=6",
		"replica.fetch.backoff.ms=5000")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if a := res.AckLatencyUs; a.Count == 0 || a.Max > 2.5e6 {
		t.Errorf("ack latency count %d max %.0f µs: the first produces waited for a follower's fetch backoff", a.Count, a.Max)
	}
}

// TestRunProbe: before the load, probe.records records are produced one at a time to the
// cluster (after one untimed record per partition), their ack latency is the result's probe,
// and the queueing factors relate the load's ack latency to it. The probe's records are real:
// at the end the partitions hold them beside every record the load had acknowledged.
func TestRunProbe(t *testing.T) {
	s := shortSpec(t, "probe.records=200", "partitions=4")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var hw int64
	var sampleErr error
	res, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true, beforeClose: func(tgt target.Target) {
		ps, ok := tgt.(target.PartitionSampler)
		if !ok {
			sampleErr = fmt.Errorf("%T samples no partitions", tgt)
			return
		}
		parts, err := ps.SamplePartitions(s.Topic.Name)
		if err != nil {
			sampleErr = err
			return
		}
		for _, p := range parts {
			hw += p.HW
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if sampleErr != nil {
		t.Fatal(sampleErr)
	}
	p := res.Probe
	if p == nil {
		t.Fatalf("no probe; notes %v", res.Notes)
	}
	if p.Records != 200 || p.Warmup != 4 || p.AckLatencyUs.Count != 200 || len(p.Errors) != 0 || p.Acks != "all" {
		t.Fatalf("probe: %d records, %d warm-up, %d timed, errors %v, acks %s; want 200, 4 (one per partition), 200, none, all",
			p.Records, p.Warmup, p.AckLatencyUs.Count, p.Errors, p.Acks)
	}
	if p.AckLatencyUs.P50 <= 0 || p.AckLatencyUs.P50 > p.AckLatencyUs.P99 {
		t.Errorf("probe ack latency %+v", p.AckLatencyUs)
	}
	want := results.NewQueueing(res.AckLatencyUs, p.AckLatencyUs)
	if p.Queueing == nil || want == nil || *p.Queueing != *want {
		t.Errorf("queueing %+v, want %+v (load p50 %v p99 %v, probe p50 %v)", p.Queueing, want, res.AckLatencyUs.P50, res.AckLatencyUs.P99, p.AckLatencyUs.P50)
	}
	if res.Durability.Acked == 0 || res.Durability.Lost != 0 || res.Durability.Verified != res.Durability.Acked {
		t.Fatalf("durability %+v", res.Durability)
	}
	if want := res.Durability.Acked + p.Records + p.Warmup; hw != want {
		t.Errorf("the partitions hold %d records, want %d: %d the load acknowledged, %d probe records, %d warm-up",
			hw, want, res.Durability.Acked, p.Records, p.Warmup)
	}
	if _, ok := res.Notes["probe"]; ok {
		t.Errorf("note %q", res.Notes["probe"])
	}

	// probe.records=0: no probe, and no note about it.
	s = shortSpec(t, "probe.records=0", "duration=300ms", "warmup=0s")
	res, err = Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Probe != nil || res.Notes["probe"] != "" {
		t.Errorf("probe.records=0: probe %+v, note %q", res.Probe, res.Notes["probe"])
	}
}

// TestProbeSkippedOnWorker: a worker of a multi-worker run runs no probe (the others' probes
// and loads would overlap it) and says so.
func TestProbeSkippedOnWorker(t *testing.T) {
	s := shortSpec(t)
	in := &runInput{spec: s, opts: Options{Worker: load.Worker{K: 2, N: 3}}}
	pr, err := runProbe(context.Background(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res results.Result
	pr.apply(&res)
	if pr.r != nil || res.Probe != nil || !strings.Contains(res.Notes["probe"], "worker 2/3") {
		t.Errorf("worker 2/3: probe %+v, note %q", res.Probe, res.Notes["probe"])
	}
}
