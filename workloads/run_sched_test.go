//go:build linux

package workloads

import (
	"context"
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
