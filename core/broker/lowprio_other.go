//go:build !linux

package broker

// lowerThreadPriority does nothing where threads have no priority of their own.
func lowerThreadPriority() {}
