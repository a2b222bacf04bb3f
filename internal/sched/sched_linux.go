//go:build linux

package sched

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resetOnFork is SCHED_RESET_ON_FORK, which sched_getscheduler ORs into the policy.
const resetOnFork = 0x40000000

var kernelPolicy = map[Policy]int{Batch: unix.SCHED_BATCH, Other: unix.SCHED_NORMAL}

// Apply sets p on every thread of the process and returns how many threads it changed.
// Threads the process makes later are cloned from these and inherit it. A thread made while
// Apply lists them is caught by the next pass: Apply ends after a pass that changed nothing.
// Inherit changes nothing. An error names the thread and the kernel's refusal.
func Apply(p Policy) (changed int, err error) {
	want, ok := kernelPolicy[p]
	if !ok {
		if p == Inherit {
			return 0, nil
		}
		_, err := Parse(string(p))
		return 0, err
	}
	for pass := 0; pass < 10; pass++ {
		tids, err := threads()
		if err != nil {
			return changed, err
		}
		n := 0
		for _, tid := range tids {
			cur, err := policyOf(tid)
			if errors.Is(err, unix.ESRCH) {
				continue // the thread ended
			}
			if err != nil {
				return changed, fmt.Errorf("scheduling policy of thread %d: %w", tid, err)
			}
			if cur == want {
				continue
			}
			if err := setPolicy(tid, want); err != nil && !errors.Is(err, unix.ESRCH) {
				return changed, fmt.Errorf("set scheduling policy %s on thread %d: %w", p, tid, err)
			}
			n++
		}
		changed += n
		if n == 0 {
			return changed, nil
		}
	}
	return changed, fmt.Errorf("set scheduling policy %s: threads kept appearing with another policy after 10 passes", p)
}

// Describe names the policies of the process's threads: "batch" when every thread has
// SCHED_BATCH, "other", or counts by policy when they differ ("batch 11, other 1").
func Describe() string {
	tids, err := threads()
	if err != nil {
		return ""
	}
	count := map[string]int{}
	for _, tid := range tids {
		p, err := policyOf(tid)
		if err != nil {
			continue
		}
		count[policyName(p)]++
	}
	if len(count) == 1 {
		for name := range count {
			return name
		}
	}
	var parts []string
	for name, n := range count {
		parts = append(parts, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func policyName(p int) string {
	switch p {
	case unix.SCHED_NORMAL:
		return "other"
	case unix.SCHED_BATCH:
		return "batch"
	case unix.SCHED_IDLE:
		return "idle"
	case unix.SCHED_FIFO:
		return "fifo"
	case unix.SCHED_RR:
		return "rr"
	case unix.SCHED_DEADLINE:
		return "deadline"
	case unix.SCHED_EXT:
		return "ext"
	}
	return "policy-" + strconv.Itoa(p)
}

// threads lists the process's thread ids.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("list the process's threads: %w", err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

func policyOf(tid int) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r) &^ resetOnFork, nil
}

// setPolicy is sched_setscheduler, which keeps the thread's nice value (sched_setattr would
// set it too).
func setPolicy(tid, policy int) error {
	var param struct{ priority int32 } // struct sched_param: 0 for the normal policies
	_, _, e := unix.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(policy), uintptr(unsafe.Pointer(&param)))
	if e != 0 {
		return e
	}
	return nil
}

// ReadWaits reads the scheduler statistics of every thread of the process. A thread that ends
// while they are read is left out. It fails where the kernel keeps none (no /proc, or a kernel
// built without CONFIG_SCHED_INFO).
func ReadWaits() (Waits, error) {
	tids, err := threads()
	if err != nil {
		return nil, err
	}
	w := make(Waits, len(tids))
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/schedstat")
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			continue // the thread ended, or the kernel keeps no schedstat (below)
		}
		if err != nil {
			return nil, fmt.Errorf("scheduler statistics of thread %d: %w", tid, err)
		}
		tw, err := parseSchedstat(string(b))
		if err != nil {
			return nil, fmt.Errorf("scheduler statistics of thread %d: %w", tid, err)
		}
		w[tid] = tw
	}
	if len(w) == 0 {
		return nil, fmt.Errorf("scheduler statistics: no thread of the process has /proc/self/task/TID/schedstat (a kernel without CONFIG_SCHED_INFO)")
	}
	return w, nil
}
