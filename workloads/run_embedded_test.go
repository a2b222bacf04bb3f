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
