//go:build !linux

package sched

import "fmt"

// Apply sets p on every thread of the process; only Linux has these policies, so any policy
// but Inherit is an error here.
func Apply(p Policy) (int, error) {
	if p == Inherit {
		return 0, nil
	}
	if _, err := Parse(string(p)); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("scheduling policy %s: only on Linux (use inherit)", p)
}

// Describe names the policies of the process's threads; "" where they are not known.
func Describe() string { return "" }
