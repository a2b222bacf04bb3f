package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads"
)

// The harness against `isrbench serve` in a separate process, as against any Kafka cluster:
// the binary is built by the test, serve listens on ephemeral ports and is stopped at the end.

// buildIsrbench builds the isrbench binary into a temp dir (the build cache keeps this quick
// after the first test).
func buildIsrbench(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "isrbench")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/isrbench/isrbench/cmd/isrbench").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type serveProc struct {
	bootstrap, admin string
	files            string // serve's "files:" line: the file limit and the replicas it can host
	threads          string // serve's "threads:" line: its threads' scheduling policy
	pid              int
	stderr           *bytes.Buffer
}

// startServeProc starts `bin serve --port 0 args...` and waits for its bootstrap and admin
// addresses; the test's cleanup stops it with SIGTERM (SIGKILL after 30 s).
func startServeProc(t *testing.T, bin string, args ...string) *serveProc {
	t.Helper()
	dataDir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"serve", "--port", "0", "--data-dir", dataDir}, args...)...)
	var mu sync.Mutex
	sp := &serveProc{stderr: &bytes.Buffer{}}
	cmd.Stderr = lockedWriter{&mu, sp.stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sp.pid = cmd.Process.Pid
	exited := make(chan error, 1)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				mu.Lock()
				t.Errorf("serve exited with %v\n%s", err, sp.stderr)
				mu.Unlock()
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("serve did not stop on SIGTERM")
			<-exited
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
		exited <- cmd.Wait()
	}()
	deadline := time.After(60 * time.Second)
	for sp.bootstrap == "" || sp.admin == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve ended before printing its addresses: %s", sp.stderr)
			}
			if v, ok := strings.CutPrefix(l, "bootstrap: "); ok {
				sp.bootstrap = v
			}
			if v, ok := strings.CutPrefix(l, "files: "); ok {
				sp.files = v
			}
			if v, ok := strings.CutPrefix(l, "threads: "); ok {
				sp.threads = v
			}
			if v, ok := strings.CutPrefix(l, "admin: http://"); ok {
				sp.admin, _, _ = strings.Cut(v, " ")
			}
		case <-deadline:
			t.Fatalf("serve printed no addresses in 60 s: %s", sp.stderr)
		}
	}
	go func() {
		for range lines {
		}
	}()
	return sp
}

func writeSpec(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// onlyResult is the result.json of the single run under dir.
func onlyResult(t *testing.T, dir string) (*results.Result, string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*", "result.json"))
	if len(m) != 1 {
		t.Fatalf("result.json files under %s: %v", dir, m)
	}
	r, err := results.ReadResult(m[0])
	if err != nil {
		t.Fatal(err)
	}
	return r, filepath.Dir(m[0])
}

// TestExecFaultAgainstServe: an exec fault stops a follower of `isrbench serve` with
// `isrbench broker stop {broker}` and starts it again in its undo; the run's partition
// timeline (Metadata + ListOffsets every 100 ms) shows the ISR shrink and expand, result.json
// has both exit statuses and the output files, a read-only setting the brokers report is
// accepted as set, and nothing acknowledged is lost.
// TestServeRefusesWhatItsFileLimitCannotHost: serve reports its file limit and the partition
// replicas it can host, and answers a CreateTopics beyond them with POLICY_VIOLATION.
func TestServeRefusesWhatItsFileLimitCannotHost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs serve")
	}
	bin := buildIsrbench(t)
	sp := startServeProc(t, bin, "--brokers", "1")
	var capacity int64
	if strings.HasPrefix(sp.files, "file limit ") && strings.Contains(sp.files, "does not bound the partition replicas") {
		t.Skipf("serve's file limit holds its logs' open files (%s): no topic is refused for it", sp.files)
	}
	if i := strings.Index(sp.files, "can host about "); i < 0 || !strings.HasPrefix(sp.files, "file limit ") {
		t.Fatalf("serve's files line %q", sp.files)
	} else if _, err := fmt.Sscan(sp.files[i+len("can host about "):], &capacity); err != nil || capacity <= 0 {
		t.Fatalf("serve's files line %q: %v", sp.files, err)
	}
	if capacity >= controller.MaxPartitions {
		t.Skipf("serve can host %d replicas (%s): no topic of at most %d partitions passes it", capacity, sp.files, controller.MaxPartitions)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(sp.bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateTopic(ctx, int32(capacity)+1, 1, nil, "too-big")
	if err != nil && res.Err == nil {
		res.Err = err
	}
	if !errors.Is(res.Err, kerr.PolicyViolation) || !strings.Contains(res.ErrMessage, "RLIMIT_NOFILE") {
		t.Fatalf("CreateTopic of %d partitions on serve hosting at most %d replicas: %v %q, want POLICY_VIOLATION naming RLIMIT_NOFILE",
			capacity+1, capacity, res.Err, res.ErrMessage)
	}
}

func TestExecFaultAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs serve")
	}
	bin := buildIsrbench(t)
	sp := startServeProc(t, bin, "--brokers", "3", "--set", "replica.fetch.max.bytes=2097152")
	broker := fmt.Sprintf("%s broker %%s {broker} --admin %s", bin, sp.admin)
	spec := writeSpec(t, fmt.Sprintf(`name: exec-stop
brokers: 3
topic: {name: isrbench, partitions: 3, replication.factor: 3, min.insync.replicas: 2}
broker: {replica.fetch.max.bytes: 2097152}
producers: {count: 1, acks: all, message.size: 512, rate: 400}
consumers: {count: 1}
duration: 7s
warmup: 1s
faults:
  - {at: 1500ms, duration: 3s, kind: exec, target: "follower-of:isrbench-0", command: %q, undo: %q}
`, fmt.Sprintf(broker, "stop"), fmt.Sprintf(broker, "start")))
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := exitCode(run(ctx, []string{"run", "-w", spec, "--target", "kafka://" + sp.bootstrap, "--out", out}, &stdout, &stderr), &stderr)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	res, dir := onlyResult(t, out)
	if len(res.Faults) != 1 || res.Faults[0].Exec == nil || res.Faults[0].Undo == nil {
		t.Fatalf("faults %+v", res.Faults)
	}
	f := res.Faults[0]
	if f.Exec.ExitCode != 0 || f.Undo.ExitCode != 0 || f.Error != "" || !strings.HasPrefix(f.Target, "broker=") {
		t.Fatalf("exec fault %+v, command %+v, undo %+v", f, f.Exec, f.Undo)
	}
	for file, want := range map[string]string{f.Exec.Output: `"stopped"`, f.Undo.Output: `"running"`} {
		if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v %q, want %s", file, err, b, want)
		}
	}
	fr, err := workloads.ReadFaultsReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	var shrinkAt, expandAt float64 = -1, -1
	for _, e := range fr.ISREvents {
		if e.Kind == "shrink" && shrinkAt < 0 && e.T >= f.AtS {
			shrinkAt = e.T
		}
		if e.Kind == "expand" && shrinkAt >= 0 && e.T >= f.EndS && expandAt < 0 {
			expandAt = e.T
		}
	}
	t.Logf("exec at %.2fs, undo at %.2fs; isr events %+v", f.AtS, f.EndS, fr.ISREvents)
	if shrinkAt < 0 || expandAt < 0 || shrinkAt > f.EndS {
		t.Fatalf("ISR events %+v: want a shrink after the stop at %.2fs and an expand after the start at %.2fs", fr.ISREvents, f.AtS, f.EndS)
	}
	if res.Durability.Lost != 0 || res.Durability.Acked == 0 {
		t.Errorf("durability %+v", res.Durability)
	}
	var ts *results.TargetSetting
	for i := range res.TargetConfig {
		if res.TargetConfig[i].Key == "replica.fetch.max.bytes" {
			ts = &res.TargetConfig[i]
		}
	}
	if ts == nil || ts.How != "already-set" || len(ts.Reported) != 3 || ts.Reported["0"] != "2097152" {
		t.Errorf("target_config replica.fetch.max.bytes = %+v", ts)
	}
	if res.HWLagClientUs == nil || res.HWLagClientUs.Count == 0 || res.HWObserver == nil {
		t.Errorf("no client HW lag: %+v %+v", res.HWLagClientUs, res.HWObserver)
	}
	b, err := os.ReadFile(filepath.Join(dir, "partitions.csv"))
	if err != nil || !strings.Contains(string(b), ":n/a") || !strings.HasPrefix(string(b), "t_s,partition,leader,leader_epoch,replicas,isr,hw,leo,") || !strings.Contains(strings.SplitN(string(b), "\n", 2)[0], ",log_start") {
		t.Errorf("partitions.csv: %v %.300q", err, b)
	}
	if !strings.Contains(stdout.String(), "exec exit 0, undo exit 0") {
		t.Errorf("summary lacks the exec statuses:\n%s", stdout.String())
	}

	// A read-only setting the brokers report differently stops the run before it starts (exit 2).
	stderr.Reset()
	code = exitCode(run(ctx, []string{"run", "-w", "default", "--set", "replica.fetch.max.bytes=4194304", "--target", "kafka://" + sp.bootstrap, "--out", t.TempDir(), "--quiet"}, io.Discard, &stderr), &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "replica.fetch.max.bytes=4194304: replica.fetch.max.bytes is a read-only broker config") || !strings.Contains(stderr.String(), "broker 0: 2097152") {
		t.Errorf("read-only mismatch: exit %d %q", code, stderr.String())
	}
}

// TestWorkersMergeAgainstServe: three `isrbench run --worker K/3 --start-at T` processes
// against one `isrbench serve`; isrbench merge gives a result whose ack-latency histogram is
// exactly the merge of the three, whose record and durability counts are their sums, and
// whose clock offsets (the workers share a clock here) are within their stated bounds of 0.
func TestWorkersMergeAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, runs serve and three workers")
	}
	bin := buildIsrbench(t)
	sp := startServeProc(t, bin, "--brokers", "3")
	spec := writeSpec(t, `name: workers
brokers: 3
topic: {name: isrbench, partitions: 3, replication.factor: 3, min.insync.replicas: 2}
producers: {count: 3, acks: all, message.size: 256, rate: 600}
consumers: {count: 1}
duration: 3s
warmup: 500ms
`)
	startAt := time.Now().Add(15 * time.Second).UTC().Format(time.RFC3339Nano)
	outs := make([]string, 3)
	errs := make([]error, 3)
	logs := make([]bytes.Buffer, 3)
	var wg sync.WaitGroup
	for k := range 3 {
		outs[k] = t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(bin, "run", "-w", spec, "--target", "kafka://"+sp.bootstrap, "--out", outs[k], "--quiet",
				"--worker", fmt.Sprintf("%d/3", k+1), "--start-at", startAt)
			cmd.Stdout, cmd.Stderr = &logs[k], &logs[k]
			errs[k] = cmd.Run()
		}()
	}
	wg.Wait()
	var dirs []string
	var parts []*results.Result
	for k := range 3 {
		if errs[k] != nil {
			t.Fatalf("worker %d/3: %v\n%s", k+1, errs[k], logs[k].String())
		}
		r, dir := onlyResult(t, outs[k])
		if r.Worker == nil || r.Worker.Index != k+1 || r.Worker.Count != 3 {
			t.Fatalf("worker %d result.json worker = %+v", k+1, r.Worker)
		}
		if r.Durability.Lost != 0 || r.Durability.Verified != r.Durability.Acked || r.Durability.Acked == 0 {
			t.Errorf("worker %d durability %+v", k+1, r.Durability)
		}
		dirs, parts = append(dirs, dir), append(parts, r)
	}
	merged := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := exitCode(run(context.Background(), append([]string{"merge", "--out", merged}, dirs...), &stdout, &stderr), &stderr); code != 0 {
		t.Fatalf("merge: exit %d %s", code, stderr.String())
	}
	m, err := results.ReadResult(filepath.Join(merged, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := results.NewHistogram()
	var records, acked, e2e int64
	for _, r := range parts {
		h, err := results.DecodeSummaryHdr(r.AckLatencyUs)
		if err != nil {
			t.Fatal(err)
		}
		want.Merge(h)
		records += r.Produced.Records
		acked += r.Durability.Acked
		e2e += r.E2ELatencyUs.Count
	}
	if got := m.AckLatencyUs; got.Hdr != results.Summarize(want).Hdr || got.Count != want.Count() || got.P99 != float64(want.Quantile(99)) {
		t.Errorf("merged ack latency %+v is not the merge of the workers' (count %d, p99 %d)", got, want.Count(), want.Quantile(99))
	}
	if m.Produced.Records != records || m.Durability.Acked != acked || m.E2ELatencyUs.Count != e2e || m.Durability.Lost != 0 {
		t.Errorf("merged records %d acked %d e2e %d (lost %d), want the sums %d %d %d", m.Produced.Records, m.Durability.Acked, m.E2ELatencyUs.Count, m.Durability.Lost, records, acked, e2e)
	}
	if records < 1500 {
		t.Errorf("only %d records in 3 s at 600 records/s", records)
	}
	if m.Merged == nil || len(m.Merged.Workers) != 3 {
		t.Fatalf("merged %+v", m.Merged)
	}
	for _, w := range m.Merged.Workers[1:] {
		if w.ClockOffsetUs == nil {
			t.Errorf("worker %d: clock offset not measured", w.Index)
			continue
		}
		if off, bound := *w.ClockOffsetUs, *w.ClockBoundUs; off < -bound-1 || off > bound+1 {
			t.Errorf("worker %d: clock offset %.1f µs ± %.1f µs excludes 0 (the workers share one clock)", w.Index, off, bound)
		}
	}
	tl, err := os.ReadFile(filepath.Join(merged, "timeline.csv"))
	if err != nil || !strings.Contains(string(tl), ",3\n") || !strings.HasSuffix(strings.SplitN(string(tl), "\n", 2)[0], ",workers") {
		t.Errorf("merged timeline.csv: %v %.400q", err, tl)
	}
	t.Logf("merge:\n%s", stdout.String())

	// A worker missing, or given twice, is bad input.
	stderr.Reset()
	if code := exitCode(run(context.Background(), []string{"merge", "--out", t.TempDir(), dirs[0], dirs[2]}, io.Discard, &stderr), &stderr); code != 2 || !strings.Contains(stderr.String(), "missing worker 2") {
		t.Errorf("merge without worker 2: exit %d %q", code, stderr.String())
	}
	stderr.Reset()
	if code := exitCode(run(context.Background(), []string{"merge", "--out", t.TempDir(), dirs[0], dirs[1], dirs[1]}, io.Discard, &stderr), &stderr); code != 2 || !strings.Contains(stderr.String(), "worker 2 given twice") {
		t.Errorf("merge with worker 2 twice: exit %d %q", code, stderr.String())
	}
}

// TestSweepFetchersAgainstServe: a sweep over num.replica.fetchers on `isrbench serve` sets
// each value with IncrementalAlterConfigs, records what every broker reports and restores
// the original at the end. It runs once serve advertises IncrementalAlterConfigs (API 44).
func TestSweepFetchersAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs serve")
	}
	bin := buildIsrbench(t)
	sp := startServeProc(t, bin, "--brokers", "3")
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(sp.bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Sorted() {
		if _, ok := v.KeyMaxVersion(44); !ok {
			t.Skipf("isrbench serve broker %d does not advertise IncrementalAlterConfigs (API 44) yet", v.NodeID)
		}
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := exitCode(run(ctx, []string{"sweep", "-w", "default", "--vary", "num.replica.fetchers=2,4", "--duration", "1s", "--warmup", "200ms",
		"--set", "producers.rate=500", "--target", "kafka://" + sp.bootstrap, "--out", out}, &stdout, &stderr), &stderr)
	if code != 0 {
		t.Fatalf("sweep: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	m, _ := filepath.Glob(filepath.Join(out, "*", "*", "result.json"))
	if len(m) != 2 {
		t.Fatalf("results %v", m)
	}
	for _, p := range m {
		r, err := results.ReadResult(p)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint(r.Config["num.replica.fetchers"])
		ok := false
		for _, ts := range r.TargetConfig {
			if ts.Key == "num.replica.fetchers" && len(ts.Reported) == 3 && ts.Reported["0"] == want && ts.Reported["1"] == want && ts.Reported["2"] == want {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s: num.replica.fetchers=%s not reported by every broker: %+v", p, want, r.TargetConfig)
		}
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "num.replica.fetchers" && c.MaybeValue() != "1" {
				t.Errorf("broker %s: num.replica.fetchers %s after the sweep, want the original 1", rc.Name, c.MaybeValue())
			}
		}
	}
}
