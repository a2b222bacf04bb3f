//go:build linux

package sched

import (
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// lockedThreads starts n goroutines, each locked to a thread of its own for its whole life
// (the runtime makes new threads for them), and returns their thread ids and a stop function
// that ends them and so their threads.
func lockedThreads(t *testing.T, n int, onThread func(tid int)) (tids []int, stop func()) {
	t.Helper()
	var mu sync.Mutex
	var ready sync.WaitGroup
	done := make(chan struct{})
	var ended sync.WaitGroup
	for range n {
		ready.Add(1)
		ended.Add(1)
		go func() {
			defer ended.Done()
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			tid := unix.Gettid()
			if onThread != nil {
				onThread(tid)
			}
			mu.Lock()
			tids = append(tids, tid)
			mu.Unlock()
			ready.Done()
			<-done
		}()
	}
	ready.Wait()
	return tids, func() { close(done); ended.Wait() }
}

func requirePolicy(t *testing.T, tids []int, want int) {
	t.Helper()
	for _, tid := range tids {
		got, err := policyOf(tid)
		if err != nil {
			t.Fatalf("thread %d: %v", tid, err)
		}
		if got != want {
			t.Errorf("thread %d has %s, want %s", tid, policyName(got), policyName(want))
		}
	}
}

func TestApply(t *testing.T) {
	t.Cleanup(func() {
		if _, err := Apply(Other); err != nil {
			t.Error(err)
		}
	})
	// Threads that exist before Apply: every one of them is set, not only the caller's.
	before, stopBefore := lockedThreads(t, 4, nil)
	defer stopBefore()
	if _, err := Apply(Batch); err != nil {
		t.Fatal(err)
	}
	all, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	requirePolicy(t, all, unix.SCHED_BATCH)
	requirePolicy(t, before, unix.SCHED_BATCH)
	if got := Describe(); got != "batch" {
		t.Errorf("Describe = %q, want batch", got)
	}
	// Threads made afterwards inherit it.
	after, stopAfter := lockedThreads(t, 4, nil)
	requirePolicy(t, after, unix.SCHED_BATCH)
	stopAfter()

	// One thread set back by hand shows in Describe.
	one, stopOne := lockedThreads(t, 1, func(tid int) {
		if err := setPolicy(tid, unix.SCHED_NORMAL); err != nil {
			t.Error(err)
		}
	})
	if got := Describe(); !strings.Contains(got, "batch ") || !strings.HasSuffix(got, "other 1") {
		t.Errorf("Describe with one thread on SCHED_OTHER = %q, want \"batch N, other 1\"", got)
	}
	// Applying again sets it, and only what differs counts as changed.
	n, err := Apply(Batch)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("Apply changed %d threads, want the 1 on SCHED_OTHER", n)
	}
	requirePolicy(t, one, unix.SCHED_BATCH)
	stopOne()

	if _, err := Apply(Other); err != nil {
		t.Fatal(err)
	}
	if all, err = threads(); err != nil {
		t.Fatal(err)
	}
	requirePolicy(t, all, unix.SCHED_NORMAL)
	if n, err := Apply(Inherit); err != nil || n != 0 {
		t.Errorf("Apply(inherit) = %d, %v; want 0 threads changed", n, err)
	}
	requirePolicy(t, all, unix.SCHED_NORMAL)
}

// A thread's nice value (the share of CPU it gets) is not the policy's business: the
// metadata writer's nice-19 thread stays at 19.
func TestApplyKeepsNice(t *testing.T) {
	t.Cleanup(func() { Apply(Other) })
	tids, stop := lockedThreads(t, 1, func(tid int) {
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 7); err != nil {
			t.Errorf("setpriority: %v", err)
		}
	})
	defer stop()
	if _, err := Apply(Batch); err != nil {
		t.Fatal(err)
	}
	requirePolicy(t, tids, unix.SCHED_BATCH)
	// getpriority(2) returns 20 - nice.
	p, err := unix.Getpriority(unix.PRIO_PROCESS, tids[0])
	if err != nil {
		t.Fatal(err)
	}
	if nice := 20 - p; nice != 7 {
		t.Errorf("nice after Apply = %d, want 7", nice)
	}
}

func TestParse(t *testing.T) {
	for _, s := range Policies {
		if p, err := Parse(s); err != nil || string(p) != s {
			t.Errorf("Parse(%q) = %q, %v", s, p, err)
		}
	}
	_, err := Parse("fifo")
	if err == nil || !strings.Contains(err.Error(), `"fifo"`) || !strings.Contains(err.Error(), "batch|other|inherit") {
		t.Errorf("Parse(fifo) = %v, want an error naming the value and the allowed ones", err)
	}
	if _, err := Apply("fifo"); err == nil {
		t.Error("Apply(fifo) accepted")
	}
}
