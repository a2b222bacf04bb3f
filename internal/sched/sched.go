// Package sched sets the kernel scheduling policy of every thread of the process (the
// harness's sched.policy and serve's --sched-policy) and reads how long the threads waited for
// a CPU (ReadWaits: the cost table's run-queue wait).
//
// Under SCHED_BATCH a thread that is woken never preempts the thread running on its CPU; it
// runs when a CPU is idle or at the running thread's next scheduling point. The Go runtime
// wakes threads all the time (an idle M for each goroutine made ready while no P spins, the
// network poller's M for each socket that turns readable), and under SCHED_OTHER each such
// wake-up can preempt the thread that made it, in the middle of the system call that made it
// (a write to a loopback socket runs the receiver's side and wakes its reader), only for the
// woken thread to find no P free and sleep again. SCHED_BATCH keeps the thread that did the
// work running. Nothing else changes: the nice value (and so the CPU share) stays as it was,
// and it needs no privilege.
package sched

import (
	"fmt"
	"strings"
)

// Policy is a value of sched.policy.
type Policy string

const (
	// Inherit leaves the threads as the process was started (chrt, systemd's CPUSchedulingPolicy).
	Inherit Policy = "inherit"
	// Batch is SCHED_BATCH: a woken thread does not preempt a running one.
	Batch Policy = "batch"
	// Other is SCHED_OTHER, the kernel's default.
	Other Policy = "other"
)

// Policies lists the values of sched.policy.
var Policies = []string{string(Batch), string(Other), string(Inherit)}

// Default is the policy of a run and of serve unless told otherwise.
const Default = Batch

// Parse reads a policy name, naming the allowed ones when it is not one of them.
func Parse(s string) (Policy, error) {
	for _, p := range Policies {
		if s == p {
			return Policy(s), nil
		}
	}
	return "", fmt.Errorf("scheduling policy %q: allowed %s", s, strings.Join(Policies, "|"))
}
