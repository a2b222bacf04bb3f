package cluster_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
)

var (
	idlePartitions = flag.Int("idle.partitions", 0, "TestIdleCPU: partitions of the RF 3 topic (0 skips the test)")
	idleProfile    = flag.String("idle.profile", "", "TestIdleCPU: write the idle CPU profile here")
	idleCreateProf = flag.String("idle.create.profile", "", "TestIdleCPU: write the CPU profile of the creation (until every ISR is full) here")
	idleSeconds    = flag.Int("idle.seconds", 10, "TestIdleCPU: seconds measured")
	idleProduce    = flag.Bool("idle.produce", false, "TestIdleCPU: then produce one record to each partition (acks=all) and read every one back")
	idleLog        = flag.Bool("idle.log", false, "TestIdleCPU: print the cluster's log lines")
)

// TestIdleCPU measures what an embedded 3-broker cluster with one RF 3 topic of
// -idle.partitions partitions burns when nothing happens: it creates the topic, waits until
// every partition's ISR is full, then counts the process's CPU time (user + system) over
// -idle.seconds and logs it as a share of one core, optionally with a CPU profile, and the
// process's open files; with -idle.produce it then produces one record to each partition
// and reads each back. A measurement, not an assertion (`go test ./cluster -run TestIdleCPU
// -idle.partitions=2000 -v`).
func TestIdleCPU(t *testing.T) {
	if *idlePartitions <= 0 {
		t.Skip("-idle.partitions not set")
	}
	n := int32(*idlePartitions)
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		if !*idleLog {
			cfg.Logf = func(string, ...any) {}
		}
	})
	stopCreateProfile := startProfile(t, *idleCreateProf)
	start, cpuStart := time.Now(), cpuTime(t)
	if err := c.CreateTopic("idle", n, 3, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("CreateTopic of %d partitions RF 3 returned in %v (%v CPU)", n, time.Since(start).Round(time.Millisecond), (cpuTime(t) - cpuStart).Round(time.Millisecond))
	deadline := time.Now().Add(10 * time.Minute)
	for p := int32(0); p < n; {
		st, ok := c.Controller().Partition("idle", p)
		if ok && st.Leader >= 0 && len(st.ISR) == 3 {
			p++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle-%d not fully in sync after 10 min: %+v", p, st)
		}
		<-time.After(20 * time.Millisecond) // poll the controller's state with a deadline
	}
	t.Logf("created %d partitions RF 3, all in sync, in %v (%v CPU), %d files open", n, time.Since(start).Round(time.Millisecond), (cpuTime(t) - cpuStart).Round(time.Millisecond), openFiles(t))
	stopCreateProfile()
	defer logClose(t, c)
	<-time.After(2 * time.Second) // let the creation's aftermath (checkpoints, first fetches) pass
	stopIdleProfile := startProfile(t, *idleProfile)
	cpu0, wall0 := cpuTime(t), time.Now()
	<-time.After(time.Duration(*idleSeconds) * time.Second)
	cpu, wall := cpuTime(t)-cpu0, time.Since(wall0)
	stopIdleProfile()
	t.Logf("idle %d partitions RF 3: %.1f%% of one core (%v CPU over %v), %d files open", n, 100*cpu.Seconds()/wall.Seconds(), cpu.Round(time.Millisecond), wall.Round(time.Millisecond), openFiles(t))
	if !*idleProduce {
		return
	}
	start = time.Now()
	cl := clustertest.NewClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for p := int32(0); p < n; p++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: "idle", Partition: p, Value: []byte(fmt.Sprint(p))}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, fmt.Errorf("produce to idle-%d: %w", r.Partition, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	t.Logf("one record produced to each of %d partitions (acks=all) in %v, %d files open", n, time.Since(start).Round(time.Millisecond), openFiles(t))
	start = time.Now()
	got := clustertest.ConsumeAll(t, c, "idle")
	for p := int32(0); p < n; p++ {
		if len(got[p]) != 1 || got[p][0].Value != fmt.Sprint(p) {
			t.Fatalf("idle-%d read back %v, want its one record %d", p, got[p], p)
		}
	}
	t.Logf("read back in %v, %d files open", time.Since(start).Round(time.Millisecond), openFiles(t))
}

// logClose closes c (brokers, then its temporary data directory) and logs how long that
// took and the CPU it used.
func logClose(t *testing.T, c *cluster.Cluster) {
	start, cpuStart := time.Now(), cpuTime(t)
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	t.Logf("cluster closed (data directory removed) in %v (%v CPU)", time.Since(start).Round(time.Millisecond), (cpuTime(t) - cpuStart).Round(time.Millisecond))
}

// startProfile starts a CPU profile written to path ("" = none) and returns what stops it.
func startProfile(t *testing.T, path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			t.Errorf("CPU profile %s: %v", path, err)
		}
	}
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Logf("open files: %v", err)
		return -1
	}
	return len(ents)
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
