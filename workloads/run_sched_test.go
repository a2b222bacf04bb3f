//go:build linux

package workloads

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/isrbench/isrbench/internal/sched"
	"github.com/isrbench/isrbench/workloads/target"
)

// TestRunSchedPolicy: sched.policy is set on every thread of the process before the target
// starts (kfake's and the clients' threads as much as the harness's), and result.json's
// env.sched records it. SCHED_OTHER first, then SCHED_BATCH: a policy not applied leaves the
// second run's threads as the first run left them.
func TestRunSchedPolicy(t *testing.T) {
	t.Cleanup(func() { sched.Apply(sched.Default) })
	for _, policy := range []string{"other", "batch"} {
		s := shortSpec(t, "target=kfake", "sched.policy="+policy, "consumers.count=1")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var during string
		res, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true, beforeClose: func(target.Target) {
			during = sched.Describe() // every thread, the target's and the clients' still running
		}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if during != policy || res.Env.Sched != policy {
			t.Errorf("sched.policy=%s: threads during the run %q, env.sched %q", policy, during, res.Env.Sched)
		}
		if res.Config["sched.policy"] != policy {
			t.Errorf("config sched.policy = %v, want %s", res.Config["sched.policy"], policy)
		}
	}
}

// TestRunSchedRefused: a kernel or sandbox that refuses the policy does not stop the run; the
// run notes why, and env.sched records the policy the threads kept.
func TestRunSchedRefused(t *testing.T) {
	if _, err := sched.Apply(sched.Other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { applySched = sched.Apply; sched.Apply(sched.Default) })
	applySched = func(sched.Policy) (int, error) { return 0, syscall.EPERM }
	s := shortSpec(t, "target=kfake", "sched.policy=batch")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatalf("a refused policy stopped the run: %v", err)
	}
	if note := res.Notes["sched"]; !strings.Contains(note, "sched.policy=batch refused") || !strings.Contains(note, syscall.EPERM.Error()) {
		t.Errorf("notes.sched = %q, want the refusal and its reason", note)
	}
	if res.Env.Sched != "other" {
		t.Errorf("env.sched = %q, want the policy the threads kept (other)", res.Env.Sched)
	}
}
