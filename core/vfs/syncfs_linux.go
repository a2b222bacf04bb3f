//go:build linux && (amd64 || arm64)

package vfs

import "syscall"

// syncfs is syncfs(2) on the file system holding the open file fd.
func syncfs(fd uintptr) error {
	if _, _, e := syscall.Syscall(sysSyncfs, fd, 0, 0); e != 0 {
		return e
	}
	return nil
}
