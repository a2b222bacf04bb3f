package sched

import (
	"strings"
	"testing"
	"time"
)

func TestParseSchedstat(t *testing.T) {
	w, err := parseSchedstat("123456789 2500000 42\n")
	if err != nil || w != (ThreadWait{Run: 123456789, Wait: 2500000, Slices: 42}) {
		t.Fatalf("got %+v, %v", w, err)
	}
	for in, want := range map[string]string{
		"1 2":       "want 3 fields",
		"1 2 3 4":   "want 3 fields",
		"1 x 3":     "field 2 is not a count",
		"1 2 -3":    "field 3 is not a count",
		"":          "want 3 fields",
		"9e9 1 1\n": "field 1 is not a count",
	} {
		if _, err := parseSchedstat(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseSchedstat(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

func TestWaitsDelta(t *testing.T) {
	a := Waits{
		1: {Run: 10 * time.Millisecond, Wait: 4 * time.Millisecond, Slices: 100},
		2: {Run: 5 * time.Millisecond, Wait: 1 * time.Millisecond, Slices: 10},   // ends before b
		3: {Run: 50 * time.Millisecond, Wait: 9 * time.Millisecond, Slices: 900}, // its id is reused
	}
	b := Waits{
		1: {Run: 30 * time.Millisecond, Wait: 10 * time.Millisecond, Slices: 160}, // +20, +6, +60
		3: {Run: 2 * time.Millisecond, Wait: 1 * time.Millisecond, Slices: 4},     // a new thread: from zero
		4: {Run: 1 * time.Millisecond, Wait: 3 * time.Millisecond, Slices: 16},    // made after a
	}
	got := WaitsDelta(a, b)
	want := WaitTotals{Run: 23 * time.Millisecond, Wait: 10 * time.Millisecond, Slices: 80, Threads: 3}
	if got != want {
		t.Fatalf("WaitsDelta = %+v, want %+v", got, want)
	}
	if ps := got.WaitPerSlice(); ps != 125*time.Microsecond {
		t.Errorf("WaitPerSlice = %v, want 125µs", ps)
	}
	if ps := (WaitTotals{}).WaitPerSlice(); ps != 0 {
		t.Errorf("WaitPerSlice of nothing = %v", ps)
	}
}
