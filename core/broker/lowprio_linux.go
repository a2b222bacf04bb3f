//go:build linux

package broker

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lowerThreadPriority runs the calling goroutine, to its end, on a thread of its own at the
// lowest scheduling priority (nice 19), so that the kernel work it does (the metadata
// writer's file creation) takes the CPU only when the broker's other threads leave it idle.
// The thread is never unlocked, so it ends with the goroutine and no other goroutine runs
// at its priority. Best effort: a refused setpriority leaves the thread as it was.
func lowerThreadPriority() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
}
