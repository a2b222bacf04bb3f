package sched

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Waits are the kernel's scheduler statistics of the process's threads (sched_info, read from
// /proc/self/task/TID/schedstat): how long each thread ran, how long it waited runnable on a
// run queue for a CPU (run_delay), and how many times it was given a CPU (pcount). Taken at
// two moments, WaitsDelta says how much of a window the process's threads spent waiting for a
// CPU: the part of a latency that is neither isrbench's work nor its I/O, but a CPU that was
// not there (the host's other load, or more of the process's threads runnable than it has
// CPUs), and how long a woken thread waited on average before it ran.
type Waits map[int]ThreadWait

// ThreadWait is one thread's sched_info counters.
type ThreadWait struct {
	Run    time.Duration // time on a CPU
	Wait   time.Duration // time runnable, waiting on a run queue (run_delay)
	Slices int64         // times it was put on a CPU (pcount)
}

// WaitTotals is what the process's threads did between two readings.
type WaitTotals struct {
	Run, Wait time.Duration
	Slices    int64
	Threads   int // threads alive at the second reading
}

// WaitPerSlice is the mean wait of a thread each time it was put on a CPU (0 when none).
func (t WaitTotals) WaitPerSlice() time.Duration {
	if t.Slices <= 0 {
		return 0
	}
	return t.Wait / time.Duration(t.Slices)
}

// WaitsDelta sums b's counters over a's: threads made after a count from zero. A thread that
// ended between a and b is left out (its time since a is lost, a small undercount: the Go
// runtime keeps its threads, only a goroutine that exits locked to its thread ends one).
func WaitsDelta(a, b Waits) WaitTotals {
	var t WaitTotals
	for tid, w := range b {
		p := a[tid]
		if w.Run < p.Run || w.Wait < p.Wait || w.Slices < p.Slices {
			p = ThreadWait{} // a thread id used again by a new thread
		}
		t.Run += w.Run - p.Run
		t.Wait += w.Wait - p.Wait
		t.Slices += w.Slices - p.Slices
		t.Threads++
	}
	return t
}

// parseSchedstat reads a /proc/PID/task/TID/schedstat line: "run_ns wait_ns pcount".
func parseSchedstat(s string) (ThreadWait, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return ThreadWait{}, fmt.Errorf("schedstat %q: want 3 fields (run_ns wait_ns pcount), got %d", strings.TrimSpace(s), len(f))
	}
	var v [3]int64
	for i, x := range f {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil || n < 0 {
			return ThreadWait{}, fmt.Errorf("schedstat %q: field %d is not a count", strings.TrimSpace(s), i+1)
		}
		v[i] = n
	}
	return ThreadWait{Run: time.Duration(v[0]), Wait: time.Duration(v[1]), Slices: v[2]}, nil
}
