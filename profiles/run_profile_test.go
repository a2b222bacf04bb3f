package profiles_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/isrbench/isrbench/profiles"
	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads"
	"github.com/isrbench/isrbench/workloads/spec"
)

// profiledRun runs the default spec on the embedded cluster as fast as it goes (large records, two
// consumers: lots of fetch serving) with cpu and goroutine profiles, and returns the result. With
// zero copy on, isrbench.zero.copy.min.bytes=0 sends every record slice by sendfile (by default
// the small ones are copied), so the two runs take one path each.
func profiledRun(t *testing.T, ctx context.Context, zeroCopy bool, measure, warmup time.Duration) *results.Result {
	t.Helper()
	s, err := spec.Load("default")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ApplySets([]string{"duration=" + measure.String(), "warmup=" + warmup.String(), "rate=1000", "batch.size=262144",
		"message.size=32000", "consumers.count=3", "partitions=3", "isrbench.zero.copy=" + strconv.FormatBool(zeroCopy),
		"isrbench.zero.copy.min.bytes=0"}); err != nil { // with zero copy on, every record slice goes by sendfile
		t.Fatal(err)
	}
	res, err := workloads.Run(ctx, s, workloads.Options{OutDir: t.TempDir(), Quiet: true,
		Profile: []string{"cpu", "goroutine"}})
	if err != nil {
		t.Fatalf("run zero.copy=%v: %v", zeroCopy, err)
	}
	return res
}

func linked(t *testing.T, res *results.Result, kind string) string {
	t.Helper()
	for _, f := range res.Files.Profiles {
		if filepath.Base(f) == kind+".pprof" {
			return f
		}
	}
	t.Fatalf("result.json files.profiles %q has no %s.pprof", res.Files.Profiles, kind)
	return ""
}

// copyPath sums the folded-stack values of samples in the copy path of fetch serving: below
// netfetch's sendFetch, in anything but sendZeroCopy (appendSlice, pread, the write of the copied
// buffer). zeroCopyPath sums those below sendZeroCopy.
func copyPaths(t *testing.T, file string) (copyPath, zeroCopyPath int64) {
	t.Helper()
	var buf bytes.Buffer
	if err := profiles.Folded(&buf, file); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseInt(line[sp+1:], 10, 64)
		if sp < 0 || err != nil {
			t.Fatalf("folded line %q: %v", line, err)
		}
		frames := strings.Split(line[:sp], ";")
		for i, f := range frames {
			if !strings.HasSuffix(f, "netfetch.(*conn).sendFetch") || i+1 == len(frames) {
				continue
			}
			switch callee := frames[i+1]; {
			case strings.HasSuffix(callee, "netfetch.(*conn).sendZeroCopy"):
				zeroCopyPath += v
			case strings.HasPrefix(callee, "runtime."): // stack growth, preemption: neither path
			default:
				copyPath += v
			}
			break
		}
	}
	return copyPath, zeroCopyPath
}

const (
	sendFetch    = "github.com/isrbench/isrbench/netfetch.(*conn).sendFetch"
	appendSlice  = "github.com/isrbench/isrbench/netfetch.appendSlice"
	sendZeroCopy = "github.com/isrbench/isrbench/netfetch.(*conn).sendZeroCopy"
)

// pruneFrom cuts every sample's stack below the innermost frame whose function is in entry (as
// go tool pprof -prune_from, but on exact names and across inlined frames), so that frame's flat
// value becomes the time spent in its call tree, minus the trees of entries it calls.
func pruneFrom(p *profile.Profile, entry map[string]bool) {
	var nextID uint64
	for _, l := range p.Location {
		nextID = max(nextID, l.ID)
	}
	type key struct {
		loc  *profile.Location
		line int
	}
	made := map[key]*profile.Location{}
	for _, s := range p.Sample {
	search:
		for li, loc := range s.Location { // leaf first
			for j := range loc.Line { // Line[0] is the innermost inlined call
				if loc.Line[j].Function == nil || !entry[loc.Line[j].Function.Name] {
					continue
				}
				stack := append([]*profile.Location(nil), s.Location[li:]...)
				if j > 0 {
					nl := made[key{loc, j}]
					if nl == nil {
						nextID++
						c := *loc
						c.ID, c.Line = nextID, append([]profile.Line(nil), loc.Line[j:]...)
						nl = &c
						made[key{loc, j}] = nl
						p.Location = append(p.Location, nl)
					}
					stack[0] = nl
				}
				s.Location = stack
				break search
			}
		}
	}
}

// TestRunProfiles checks the profiles of real runs: linked from result.json, covering the
// measurement window only, labelled by broker and role, and `profile diff` / `profile folded`
// between zero copy on and off show the copy path growing.
func TestRunProfiles(t *testing.T) {
	if testing.Short() {
		t.Skip("two embedded-cluster runs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const measure, warmup = 3 * time.Second, 500 * time.Millisecond
	zc := profiledRun(t, ctx, true, measure, warmup)
	cp := profiledRun(t, ctx, false, measure, warmup)

	zcCPU, cpCPU := linked(t, zc, "cpu"), linked(t, cp, "cpu")
	for _, f := range []string{zcCPU, cpCPU} {
		p, err := profiles.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		// The window is the measurement only: not the warm-up, not cluster start or drain.
		if d := time.Duration(p.DurationNanos); d < measure*8/10 || d > measure+warmup/2 {
			t.Errorf("%s covers %v; want the %v measurement window (warm-up %v excluded)", f, d, measure, warmup)
		}
	}

	// Labels: every role of the issue appears on cpu samples or goroutines, with broker ids.
	roles, brokers := map[string]bool{}, map[string]bool{}
	for _, f := range []string{cpCPU, linked(t, cp, "goroutine"), zcCPU, linked(t, zc, "goroutine")} {
		p, err := profiles.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Sample {
			for _, v := range s.Label[profiles.LabelRole] {
				roles[v] = true
			}
			for _, v := range s.Label[profiles.LabelBroker] {
				brokers[v] = true
			}
		}
	}
	for _, r := range []string{profiles.RoleProduce, profiles.RoleFetchServe, profiles.RoleReplicaFetcher,
		profiles.RoleProducerClient, profiles.RoleConsumerClient} {
		if !roles[r] {
			t.Errorf("no samples labelled role=%s (roles seen: %v)", r, roles)
		}
	}
	for _, b := range []string{"0", "1", "2"} {
		if !brokers[b] {
			t.Errorf("no samples labelled broker=%s (brokers seen: %v)", b, brokers)
		}
	}

	// The copy path (sendFetch -> appendSlice/pread, write of the copy) exists only with zero
	// copy off; sendfile's path only with it on.
	zcCopy, zcZero := copyPaths(t, zcCPU)
	cpCopy, cpZero := copyPaths(t, cpCPU)
	t.Logf("zero.copy=true: copy path %v, sendZeroCopy %v; zero.copy=false: copy path %v, sendZeroCopy %v",
		time.Duration(zcCopy), time.Duration(zcZero), time.Duration(cpCopy), time.Duration(cpZero))
	if zcCopy != 0 || cpZero != 0 {
		t.Errorf("copy path in the zero-copy run (%d) or sendZeroCopy in the copy run (%d)", zcCopy, cpZero)
	}
	if cpCopy == 0 {
		t.Fatalf("no cpu samples in the copy path of the zero.copy=false run")
	}

	// profile diff (base zero copy on, new off) of the profiles pruned at the functions of the two
	// paths (as go tool pprof -prune_from): each one's flat value is then the time spent in its
	// part of the path. With zero copy off, sendFetch copies: appendSlice preads the records into
	// the response buffer and sendFetch writes that buffer; with it on, sendFetch only calls
	// sendZeroCopy (sendfile). So the copy path (sendFetch, appendSlice) grows and sendZeroCopy drops.
	entry := map[string]bool{sendFetch: true, appendSlice: true, sendZeroCopy: true}
	dir := t.TempDir()
	pruned := func(in, name string) string {
		p, err := profiles.Load(in)
		if err != nil {
			t.Fatal(err)
		}
		pruneFrom(p, entry)
		out := filepath.Join(dir, name)
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := p.Write(f); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var diff bytes.Buffer
	if err := profiles.Diff(&diff, pruned(zcCPU, "zero-copy.pprof"), pruned(cpCPU, "copy.pprof"), 0); err != nil {
		t.Fatal(err)
	}
	delta := map[string]string{}
	for _, line := range strings.Split(diff.String(), "\n") {
		if f := strings.Fields(line); len(f) == 5 {
			delta[f[4]] = f[0]
		}
	}
	grew := func(fn string) time.Duration {
		v, err := time.ParseDuration(strings.TrimPrefix(delta[fn], "+"))
		if err != nil {
			return 0 // no row: unchanged
		}
		return v
	}
	copyGrowth := grew(sendFetch) + grew(appendSlice)
	if copyGrowth <= 0 || grew(sendZeroCopy) >= 0 || grew(appendSlice) < 0 {
		t.Errorf("profile diff: copy path (sendFetch %q + appendSlice %q) should grow, sendZeroCopy %q drop:\n%s",
			delta[sendFetch], delta[appendSlice], delta[sendZeroCopy], diff.String())
	}
	t.Logf("profile diff: sendFetch %s, appendSlice %s, sendZeroCopy %s", delta[sendFetch], delta[appendSlice], delta[sendZeroCopy])
}
