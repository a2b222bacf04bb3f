//go:build linux

package vfs

import (
	"os"
	"syscall"
)

// openFile is os.OpenFile for the files of a data directory at two system calls
// (openat, and the fcntl of os.NewFile) instead of six: os.OpenFile offers every file it
// opens to the runtime's poller (fcntl twice, epoll_ctl, which a regular file refuses, and
// fcntl twice again), which a broker opening the files of thousands of replicas pays for
// nothing. The file is blocking, as os.OpenFile leaves a regular file; errors are
// *os.PathError as os.OpenFile's.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			return os.NewFile(uintptr(fd), name), nil
		}
		if err != syscall.EINTR {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
}

// mkdir is os.Mkdir.
func mkdir(name string, perm os.FileMode) error { return os.Mkdir(name, perm) }
