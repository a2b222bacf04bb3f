package workloads

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/isrbench/isrbench/core/vfs"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

func TestParseDiskFloor(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    spec.DiskFloor
		str     string
		wantErr string
	}{
		{in: "2GiB", want: spec.DiskFloor{Bytes: 2 << 30}, str: "2GiB"},
		{in: "500 MiB", want: spec.DiskFloor{Bytes: 500 << 20}, str: "500MiB"},
		{in: "10GB", want: spec.DiskFloor{Bytes: 10e9}, str: "10000000000"},
		{in: "1.5GiB", want: spec.DiskFloor{Bytes: 3 << 29}, str: "1536MiB"},
		{in: "2147483648", want: spec.DiskFloor{Bytes: 2 << 30}, str: "2GiB"},
		{in: "12345", want: spec.DiskFloor{Bytes: 12345}, str: "12345"},
		{in: "5%", want: spec.DiskFloor{Percent: 5}, str: "5%"},
		{in: "0.5%", want: spec.DiskFloor{Percent: 0.5}, str: "0.5%"},
		{in: "0", want: spec.DiskFloor{}, str: "0"},
		{in: "", wantErr: "is not a size"},
		{in: "lots", wantErr: "is not a size"},
		{in: "-1GiB", wantErr: "out of range"},
		{in: "100%", wantErr: "0 < percent < 100"},
		{in: "0%", wantErr: "0 < percent < 100"},
		{in: "x%", wantErr: "is not a percentage"},
		{in: "1e30", wantErr: "out of range"},
		{in: "NaN", wantErr: "is not a size"},
	} {
		got, err := spec.ParseDiskFloor("isrbench.min.free.disk", c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "isrbench.min.free.disk") {
				t.Errorf("%q: err %v, want one naming the key and %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want || got.String() != c.str {
			t.Errorf("%q: %+v %q %v, want %+v %q", c.in, got, got.String(), err, c.want, c.str)
			continue
		}
		back, err := spec.ParseDiskFloor("k", got.String())
		if err != nil || back != got {
			t.Errorf("%q: round trip %+v %v", c.in, back, err)
		}
	}
	if f := (spec.DiskFloor{Percent: 5}); f.Of(1000) != 50 || f.Off() {
		t.Errorf("5%% of 1000 = %d", f.Of(1000))
	}
	if !(spec.DiskFloor{}).Off() {
		t.Error("zero floor is not off")
	}
}

// TestRetentionSpecKeys: the retention keys and the disk floor are validated spec keys with
// the harness defaults, documented in KeyHelp, reported in Config and mapped onto the
// embedded cluster.
func TestRetentionSpecKeys(t *testing.T) {
	s, err := spec.Load("default")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.Config()
	for k, want := range map[string]any{
		"log.retention.bytes": int64(spec.DefaultLogRetentionBytes), "log.segment.bytes": int64(spec.DefaultLogSegmentBytes),
		"log.retention.ms": int64(604800000), "log.retention.check.interval.ms": int64(1000),
		"isrbench.min.free.disk": "2GiB",
	} {
		if cfg[k] != want {
			t.Errorf("config[%s] = %v (%T), want %v", k, cfg[k], cfg[k], want)
		}
		if !strings.Contains(spec.KeyHelp(), k) {
			t.Errorf("KeyHelp lacks %s", k)
		}
	}
	if err := s.ApplySets([]string{"retention.bytes=-1", "broker.log.retention.ms=60000", "log.retention.check.interval.ms=50", "min.free.disk=5%"}); err != nil {
		t.Fatal(err)
	}
	cc, err := target.ClusterConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	if b := cc.Broker; b.Log.RetentionBytes != -1 || b.Log.RetentionMs != 60000 || b.LogRetentionCheckIntervalMs != 50 || s.MinFreeDisk.Percent != 5 {
		t.Errorf("cluster config retention %d %d %d floor %+v", b.Log.RetentionBytes, b.Log.RetentionMs, b.LogRetentionCheckIntervalMs, s.MinFreeDisk)
	}
	for _, c := range []struct{ set, want string }{
		{"log.retention.bytes=-2", "log.retention.bytes: -2 is out of range"},
		{"log.retention.ms=soon", "log.retention.ms: \"soon\" is not an integer"},
		{"log.retention.check.interval.ms=0", "log.retention.check.interval.ms: 0 is out of range"},
		{"isrbench.min.free.disk=much", "isrbench.min.free.disk: \"much\" is not a size"},
	} {
		if err := s.Clone().ApplySets([]string{c.set}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: %v, want %q", c.set, err, c.want)
		}
	}
	// In YAML, under broker:.
	y := "name: r\nbroker:\n  log.retention.bytes: 1048576\n  isrbench.min.free.disk: 3GiB\n"
	s2, err := spec.Parse([]byte(y))
	if err != nil || s2.Settings.Int("log.retention.bytes") != 1<<20 || s2.MinFreeDisk.Bytes != 3<<30 {
		t.Fatalf("yaml: %v %+v", err, s2)
	}
	if _, err := spec.Parse([]byte("name: r\nbroker:\n  isrbench.min.free.disk: 150%\n")); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("bad yaml floor: %v", err)
	}
}

// TestDiskGuardRefusesToStart: a floor above the current free space stops the run at once,
// before any load, with an error naming the data dir, the free bytes and the floor; the data
// dir is removed.
func TestDiskGuardRefusesToStart(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	free, _, err := statFS(tmp)
	if err != nil {
		t.Fatal(err)
	}
	floor := int64(free) + 1<<40 // a TiB more than there is
	s := shortSpec(t, "duration=30s", "warmup=0s", fmt.Sprintf("isrbench.min.free.disk=%d", floor))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	out := t.TempDir()
	res, err := Run(ctx, s, Options{OutDir: out, Quiet: true})
	var le *LowDiskError
	if !errors.As(err, &le) || !errors.Is(err, ErrLowDisk) || res != nil || le.During {
		t.Fatalf("Run: %v (result %v), want a *LowDiskError", err, res != nil)
	}
	if !strings.HasPrefix(le.Path, filepath.Join(tmp, "isrbench-run-")) || le.Floor != floor || le.Free <= 0 || le.Free >= floor {
		t.Errorf("error %+v", le)
	}
	msg := err.Error()
	if ents, _ := os.ReadDir(out); len(ents) > 0 {
		t.Errorf("run dir left in %s: %v", out, ents)
	}
	for _, want := range []string{le.Path, fmt.Sprint(le.Free), fmt.Sprint(floor), "isrbench.min.free.disk", "run not started"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("refusing to start took %v", took)
	}
	if _, err := os.Stat(le.Path); !os.IsNotExist(err) {
		t.Errorf("data dir %s still there: %v", le.Path, err)
	}
}

// TestDiskGuardStopsRun: the disk fills up during the measurement (a fake statfs reports less
// and less free space): the run stops producing, returns the guard's error long before its
// 30 s duration, and removes its data dir.
func TestDiskGuardStopsRun(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	s := shortSpec(t, "duration=30s", "warmup=0s", "producers.rate=500", "isrbench.min.free.disk=1GiB")
	var calls atomic.Int64
	const total = 100 << 30
	stat := func(path string) (uint64, uint64, error) {
		if !strings.HasPrefix(path, tmp) {
			return 0, 0, fmt.Errorf("guard watches %s, not the data dir under %s", path, tmp)
		}
		if calls.Add(1) <= 2 { // the check before the load and the first tick
			return 50 << 30, total, nil
		}
		return 512 << 20, total, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	_, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true, statFS: stat})
	var le *LowDiskError
	if !errors.As(err, &le) || le.Free != 512<<20 || le.Floor != 1<<30 || le.Spec != "1GiB" || !le.During {
		t.Fatalf("Run: %v, want a *LowDiskError with free 512 MiB and floor 1 GiB", err)
	}
	if !strings.Contains(err.Error(), "536870912 bytes") || !strings.Contains(err.Error(), "isrbench.min.free.disk=1GiB (1073741824 bytes): stopped producing") {
		t.Errorf("message %q", err)
	}
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("the guard stopped the run after %v", took)
	}
	if calls.Load() < 3 {
		t.Errorf("guard checked %d times", calls.Load())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "isrbench-run-*")); len(left) > 0 {
		t.Errorf("data dirs left behind: %v", left)
	}
}

// TestRetentionExpired: with tiny segments and retention, acknowledged records deleted by
// retention before the read-back count as expired, never as lost, and the replica logs still
// compare equal from their common log start. The producers' batches are kept below the
// segment size: a producer that falls behind fills its batches (up to batch.size), and a
// batch larger than a segment is refused (RECORD_LIST_TOO_LARGE, as Kafka does): on a busy
// machine nearly every record was, and too few were acknowledged for retention to delete any.
func TestRetentionExpired(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	s := shortSpec(t, "duration=2s", "warmup=0s", "producers.rate=2000", "producers.batch.size=4096",
		"log.segment.bytes=8192", "log.retention.bytes=16384", "log.retention.check.interval.ms=100")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Durability
	if d.Expired == 0 || d.Lost != 0 || d.Verified == 0 || d.Verified+d.Lost+d.Expired != d.Acked {
		t.Fatalf("durability %+v: want expired > 0, lost 0, verified+expired == acked", d.DurabilityCounts)
	}
	if all := d.ByAcks["all"]; all.Expired != d.Expired {
		t.Errorf("by acks %+v", d.ByAcks)
	}
	if !d.ReplicasIdentical {
		t.Errorf("replicas not identical: %v", res.Notes)
	}
	if res.Config["log.retention.bytes"] != int64(16384) || !strings.Contains(res.Notes["durability.expired"], "retention") {
		t.Errorf("config %v notes %v", res.Config["log.retention.bytes"], res.Notes)
	}
	if !strings.Contains(res.Notes["disk"], "data dir peak") {
		t.Errorf("notes %v", res.Notes)
	}
	t.Logf("durability %+v; %s", d.DurabilityCounts, res.Notes["disk"])
}

// TestFullDiskEndsRunWithStorageError: with the disk guard off, a disk that fills up takes
// a broker's log directory offline; the run stops producing promptly and ends with an error
// naming KAFKA_STORAGE_ERROR (exit 1), instead of hanging on produces that cannot succeed.
func TestFullDiskEndsRunWithStorageError(t *testing.T) {
	s := shortSpec(t, "duration=30s", "warmup=0s", "producers.rate=500", "isrbench.min.free.disk=0")
	fs := vfs.NewErrorFS(vfs.OS)
	var writes atomic.Int64
	fs.SetInjector(func(op vfs.Op, path string) error {
		if (op == vfs.OpWrite || op == vfs.OpSync) && strings.HasSuffix(path, ".log") && writes.Add(1) > 400 {
			return syscall.ENOSPC
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	_, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true, fs: fs})
	var se *StorageError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "KAFKA_STORAGE_ERROR") || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Run: %v, want a *StorageError naming KAFKA_STORAGE_ERROR and ENOSPC", err)
	}
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("the run ended %v after start", took)
	}
}

// TestDiskGuardWalkBudget: after a walk that took d the guard walks the data dir again only
// walkCostShare*d later (statfs stays on every check), and walk measures it at once.
func TestDiskGuardWalkBudget(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", 100)
	stats := 0
	g := newDiskGuard(dir, spec.DiskFloor{}, func(string) (uint64, uint64, error) {
		stats++
		return 1 << 40, 1 << 41, nil
	})
	clock := time.Unix(1000, 0)
	walkCost := 10 * time.Millisecond
	calls := 0
	g.now = func() time.Time {
		// Every second call ends a walk: the walk "takes" walkCost.
		calls++
		if calls%2 == 0 {
			clock = clock.Add(walkCost)
		}
		return clock
	}
	peak := func() int64 { p, _ := g.stats(); return p }
	if err := g.check(); err != nil || peak() != 100 {
		t.Fatalf("first check: err %v, peak %d, want 100", err, peak())
	}
	write("b", 50)
	wait := walkCostShare * walkCost
	clock = clock.Add(wait - walkCost - time.Millisecond)
	g.now = func() time.Time { return clock } // no walk may happen now: the clock does not move
	if err := g.check(); err != nil || peak() != 100 {
		t.Fatalf("check %v after a %v walk: peak %d, want 100 (no walk before %v)", wait-walkCost-time.Millisecond, walkCost, peak(), wait)
	}
	clock = clock.Add(time.Millisecond)
	if err := g.check(); err != nil || peak() != 150 {
		t.Fatalf("check %v after the walk: peak %d, want 150", wait-walkCost, peak())
	}
	if stats != 3 {
		t.Errorf("statfs called %d times in 3 checks, want 3", stats)
	}
	write("c", 1000)
	g.walk()
	if peak() != 1150 {
		t.Errorf("walk: peak %d, want 1150", peak())
	}
}

// TestSampleInterval: the O(partitions) samplers keep their period up to 100 partitions and
// slow down in proportion above, within their limit.
func TestSampleInterval(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		base       time.Duration
		partitions int
		limit      time.Duration
		want       time.Duration
	}{
		{100 * ms, 1, time.Second, 100 * ms},
		{100 * ms, 100, time.Second, 100 * ms},
		{100 * ms, 101, time.Second, 200 * ms},
		{100 * ms, 1000, time.Second, time.Second},
		{100 * ms, 10000, time.Second, time.Second},
		{100 * ms, 10000, 10 * time.Second, 10 * time.Second},
		{time.Second, 1000, 500 * ms, time.Second}, // never faster than base
	} {
		if got := sampleInterval(c.base, c.partitions, c.limit); got != c.want {
			t.Errorf("sampleInterval(%v, %d, %v) = %v, want %v", c.base, c.partitions, c.limit, got, c.want)
		}
	}
}
