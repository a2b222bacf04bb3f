//go:build !linux

package sched

// Apply sets p on every thread of the process. Only Linux has these policies: elsewhere it
// checks the name and sets nothing, and Describe's empty answer (result.json env.sched
// absent) says so.
func Apply(p Policy) (int, error) {
	_, err := Parse(string(p))
	return 0, err
}

// Describe names the policies of the process's threads; "" where they are not known.
func Describe() string { return "" }
