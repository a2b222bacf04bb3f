package workloads

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/profiles"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// TestRunCost runs the default workload briefly with a CPU profile and checks result.json's
// cost object, bench.txt's cost units, and that "isrbench profile top --by role" shows the same
// cluster/clients split as the cost table (both read the run's cpu.pprof).
func TestRunCost(t *testing.T) {
	// isrbench.zero.copy.min.bytes=0: every record slice goes by sendfile (small ones are copied
	// by default), so both the copied and the zero-copy bytes show. Unthrottled producers: a
	// lightly loaded process runs in short bursts, which a tickless kernel's CPU-time profiling
	// timers miss (see minProfileCoverage); a busy one is sampled in full.
	s := shortSpec(t, "duration=2s", "warmup=500ms", "producers.rate=0", "isrbench.zero.copy.min.bytes=0")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true, Profile: []string{"cpu"}})
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(res.Files.Bench), results.ResultFileName))
	back, err := results.ReadResult(dirs[0])
	if err != nil || back.Cost == nil {
		t.Fatalf("result.json cost: %v, %+v", err, back)
	}
	c := back.Cost
	if c.Scope != results.CostScopeProcess || c.Records != res.Produced.Records || c.WindowS < 1.5 || c.WindowS > 3 {
		t.Fatalf("scope %q records %d (produced %d) window %vs", c.Scope, c.Records, res.Produced.Records, c.WindowS)
	}
	for name, v := range map[string]float64{"cpu_us_per_record": c.CPUUsPerRecord, "allocs_per_record": c.AllocsPerRecord,
		"fetch_requests_per_record": c.FetchRequestsPerRecord, "produce_requests_per_record": c.ProduceRequestsPerRecord,
		"replica_fetch_requests_per_record": c.ReplicaFetchRequestsPerRecord, "follower_fetch_requests_per_record": c.FollowerFetchRequestsPerRecord,
		"alloc_bytes_per_record": c.AllocBytesPerRecord, "bytes_copied_per_record": c.BytesCopiedPerRecord,
		"bytes_zero_copy_per_record": c.BytesZeroCopyPerRecord, "syscalls_per_record.total": c.SyscallsTotal(),
		"cpu_user_us_per_record": c.CPUUserUsPerRecord, "cpu_cores": c.CPUCores, "cpu_us_per_request": c.CPUUsPerRequest,
		"allocs_per_request": c.AllocsPerRequest, "syscalls_per_request": c.SyscallsPerRequest,
		"local_us_per_record": c.LocalUsPerRecord, "follower_apply_us_per_record": c.FollowerApplyUsPerRecord,
		"request_time_per_record.produce.local_us":        c.RequestTimePerRecord["produce"].LocalUs,
		"request_time_per_record.produce.remote_us":       c.RequestTimePerRecord["produce"].RemoteUs,
		"request_time_per_record.replica_fetch.local_us":  c.RequestTimePerRecord["replica_fetch"].LocalUs,
		"request_time_per_record.consumer_fetch.requests": c.RequestTimePerRecord["consumer_fetch"].Requests} {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("cost.%s = %v, want > 0", name, v)
		}
	}
	// The request-time counters count the same produce requests as the request counters, and
	// local/rec is the sum of its parts. The request counter counts a request when the leader
	// has read it, the request-time counters once it is answered, so across the window the two
	// differ by the requests in flight at its start and at its end: at most one per connection
	// that carries produce requests (a connection's requests are answered one at a time), and
	// each producer has one to each broker. On a loaded machine the edges hold some; a request
	// counted by one and not the other would show over the whole window.
	produceConns := s.Producers.Count * s.Brokers
	if p := c.RequestTimePerRecord["produce"]; requestsApart(p.Requests, c.ProduceRequestsPerRecord, c.Records) > produceConns {
		t.Errorf("request time counted %v produce requests per record, the request counter %v: %d requests of %d records apart, more than the %d connections can hold in flight",
			p.Requests, c.ProduceRequestsPerRecord, requestsApart(p.Requests, c.ProduceRequestsPerRecord, c.Records), c.Records, produceConns)
	}
	sum := c.FollowerApplyUsPerRecord
	for _, k := range results.RequestKinds {
		sum += c.RequestTimePerRecord[k].LocalUs
	}
	if math.Abs(sum-c.LocalUsPerRecord) > 1e-6*sum {
		t.Errorf("local_us_per_record %v, its parts sum to %v", c.LocalUsPerRecord, sum)
	}
	// Every produce request is answered by a leader, every replica fetch sent is received: the
	// followers count a fetch when they send it, the leaders when they have read it, so the two
	// counts differ by the fetches in flight at the window's edges, at most one per fetcher
	// connection (each follower has num.replica.fetchers to each other broker).
	fetcherConns := s.Brokers * (s.Brokers - 1) * int(s.Settings.Int("num.replica.fetchers"))
	if d := requestsApart(c.FollowerFetchRequestsPerRecord, c.ReplicaFetchRequestsPerRecord, c.Records); c.ProduceRequestsPerRecord > 1.01 || d > fetcherConns {
		t.Errorf("produce %v/record, follower fetches sent %v vs received %v per record: %d fetches apart, more than the %d fetcher connections hold in flight",
			c.ProduceRequestsPerRecord, c.FollowerFetchRequestsPerRecord, c.ReplicaFetchRequestsPerRecord, d, fetcherConns)
	}
	for _, k := range []string{"read", "write", "sendfile", "sendmsg", "pwritev"} {
		if c.SyscallsPerRecord[k] <= 0 {
			t.Errorf("syscalls_per_record.%s = %v, want > 0 (kinds %v)", k, c.SyscallsPerRecord[k], c.SyscallsPerRecord)
		}
	}
	if len(c.SyscallsPerRecord) != len(results.SyscallKinds)+1 {
		t.Errorf("syscalls_per_record has %d keys, want every kind and total: %v", len(c.SyscallsPerRecord), c.SyscallsPerRecord)
	}
	// The threads' run-queue wait (Linux's schedstat): per record, per second and per slice
	// are one measurement, and never nothing.
	if q := c.RunQueueWait; runtime.GOOS == "linux" {
		if q == nil {
			t.Fatalf("cost.run_queue_wait absent on Linux (note %q)", c.Note)
		}
		// Every wake-up of a thread takes some time before it runs, even onto an idle CPU.
		if !(q.UsPerRecord > 0) || !(q.UsPerSlice > 0) || math.Abs(q.UsPerRecord*float64(c.Records)-q.Threads*c.WindowS*1e6) > 1e-6*q.UsPerRecord*float64(c.Records)+1e-3 {
			t.Errorf("run_queue_wait %+v over %d records in %vs: per record and threads waiting disagree", *q, c.Records, c.WindowS)
		}
	}
	b, err := os.ReadFile(res.Files.Bench)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{" runq-wait-µs/record", " cpu-µs/record", " allocs/record", " syscalls/record", " fetch-reqs/record", " sys-sendfile/record", " local-µs/record"} {
		if !bytes.Contains(b, []byte(u)) {
			t.Errorf("bench.txt lacks %q:\n%s", u, b)
		}
	}

	// The split is the cpu.pprof's, as profile top --by role prints it, unless the profiler lost
	// most of its samples this time (then the split is left out, and the note says why).
	if c.CPUClusterUsPerRecord == nil && c.CPUProfileCoverage > 0 && c.CPUProfileCoverage < 0.5 {
		if !strings.Contains(c.Note, "of the CPU time getrusage counted") {
			t.Fatalf("split left out at profile coverage %v without saying why: %q", c.CPUProfileCoverage, c.Note)
		}
		t.Logf("the CPU profile holds %.0f%% of the CPU time: split left out (%s)", 100*c.CPUProfileCoverage, c.Note)
		return
	}
	if c.CPUSplitSource != "profiles/cpu.pprof" || c.CPUClusterUsPerRecord == nil || c.CPUClientsUsPerRecord == nil || c.CPUSplitSamples < 10 {
		t.Fatalf("split from %q: cluster %v clients %v, %d samples", c.CPUSplitSource, c.CPUClusterUsPerRecord, c.CPUClientsUsPerRecord, c.CPUSplitSamples)
	}
	var top bytes.Buffer
	if err := profiles.Top(&top, res.Files.Profiles[0], profiles.LabelRole, 1); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Split: cluster \S+ \(([0-9.]+)%\), clients \S+ \(([0-9.]+)%\)`).FindStringSubmatch(top.String())
	if m == nil {
		t.Fatalf("profile top --by role has no split line:\n%s", top.String())
	}
	for i, v := range []float64{*c.CPUClusterUsPerRecord, *c.CPUClientsUsPerRecord} {
		want, _ := strconv.ParseFloat(m[i+1], 64)
		if got := 100 * v / c.CPUUsPerRecord; math.Abs(got-want) > 0.01 {
			t.Errorf("cost table %s share %.3f%%, profile top says %s%%", []string{"cluster", "clients"}[i], got, m[i+1])
		}
	}
	if *c.CPUClusterUsPerRecord <= 0 || *c.CPUClientsUsPerRecord <= 0 {
		t.Errorf("cluster %v, clients %v µs/record: both sides run in the process", *c.CPUClusterUsPerRecord, *c.CPUClientsUsPerRecord)
	}
	if sum := *c.CPUClusterUsPerRecord + *c.CPUClientsUsPerRecord + *c.CPUOtherUsPerRecord; math.Abs(sum-c.CPUUsPerRecord) > 1e-6*c.CPUUsPerRecord {
		t.Errorf("split sums to %v, cpu is %v", sum, c.CPUUsPerRecord)
	}
}

// requestsApart is how many requests two per-record request counts of records records differ by.
func requestsApart(a, b float64, records int64) int {
	return int(math.Round(math.Abs(a-b) * float64(records)))
}

// TestRunCostOwnProfileAndClients: without --profile cpu the meter takes its own CPU profile
// for the split; a kafka:// target (kfake here) gives the clients' side only and says so.
func TestRunCostOwnProfileAndClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Run(ctx, shortSpec(t), Options{OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cost
	if c == nil || c.CPUSplitSource != "cost profile" || !c.ClusterKnown() || c.CPUProfileCoverage <= 0 {
		t.Fatalf("embedded run without --profile: cost %+v", c)
	}
	if lost := c.CPUProfileCoverage < 0.5; lost != (c.CPUClusterUsPerRecord == nil) || lost && !strings.Contains(c.Note, "of the CPU time getrusage counted") {
		t.Fatalf("profile coverage %v, split %v, note %q: the split is there exactly when the profile holds half the CPU or more",
			c.CPUProfileCoverage, c.CPUClusterUsPerRecord, c.Note)
	}
	res, err = Run(ctx, shortSpec(t), Options{Target: newKfake(t), OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	c = res.Cost
	if c == nil || c.Scope != results.CostScopeClients || c.CPUUsPerRecord <= 0 || c.AllocsPerRecord <= 0 {
		t.Fatalf("kafka:// run: cost %+v", c)
	}
	if c.SyscallsPerRecord != nil || c.FetchRequestsPerRecord != 0 || !strings.Contains(c.Note, "only the clients' side is known") {
		t.Fatalf("kafka:// run reports cluster-side figures or no note: %+v", c)
	}
	var out bytes.Buffer
	if err := results.PrintSummary(&out, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "the cluster is not in this process: only the clients' side is known") {
		t.Fatalf("the run table does not say the cost is the clients' only:\n%s", out.String())
	}
}

func TestProduceSpinKey(t *testing.T) {
	s := spec.DefaultSpec()
	if err := s.ApplySets([]string{"isrbench.produce.spin=40us"}); err != nil {
		t.Fatal(err)
	}
	if s.Settings.Duration("isrbench.produce.spin") != 40*time.Microsecond || fmt.Sprint(s.Config()["isrbench.produce.spin"]) != "40µs" {
		t.Fatalf("spin %v, config %v", s.Settings.Duration("isrbench.produce.spin"), s.Config()["isrbench.produce.spin"])
	}
	cc, err := target.ClusterConfig(s)
	if err != nil || cc.Broker.ProduceSpin != 40*time.Microsecond {
		t.Fatalf("cluster config spin %v, %v", cc.Broker.ProduceSpin, err)
	}
	if err := spec.DefaultSpec().ApplySets([]string{"isrbench.produce.spin=-1ms"}); err == nil || !strings.Contains(err.Error(), "isrbench.produce.spin") {
		t.Fatalf("negative spin: %v", err)
	}
}
