package cluster_test

import (
	"flag"
	"os"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
)

var (
	idlePartitions = flag.Int("idle.partitions", 0, "TestIdleCPU: partitions of the RF 3 topic (0 skips the test)")
	idleProfile    = flag.String("idle.profile", "", "TestIdleCPU: write the idle CPU profile here")
	idleSeconds    = flag.Int("idle.seconds", 10, "TestIdleCPU: seconds measured")
)

// TestIdleCPU measures what an embedded 3-broker cluster with one RF 3 topic of
// -idle.partitions partitions burns when nothing happens: it creates the topic, waits until
// every partition's ISR is full, then counts the process's CPU time (user + system) over
// -idle.seconds and logs it as a share of one core, optionally with a CPU profile. A
// measurement, not an assertion (`go test ./cluster -run TestIdleCPU -idle.partitions=2000 -v`).
func TestIdleCPU(t *testing.T) {
	if *idlePartitions <= 0 {
		t.Skip("-idle.partitions not set")
	}
	n := int32(*idlePartitions)
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.Logf = func(string, ...any) {} })
	start := time.Now()
	if err := c.CreateTopic("idle", n, 3, nil); err != nil {
		t.Fatal(err)
	}
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
	t.Logf("created %d partitions RF 3, all in sync, in %v", n, time.Since(start).Round(time.Millisecond))
	<-time.After(2 * time.Second) // let the creation's aftermath (checkpoints, first fetches) pass
	if *idleProfile != "" {
		f, err := os.Create(*idleProfile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	cpu0, wall0 := cpuTime(t), time.Now()
	<-time.After(time.Duration(*idleSeconds) * time.Second)
	cpu, wall := cpuTime(t)-cpu0, time.Since(wall0)
	t.Logf("idle %d partitions RF 3: %.1f%% of one core (%v CPU over %v)", n, 100*cpu.Seconds()/wall.Seconds(), cpu.Round(time.Millisecond), wall.Round(time.Millisecond))
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
