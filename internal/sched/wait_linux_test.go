//go:build linux

package sched

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// spinEnv names the CPU a TestSpinner process spins on.
const spinEnv = "ISRBENCH_SCHED_SPIN_CPU"

// TestSpinner is a helper, not a test: with spinEnv set, the process pins its thread to that
// CPU, says so, and keeps it busy for 3 s (its parent kills it sooner).
func TestSpinner(t *testing.T) {
	cpu, err := strconv.Atoi(os.Getenv(spinEnv))
	if err != nil {
		t.Skip("a helper process of TestReadWaitsContention")
	}
	runtime.LockOSThread()
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("pinned\n")
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
	}
}

// TestReadWaitsContention keeps one CPU busy with three other processes and spins a thread of
// its own on it for a while: the thread gets about a quarter of the CPU while it is runnable,
// so it waits about three times as long as it runs (more on a loaded machine), and ReadWaits
// must say so, for that thread. A reader that swapped the run and wait fields, or read other
// threads', fails. The competitors are processes, not threads of this one: the Go scheduler
// would park a goroutine it preempted, and the kernel would count that as sleep, not wait.
func TestReadWaitsContention(t *testing.T) {
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		t.Fatal(err)
	}
	cpu := 0
	for !mask.IsSet(cpu) {
		cpu++
	}
	for range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpinner$")
		cmd.Env = append(os.Environ(), spinEnv+"="+strconv.Itoa(cpu))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "pinned\n" {
			t.Fatalf("spinner on CPU %d: %q, %v", cpu, line, err)
		}
	}

	const busy = 300 * time.Millisecond
	done := make(chan error)
	var tid int
	var before, after Waits
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, pinned, ends with the goroutine
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			done <- err
			return
		}
		tid = unix.Gettid()
		var err error
		if before, err = ReadWaits(); err != nil {
			done <- err
			return
		}
		for end := time.Now().Add(busy); time.Now().Before(end); {
		}
		after, err = ReadWaits()
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := after[tid]; !ok {
		t.Fatalf("thread %d missing from ReadWaits (%d threads)", tid, len(after))
	}
	d := WaitsDelta(Waits{tid: before[tid]}, Waits{tid: after[tid]})
	t.Logf("a busy thread on CPU %d beside 3 busy processes for %v: ran %v, waited %v over %d slices (%v each)", cpu, busy, d.Run, d.Wait, d.Slices, d.WaitPerSlice())
	if d.Threads != 1 || d.Slices < 1 {
		t.Fatalf("delta over %d threads, %d slices: want the thread, put on a CPU at least once", d.Threads, d.Slices)
	}
	// It runs about a quarter of the time it is runnable: the wait is about three times the
	// run time; more than it in any case.
	if d.Wait <= d.Run || d.Run <= 0 {
		t.Errorf("a busy thread sharing one CPU with 3 busy processes waited %v and ran %v: it waits longer than it runs", d.Wait, d.Run)
	}
}
