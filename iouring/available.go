package iouring

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrUnavailable is wrapped by NewRing's error when the kernel refuses io_uring.
var ErrUnavailable = errors.New("iouring: io_uring unavailable")

// SetupError is io_uring_setup's failure with an explanation of the likely cause.
type SetupError struct {
	Errno  unix.Errno
	Reason string
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("iouring: io_uring_setup: %s (%s)", e.Errno.Error(), e.Reason)
}

func (e *SetupError) Unwrap() []error { return []error{e.Errno, ErrUnavailable} }

var probe struct {
	once   sync.Once
	ok     bool
	reason string
}

// Available reports whether io_uring works in this process: it sets up a
// small ring once, submits a NOP through io_uring_enter and reaps its
// completion. When it does not, reason says why (ENOSYS: kernel without
// CONFIG_IO_URING or syscall filtered; EPERM: seccomp profile or the
// kernel.io_uring_disabled sysctl). The result is cached; safe for concurrent use.
func Available() (ok bool, reason string) {
	probe.once.Do(func() {
		probe.reason = runProbe()
		probe.ok = probe.reason == ""
		if probe.ok {
			probe.reason = "io_uring available"
		}
	})
	return probe.ok, probe.reason
}

func runProbe() string {
	r, err := setup(2)
	if err != nil {
		return err.Error()
	}
	defer r.close()
	s := r.nextSQE()
	s.opcode = opNop
	s.userData = 1
	r.publish()
	for {
		_, err := r.enter(1, 1, enterGetEvents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Sprintf("iouring: io_uring_enter(NOP): %v (setup allowed but enter refused: seccomp/LSM policy?)", err)
		}
		break
	}
	var res int32 = 1
	got := r.reap(func(_ uint64, rr int32) { res = rr })
	if got != 1 {
		return "iouring: NOP submitted but no completion reaped"
	}
	if res < 0 {
		return fmt.Sprintf("iouring: NOP completed with %v", unix.Errno(-res))
	}
	return ""
}

// explainSetupErrno turns io_uring_setup's errno into the likely cause.
func explainSetupErrno(errno unix.Errno) string {
	switch errno {
	case unix.ENOSYS:
		return "kernel built without CONFIG_IO_URING, too old (< 5.1), or the syscall is filtered by a seccomp profile / sandbox (gVisor) that answers ENOSYS"
	case unix.EPERM:
		switch sysctl := readSysctl("/proc/sys/kernel/io_uring_disabled"); sysctl {
		case "2":
			return "disabled for all processes by sysctl kernel.io_uring_disabled=2"
		case "1":
			return "restricted by sysctl kernel.io_uring_disabled=1 to CAP_SYS_ADMIN and the group in kernel.io_uring_group"
		default:
			detail := "kernel.io_uring_disabled=" + sysctl
			if sysctl == "" {
				detail = "kernel.io_uring_disabled not readable"
			}
			if seccompActive() {
				return "blocked by a seccomp filter (container runtime default profile?); " + detail
			}
			return "operation not permitted (seccomp or LSM policy); " + detail
		}
	case unix.ENOMEM:
		return "not enough locked memory for the rings (RLIMIT_MEMLOCK on kernels < 5.12)"
	case unix.EINVAL:
		return "invalid parameters (kernel too old for the requested setup?)"
	case unix.EMFILE, unix.ENFILE:
		return "out of file descriptors"
	}
	return "unexpected errno"
}

func readSysctl(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func seccompActive() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(v) != "0"
		}
	}
	return false
}
