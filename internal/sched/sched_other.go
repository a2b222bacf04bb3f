//go:build !linux

package sched

import "errors"

// Apply sets p on every thread of the process. Only Linux has these policies: elsewhere it
// checks the name and sets nothing, and Describe's empty answer (result.json env.sched
// absent) says so.
func Apply(p Policy) (int, error) {
	_, err := Parse(string(p))
	return 0, err
}

// Describe names the policies of the process's threads; "" where they are not known.
func Describe() string { return "" }

// ReadWaits reads the threads' scheduler statistics: Linux only.
func ReadWaits() (Waits, error) {
	return nil, errors.New("scheduler statistics of the threads are read from Linux's /proc only")
}
