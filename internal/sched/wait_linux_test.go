//go:build linux

package sched

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadWaitsContention runs three busy threads per CPU for a while: at most one per CPU runs
// at a time, so together they wait at least as long as they run (more on a loaded machine),
// and ReadWaits must say so, for exactly those threads. A reader that swapped the run and wait
// fields, or read another thread's, fails.
func TestReadWaitsContention(t *testing.T) {
	ncpu := runtime.NumCPU()
	k := 3 * ncpu
	// Every busy thread needs a P to run Go code: with fewer Ps than threads, the Go scheduler
	// would park the others itself, and the kernel would see no wait.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(k + 2))

	const busy = 300 * time.Millisecond
	tidc := make(chan int, k)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tidc <- unix.Gettid()
			<-start
			for end := time.Now().Add(busy); time.Now().Before(end); {
			}
		}()
	}
	tids := make([]int, 0, k)
	for range k {
		tids = append(tids, <-tidc)
	}
	before, err := ReadWaits()
	if err != nil {
		t.Skipf("no scheduler statistics here: %v", err)
	}
	close(start)
	wg.Wait()
	after, err := ReadWaits()
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		if _, ok := after[tid]; !ok {
			t.Fatalf("thread %d missing from ReadWaits (%d threads)", tid, len(after))
		}
	}
	only := func(w Waits) Waits {
		o := Waits{}
		for _, tid := range tids {
			o[tid] = w[tid]
		}
		return o
	}
	d := WaitsDelta(only(before), only(after))
	t.Logf("%d busy threads on %d CPUs for %v: ran %v, waited %v over %d slices (%v each)", k, ncpu, busy, d.Run, d.Wait, d.Slices, d.WaitPerSlice())
	if d.Threads != k || d.Slices < int64(k) {
		t.Fatalf("delta over %d threads, %d slices: want %d threads, each put on a CPU at least once", d.Threads, d.Slices, k)
	}
	// Each was runnable until its deadline, so together they ran or waited about k busy periods
	// (a quarter of it at least: a CPU quota's throttled time may count as neither).
	if d.Run+d.Wait < time.Duration(k)*busy/4 {
		t.Errorf("ran %v + waited %v, under a quarter of %d x %v: not these threads' counters", d.Run, d.Wait, k, busy)
	}
	if d.Wait <= d.Run {
		t.Errorf("%d busy threads on %d CPUs waited %v and ran %v: they cannot all run at once, so they wait longer than they run", k, ncpu, d.Wait, d.Run)
	}
}
