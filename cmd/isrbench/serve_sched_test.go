//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// threadPolicies counts the scheduling policies (SCHED_* numbers, /proc/PID/task/TID/stat
// field 41) of every thread of process pid.
func threadPolicies(t *testing.T, pid int) map[int]int {
	t.Helper()
	stats, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(stats) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	count := map[int]int{}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		_, rest, ok := strings.Cut(string(b), ") ") // after the command name, fields 3 on
		f := strings.Fields(rest)
		if !ok || len(f) < 39 {
			t.Fatalf("%s: %q", p, b)
		}
		policy, err := strconv.Atoi(f[41-3])
		if err != nil {
			t.Fatalf("%s: policy %q", p, f[41-3])
		}
		count[policy]++
	}
	return count
}

// TestServeSchedPolicy: serve sets its scheduling policy on every thread of its process
// (SCHED_BATCH by default, SCHED_OTHER with --sched-policy other) and says so.
func TestServeSchedPolicy(t *testing.T) {
	const schedOther, schedBatch = 0, 3
	bin := buildIsrbench(t)
	for _, c := range []struct {
		args   []string
		policy int
		line   string
	}{
		{nil, schedBatch, "batch (--sched-policy batch)"},
		{[]string{"--sched-policy", "other"}, schedOther, "other (--sched-policy other)"},
	} {
		sp := startServeProc(t, bin, append([]string{"--brokers", "1"}, c.args...)...)
		if sp.threads != c.line {
			t.Errorf("serve %v: threads line %q, want %q", c.args, sp.threads, c.line)
		}
		if got := threadPolicies(t, sp.pid); len(got) != 1 || got[c.policy] == 0 {
			t.Errorf("serve %v: threads by policy %v, want all %d", c.args, got, c.policy)
		}
	}
}
