//go:build !linux

package vfs

import "os"

// openFile is os.OpenFile (see the Linux version).
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

// mkdir is os.Mkdir.
func mkdir(name string, perm os.FileMode) error { return os.Mkdir(name, perm) }
