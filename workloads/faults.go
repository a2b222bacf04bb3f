package workloads

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/spec"
)

// runFaults applies the spec's fault schedule relative to the start of measurement and heals
// each fault after its duration, at the latest at the end of measurement; it returns when
// every fault was applied and healed (or ctx ended, in which case applied faults are still
// healed so the cluster can be read back).
func (r *run) runFaults(ctx context.Context, measureStart, measureEnd time.Time) {
	if !r.opts.Worker.First() {
		return // worker 1 of a multi-worker run runs the schedule
	}
	var wg sync.WaitGroup
	for i, f := range r.spec.Faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.runFault(ctx, i, f, measureStart, measureEnd)
		}()
	}
	wg.Wait()
}

func (r *run) runFault(ctx context.Context, i int, f spec.Fault, measureStart, measureEnd time.Time) {
	switch f.Kind {
	case "exec":
		r.runExecFault(ctx, i, f, measureStart, measureEnd)
		return
	case "reassign":
		r.runReassignFault(ctx, i, f, measureStart)
		return
	}
	if !poll.At(ctx, measureStart.Add(f.At)) {
		return
	}
	applied := time.Now()
	rf := results.Fault{AtS: applied.Sub(measureStart).Seconds(), Time: applied.UTC(), Kind: f.Kind,
		Detail: fmt.Sprintf("faults[%d]: %s %s for %s", i, f.Kind, describeTarget(f), f.Duration)}
	target, heal, err := r.tgt.ApplyFault(ctx, r.spec.Topic.Name, f)
	rf.Target = target
	if err != nil {
		rf.Error = err.Error()
		r.addFault(i, rf)
		if !r.opts.Quiet {
			fmt.Fprintf(r.opts.Stderr, "fault %s %s: %v\n", f.Kind, f.Target, err)
		}
		return
	}
	if heal != nil {
		until := applied.Add(f.Duration)
		if until.After(measureEnd) {
			until = measureEnd
		}
		poll.At(ctx, until) // on cancel: heal at once
		if err := heal(); err != nil {
			rf.Error = "heal: " + err.Error()
		}
		rf.EndS = time.Since(measureStart).Seconds()
	}
	r.addFault(i, rf)
}

// addFault records fault i of the schedule (result.json lists them in schedule order).
func (r *run) addFault(i int, f results.Fault) {
	r.faultsMu.Lock()
	r.faults = append(r.faults, indexedFault{i, f})
	r.faultsMu.Unlock()
}

type indexedFault struct {
	i int
	f results.Fault
}

// describeTarget is the fault's target as written, with the partition for the short roles.
func describeTarget(f spec.Fault) string {
	switch f.Target {
	case "leader", "follower", "any-follower":
		return fmt.Sprintf("%s of partition %d", f.Target, f.Partition)
	}
	return f.Target
}
