//go:build linux

package sched

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadWaitsContention runs three busy threads pinned to one CPU for a while: one runs at a
// time, so together they wait about twice as long as they run (on any machine, loaded or not,
// under a CPU quota or not), and ReadWaits must say so, for exactly those threads. A reader
// that swapped the run and wait fields, or read other threads', fails.
func TestReadWaitsContention(t *testing.T) {
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		t.Fatal(err)
	}
	cpu := 0
	for !mask.IsSet(cpu) {
		cpu++
	}
	var one unix.CPUSet
	one.Set(cpu)
	const k = 3
	// Every busy thread needs a P to run Go code: with fewer Ps than threads, the Go scheduler
	// would park one itself, and the kernel would see it sleep, not wait.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + k)

	const busy = 300 * time.Millisecond
	tidc := make(chan int, k)
	errc := make(chan error, k)
	start, release := make(chan struct{}), make(chan struct{})
	var spun sync.WaitGroup // the busy periods
	for range k {
		spun.Add(1)
		go func() {
			// Never unlocked: the thread, pinned to one CPU, ends with the goroutine.
			runtime.LockOSThread()
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				errc <- err
				tidc <- 0
				spun.Done()
				return
			}
			tidc <- unix.Gettid()
			<-start
			for end := time.Now().Add(busy); time.Now().Before(end); {
			}
			spun.Done()
			<-release // alive until its counters are read
		}()
	}
	tids := make([]int, 0, k)
	for range k {
		tids = append(tids, <-tidc)
	}
	select {
	case err := <-errc:
		close(start)
		close(release)
		t.Fatalf("pin a thread to CPU %d: %v", cpu, err)
	default:
	}
	before, err := ReadWaits()
	if err != nil {
		close(start)
		close(release)
		t.Skipf("no scheduler statistics here: %v", err)
	}
	close(start)
	spun.Wait()
	after, err := ReadWaits()
	close(release)
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
	t.Logf("%d busy threads on CPU %d for %v: ran %v, waited %v over %d slices (%v each)", k, cpu, busy, d.Run, d.Wait, d.Slices, d.WaitPerSlice())
	if d.Threads != k || d.Slices < k {
		t.Fatalf("delta over %d threads, %d slices: want %d threads, each put on a CPU at least once", d.Threads, d.Slices, k)
	}
	// One of the three runs at a time: the other two wait, so the wait is about twice the run
	// time; more than it in any case.
	if d.Wait <= d.Run || d.Run <= 0 {
		t.Errorf("%d busy threads on one CPU waited %v and ran %v: one runs at a time, so they wait longer than they run", k, d.Wait, d.Run)
	}
}
