package profiles

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// synthSample is one sample of a synthetic profile: stack leaf first.
type synthSample struct {
	stack  []string
	value  int64
	labels map[string]string
}

// synth builds a CPU-like profile (samples/count, cpu/nanoseconds) whose
// cpu value is each sample's value.
func synth(samples []synthSample) *profile.Profile {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        10_000_000,
		DurationNanos: int64(2 * time.Second),
	}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	for _, s := range samples {
		smp := &profile.Sample{Value: []int64{s.value / 10_000_000, s.value}}
		for _, name := range s.stack {
			loc := locs[name]
			if loc == nil {
				fn := &profile.Function{ID: uint64(len(funcs) + 1), Name: name, SystemName: name, Filename: "x.go"}
				funcs[name] = fn
				p.Function = append(p.Function, fn)
				loc = &profile.Location{ID: uint64(len(locs) + 1), Address: uint64(0x1000 + len(locs)*16), Line: []profile.Line{{Function: fn, Line: 1}}}
				locs[name] = loc
				p.Location = append(p.Location, loc)
			}
			smp.Location = append(smp.Location, loc)
		}
		if len(s.labels) > 0 {
			smp.Label = map[string][]string{}
			for k, v := range s.labels {
				smp.Label[k] = []string{v}
			}
		}
		p.Sample = append(p.Sample, smp)
	}
	if err := p.CheckValid(); err != nil {
		panic("BUG: synthetic profile invalid: " + err.Error())
	}
	return p
}

func writeProfile(t *testing.T, p *profile.Profile, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

const ms = int64(time.Millisecond)

func brokerProfile() *profile.Profile {
	lab := func(b, r string) map[string]string { return map[string]string{LabelBroker: b, LabelRole: r} }
	return synth([]synthSample{
		{[]string{"syscall.pwritev", "log.(*Log).Append", "broker.(*Broker).Produce", "runtime.goexit"}, 300 * ms, lab("1", RoleProduce)},
		{[]string{"crc32.update", "records.Validate", "log.(*Log).Append", "broker.(*Broker).Produce", "runtime.goexit"}, 120 * ms, lab("1", RoleProduce)},
		{[]string{"syscall.sendfile", "netfetch.serveFetch", "runtime.goexit"}, 200 * ms, lab("1", RoleFetchServe)},
		{[]string{"crc32.update", "records.Validate", "broker.(*fetcher).run", "runtime.goexit"}, 80 * ms, lab("2", RoleReplicaFetcher)},
		{[]string{"runtime.mallocgc", "runtime.goexit"}, 50 * ms, nil},
	})
}

func TestTopGolden(t *testing.T) {
	path := writeProfile(t, brokerProfile(), "cpu.pprof")
	var out bytes.Buffer
	for _, tc := range []struct {
		by string
		n  int
	}{{"flat", 0}, {"cum", 3}, {LabelRole, 2}, {LabelBroker, 1}} {
		out.WriteString("== Top by=" + tc.by + "\n")
		if err := Top(&out, path, tc.by, tc.n); err != nil {
			t.Fatal(err)
		}
	}
	golden := filepath.Join("testdata", "top.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("Top output differs from %s (go test -update to accept):\n%s", golden, out.String())
	}
}

func TestDiffRanksGrowthFirst(t *testing.T) {
	base := synth([]synthSample{
		{[]string{"a.steady", "main"}, 100 * ms, nil},
		{[]string{"b.grows", "main"}, 50 * ms, nil},
		{[]string{"d.shrinks", "main"}, 90 * ms, nil},
	})
	cur := synth([]synthSample{
		{[]string{"a.steady", "main"}, 100 * ms, nil},
		{[]string{"b.grows", "main"}, 300 * ms, nil},
		{[]string{"c.new", "main"}, 20 * ms, nil},
		{[]string{"d.shrinks", "main"}, 10 * ms, nil},
	})
	bp, np := writeProfile(t, base, "base.pprof"), writeProfile(t, cur, "new.pprof")
	var out bytes.Buffer
	if err := Diff(&out, bp, np, 0); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	var order []string
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) == 5 && strings.Contains(f[4], ".") {
			order = append(order, f[4]+" "+f[0])
		}
	}
	// a.steady is unchanged: its samples cancel out in the merge, as in pprof -diff_base.
	want := []string{"b.grows +250ms", "c.new +20ms", "d.shrinks -80ms"}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("diff order = %q, want %q", order, want)
	}
	if !strings.Contains(out.String(), "delta +190ms (+79.17%)") {
		t.Errorf("total delta line missing: %s", out.String())
	}
	// Incompatible profiles are refused with a clear error.
	heapLike := synth(nil)
	heapLike.SampleType = []*profile.ValueType{{Type: "inuse_space", Unit: "bytes"}}
	heapLike.PeriodType = &profile.ValueType{Type: "space", Unit: "bytes"}
	hp := writeProfile(t, heapLike, "heap.pprof")
	if err := Diff(io.Discard, bp, hp, 5); err == nil || !strings.Contains(err.Error(), "cannot be compared") {
		t.Fatalf("diff of cpu vs heap: err = %v", err)
	}
}

func TestFolded(t *testing.T) {
	p := synth([]synthSample{
		{[]string{"leaf", "mid", "root"}, 30, nil},
		{[]string{"leaf", "mid", "root"}, 12, map[string]string{LabelRole: RoleProduce}}, // same stack, merged
		{[]string{"other;odd", "root"}, 5, nil},
		{[]string{"zero", "root"}, 0, nil}, // skipped
	})
	var out bytes.Buffer
	if err := Folded(&out, writeProfile(t, p, "x.pprof")); err != nil {
		t.Fatal(err)
	}
	want := "root;mid;leaf 42\nroot;other:odd 5\n"
	if out.String() != want {
		t.Fatalf("folded =\n%q\nwant\n%q", out.String(), want)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pprof")
	os.WriteFile(bad, []byte("this is not a profile"), 0o644)
	for name, fn := range map[string]func() error{
		"top-missing": func() error { return Top(io.Discard, filepath.Join(dir, "missing.pprof"), "", 5) },
		"top-garbage": func() error { return Top(io.Discard, bad, "", 5) },
		"folded":      func() error { return Folded(io.Discard, bad) },
		"diff":        func() error { return Diff(io.Discard, bad, bad, 5) },
		"web":         func() error { return WebTo(context.Background(), io.Discard, "", nil, bad) },
		"web-3files":  func() error { return WebTo(context.Background(), io.Discard, "", nil, bad, bad, bad) },
	} {
		if err := fn(); err == nil {
			t.Errorf("%s: no error", name)
		} else if name != "web-3files" && !strings.Contains(err.Error(), ".pprof") {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
}

func TestStartValidation(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		kinds []string
		want  string
	}{
		{nil, "no profile kinds"},
		{[]string{"cpu", "strace"}, `unknown profile kind "strace" (allowed: cpu, heap, allocs, mutex, block, goroutine, trace)`},
		{[]string{"heap", "heap"}, `"heap" given twice`},
	} {
		_, err := Start(tc.kinds, dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%q): err = %v, want containing %q", tc.kinds, err, tc.want)
		}
	}
	if k, err := ParseKinds(" cpu, heap ,mutex"); err != nil || strings.Join(k, "|") != "cpu|heap|mutex" {
		t.Errorf("ParseKinds = %q, %v", k, err)
	}
}

// burnCPU spins (no sleeping) until this process used d more CPU time, or
// a 10 s wall-clock cap passes.
func burnCPU(d time.Duration) float64 {
	start := cpuTime()
	deadline := time.Now().Add(10 * time.Second)
	x := 1.0
	for cpuTime()-start < d && time.Now().Before(deadline) {
		for i := range 100000 {
			x = x*1.0000001 + float64(i&7)
		}
	}
	return x
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestCaptureCPUWithLabels(t *testing.T) {
	prevMutex := runtime.SetMutexProfileFraction(-1)
	dir := t.TempDir()
	s, err := Start([]string{"cpu", "mutex", "block", "heap", "allocs", "goroutine"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start([]string{"heap"}, t.TempDir()); err == nil {
		t.Fatal("second concurrent session accepted")
	}
	if got := runtime.SetMutexProfileFraction(-1); got != DefaultOptions().MutexProfileFraction {
		t.Errorf("mutex fraction during session = %d", got)
	}
	var wg sync.WaitGroup
	for _, role := range []string{RoleProduce, RoleFetchServe} {
		wg.Add(1)
		go Do(context.Background(), "1", role, func(context.Context) {
			defer wg.Done()
			if burnCPU(300*time.Millisecond) == 0 {
				t.Error("impossible")
			}
		})
	}
	wg.Wait()
	paths, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 6 || filepath.Base(paths[0]) != "cpu.pprof" || filepath.Base(paths[5]) != "goroutine.pprof" {
		t.Fatalf("paths = %q", paths)
	}
	for _, p := range paths {
		if _, err := Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if got := runtime.SetMutexProfileFraction(-1); got != prevMutex {
		t.Errorf("mutex fraction not restored: %d, want %d", got, prevMutex)
	}
	if _, err := s.Stop(); err == nil {
		t.Error("second Stop succeeded")
	}
	var out bytes.Buffer
	if err := Top(&out, paths[0], LabelRole, 5); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"role=" + RoleProduce, "role=" + RoleFetchServe, "burnCPU"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Top by role lacks %q", want)
		}
	}
	// A new session can start once the previous one stopped.
	s2, err := Start([]string{"goroutine"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestLabels(t *testing.T) {
	var got map[string]string
	Do(context.Background(), "3", RoleReplicaFetcher, func(ctx context.Context) {
		got = map[string]string{}
		pprof.ForLabels(ctx, func(k, v string) bool { got[k] = v; return true })
	})
	if got[LabelBroker] != "3" || got[LabelRole] != RoleReplicaFetcher {
		t.Fatalf("labels = %v", got)
	}
	Do(context.Background(), "", RoleProducerClient, func(ctx context.Context) {
		if _, ok := pprof.Label(ctx, LabelBroker); ok {
			t.Error("empty broker produced a broker label")
		}
	})
}

func TestWeb(t *testing.T) {
	base := writeProfile(t, synth([]synthSample{{[]string{"a", "main"}, 10 * ms, nil}}), "base.pprof")
	cur := writeProfile(t, brokerProfile(), "new.pprof")
	for name, files := range map[string][]string{"single": {cur}, "diff": {base, cur}} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			urls := make(chan string, 1)
			done := make(chan error, 1)
			var out lockedBuffer
			go func() { done <- WebTo(ctx, &out, "127.0.0.1:0", func(u string) { urls <- u }, files...) }()
			var url string
			select {
			case url = <-urls:
			case err := <-done:
				t.Fatalf("WebTo returned early: %v", err)
			case <-time.After(20 * time.Second):
				t.Fatal("web UI not ready")
			}
			resp, err := http.Get(url + "/ui/flamegraph")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Contains(body, []byte("<html")) {
				t.Fatalf("GET /ui/flamegraph: %d %.200s", resp.StatusCode, body)
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("WebTo did not return after cancel")
			}
			if !strings.Contains(out.String(), url+"/ui/flamegraph") {
				t.Errorf("URL not printed: %q", out.String())
			}
		})
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDiffByCumShowsTheCaller: the copy path's growth ends in a syscall shared with the
// zero-copy path; ranked by flat only the syscall shows, ranked by cum the function that chose
// the copy path (its caller) shows with the growth.
func TestDiffByCumShowsTheCaller(t *testing.T) {
	base := synth([]synthSample{
		{[]string{"syscall.Syscall6", "net.sendZeroCopy", "net.serve"}, 100 * ms, nil},
	})
	cur := synth([]synthSample{
		{[]string{"syscall.Syscall6", "net.sendZeroCopy", "net.serve"}, 20 * ms, nil},
		{[]string{"syscall.Syscall6", "net.sendCopy", "net.serve"}, 150 * ms, nil},
	})
	bp, np := writeProfile(t, base, "base.pprof"), writeProfile(t, cur, "new.pprof")
	var flat, cum bytes.Buffer
	if err := DiffBy(&flat, bp, np, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := DiffBy(&cum, bp, np, 0, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(flat.String(), "net.sendCopy") {
		t.Errorf("flat diff names the caller (it has no flat time):\n%s", flat.String())
	}
	first := ""
	for _, line := range strings.Split(cum.String(), "\n") {
		if f := strings.Fields(line); len(f) == 5 && strings.HasPrefix(f[4], "net.sendCopy") {
			first = f[0]
		}
	}
	if first != "+150ms" {
		t.Fatalf("cum diff: net.sendCopy delta %q, want +150ms:\n%s", first, cum.String())
	}
	if !strings.Contains(cum.String(), "by cum growth") || !strings.Contains(cum.String(), "-80ms") {
		t.Errorf("cum diff misses the header or the shrinking zero-copy path:\n%s", cum.String())
	}
}

// TestTraceKind captures an execution trace of a window in which a named
// goroutine runs, and checks the file is Go's trace format with that
// goroutine's events in it.
func TestTraceKind(t *testing.T) {
	dir := t.TempDir()
	s, err := Start([]string{"trace", "goroutine"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { burnCPU(20 * time.Millisecond); close(done) }()
	<-done
	paths, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "trace.out"), filepath.Join(dir, "goroutine.pprof")}
	if strings.Join(paths, "|") != strings.Join(want, "|") {
		t.Fatalf("paths = %q, want %q", paths, want)
	}
	b, err := os.ReadFile(want[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("go 1.")) || len(b) < 1000 {
		t.Fatalf("trace.out is not an execution trace: %d bytes, starts %q", len(b), b[:min(len(b), 16)])
	}
	// A second session may trace again: the first one stopped the tracer.
	s2, err := Start([]string{"trace"}, t.TempDir())
	if err != nil {
		t.Fatalf("second trace session: %v", err)
	}
	if _, err := s2.Stop(); err != nil {
		t.Fatal(err)
	}
}
